"""What `in_sync` costs in a cached cell rerun, counted (load-independent): one profiled
`wse materialize` of one cell (sources, the cell, the final tables; every answer cached) in a copy
of a folder made by `bench/cell_overhead.py --fresh`, and per function of the status computation
and the event log the number of calls and their CPU seconds (cProfile with a CPU-time timer).

    python bench/cell_overhead.py --fresh --cells 3 --workdir /tmp/cell-x     # once: the folder
    python bench/in_sync_cost.py /tmp/cell-x [--cell 'B1|fleet']              # this checkout's code

Compare two checkouts by running each one's copy of this script on the same folder (it copies the
folder first, so both start from the same state)."""
from __future__ import annotations

import argparse
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from cell_overhead import SELECT, cells_of, copy_folder, env_for, profiled  # noqa: E402

COUNTED = ("compute_status", "event_marks", "_status_of", "fetch_materializations", "get_asset_records",
           "fetch_observations", "store_event", "report_runless_asset_event", "own_verdict", "sync_checks",
           "report_changed_verdicts", "run_in_location")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--cell", help="the cell to rerun (default: the config's first)")
    ap.add_argument("--keep-profile", type=Path, help="also copy the cProfile stats to this file")
    args = ap.parse_args()
    cfg = copy_folder(args.folder, "in-sync-cost-")
    work = cfg.parent
    cell = args.cell or cells_of(cfg, 1)[0]
    prof = work / "in_sync_cost.prof"
    cmd = [sys.executable, *profiled(prof), "--config", str(cfg), "materialize", "--select", *SELECT,
           "--partition", cell, "--parallel", "1"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, env=env_for(work), capture_output=True, text=True)
    print(f"{REPO.name}: `wse materialize --partition {cell}` (cached rerun) exit {out.returncode} "
          f"in {time.perf_counter() - t0:.1f} s wall")
    if out.returncode != 0 or not prof.exists():
        print(out.stdout[-2000:] + out.stderr[-2000:])
        return 1
    stats = pstats.Stats(str(prof)).stats
    total = sum(v[2] for v in stats.values())
    print(f"CPU seconds profiled: {total:.1f}")
    for name in COUNTED:
        rows = [v for k, v in stats.items() if k[2] == name]
        print(f"  {name:28s} calls {sum(v[1] for v in rows):6d}   CPU s (cumulative) {max((v[3] for v in rows), default=0):7.2f}")
    if args.keep_profile:
        shutil.copy(prof, args.keep_profile)
    shutil.rmtree(work.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
