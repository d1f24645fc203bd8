"""CPU of `wse materialize --parallel` worker processes: cached cells rerun over a finished fleet folder.

Copies `<workdir>/wse` (left by `python bench/fleet.py --benchmarks wse --workdir <workdir>`; every
answer is in its response cache, so no model server is needed) and reruns
`wse materialize --select group:wse_cells --partition <cells> --parallel <len(cells)>` in the copy,
printing the wall time and the CPU seconds of the whole process tree (`fleet.TreeCpu`: workers forked
by the fork server included) with the load average. Run it with this checkout and with another
(`--code <checkout>`) back to back to compare worker start-up (spawned workers each import Dagster
and build the definitions; forked ones do not):

    python bench/worker_start.py /tmp/wse-fleet-x [--code /path/to/other/checkout] [--cells B1|fleet B2|fleet ...]
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
    ap = argparse.ArgumentParser(description="tree CPU of cached WSE cells rerun with --parallel")
    ap.add_argument("workdir")
    ap.add_argument("--code", default=str(REPO), help="the checkout whose wse_platform runs (default: this one)")
    ap.add_argument("--cells", nargs="+", default=["B1|fleet", "B2|fleet", "B3|fleet", "B1+WMOD|fleet"])
    args = ap.parse_args()
    src = Path(args.workdir) / "wse"
    dst = Path(tempfile.mkdtemp(prefix="wse-workers-")) / "wse"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    (dst / "wse.yaml").write_text((dst / "wse.yaml").read_text().replace(str(src), str(dst)))
    env = {**os.environ, "DAGSTER_HOME": str(dst / "dagster_home"), "PYTHONPATH": args.code}
    cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(dst / "wse.yaml"), "materialize",
           "--select", "group:wse_cells", "--partition", *args.cells, "--parallel", str(len(args.cells))]
    load0, t0 = os.getloadavg()[0], time.time()
    proc = subprocess.Popen(cmd, cwd=args.code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree = TreeCpu(proc.pid, every=0.1)
    rc = proc.wait()
    print(json.dumps({"code": args.code, "cells": len(args.cells), "rc": rc, "wall_s": round(time.time() - t0, 1),
                      "tree_cpu_s": tree.total(), "load_avg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)]}))
    shutil.rmtree(dst.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
