"""The platform's own time per cell (issue 24 item 3): a cell rerun whose every answer is cached.

Takes a folder left by `bench/fleet.py` (its `wse.yaml`, warehouse, LLM cache and Dagster home;
e.g. /tmp/wse-fleet-XXXX/wse) and re-materializes `--cells` of its cells with
`wse materialize --partition ... --parallel 1` in one fresh process. Every LLM answer comes from
the cache, so what remains is the platform: run creation, the event log, warehouse writes, the
asset checks (`in_sync` over every cell of the grid) and, once per process, imports and the
definitions. Prints the command's wall and CPU time, each run's wall time as the CLI reports it,
and with `--profile` the 30 most expensive functions of ours and Dagster's (cumulative).

    python bench/cell_overhead.py /tmp/wse-fleet-XXXX/wse --cells 3 [--select group:wse_cells group:wse_verdicts] [--profile]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description="platform time per cached cell rerun")
    ap.add_argument("folder", type=Path)
    ap.add_argument("--cells", type=int, default=3)
    ap.add_argument("--select", nargs="+", default=["group:wse_cells", "group:wse_verdicts"])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    cfg = args.folder / "wse.yaml"
    raw = yaml.safe_load(cfg.read_text())
    models = raw["wse"]["models"]
    archs = raw["wse"].get("architectures") or ["B1", "B1+WMOD", "B1+WMEM", "B1+WMEM+WMOD", "B2", "B2+WMOD",
                                                "B2+WMEM", "B2+WMEM+WMOD", "B3", "B3+WMOD", "B3+WMEM",
                                                "B3+WMEM+WMOD"]
    cells = [f"{a}|{m}" for m in models for a in archs][: args.cells]
    env = {**os.environ, "DAGSTER_HOME": str(args.folder / "dagster_home"), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable] + (["-m", "cProfile", "-o", str(args.folder / "cell_overhead.prof")] if args.profile
                              else []) + ["-m", "wse_platform.cli", "--config", str(cfg), "materialize",
                                          "--select", *args.select, "--partition", *cells, "--parallel", "1"]
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - t0
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    runs = [float(x) for x in re.findall(r"ok \((\d+\.\d+)s\)", out.stdout)]
    print(out.stdout[-3000:])
    print(f"command: {wall:.1f} s wall, {cpu:.1f} s CPU (load average {os.getloadavg()[0]:.1f}); "
          f"{len(cells)} cells; runs: {', '.join(f'{r:.1f}' for r in runs)} s")
    if args.profile:
        import pstats
        pstats.Stats(str(args.folder / "cell_overhead.prof")).sort_stats("cumulative").print_stats(
            r"(wse_platform|assets|resources|dagster/_core/(instance|storage))", 30)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
