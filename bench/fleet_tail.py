"""The tail of a fleet command, alone: the final tables rebuilt over a finished `bench/fleet.py` folder.

Copies `<workdir>/<benchmark>` (left by `python bench/fleet.py --workdir <workdir> ...`) and runs
`python -m wse_platform.cli materialize --select group:<benchmark>_tables [--parallel P]` in the copy
`--repeat` times (no model server: the tables read the warehouse only), printing per run the wall
time, the CPU seconds of the whole process tree (`fleet.TreeCpu`: worker processes forked by the
fork server included) and the load average. Run from the repository root:

    python bench/fleet_tail.py /tmp/wse-fleet-x --benchmark ncp [--parallel 4] [--repeat 2]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import REPO, TreeCpu  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description="the final tables of a finished fleet folder, timed")
    ap.add_argument("workdir")
    ap.add_argument("--benchmark", default="wse")
    ap.add_argument("--parallel", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    src = Path(args.workdir) / args.benchmark
    for n in range(args.repeat):
        folder = Path(tempfile.mkdtemp(prefix="wse-tail-")) / args.benchmark
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.lock"))
        text = (folder / "wse.yaml").read_text().replace(str(src), str(folder))
        (folder / "wse.yaml").write_text(text)
        env = {**os.environ, "DAGSTER_HOME": str(folder / "dagster_home"), "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(folder / "wse.yaml"), "materialize",
               "--select", f"group:{args.benchmark}_tables", *(("--parallel", str(args.parallel)) if args.parallel else ())]
        load0, t0 = os.getloadavg()[0], time.time()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tree = TreeCpu(proc.pid)
        out = proc.communicate()[0]
        cpu = tree.total()
        print(json.dumps({"benchmark": args.benchmark, "run": n, "rc": proc.returncode, "parallel": args.parallel,
                          "wall_s": round(time.time() - t0, 1), "tree_cpu_s": cpu,
                          "load_avg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
                          "runs": [line.strip() for line in out.splitlines() if "ok (" in line or "FAILED" in line]}),
              flush=True)
        shutil.rmtree(folder.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
