"""The last NCP cell's writes after the fleet's last answer: one frame and three warehouse opens (before) vs the
episodes' frames made as they ended and one open (`assets/ncp/episodes.py`, `wse_platform/ncp/turn_frames.py`).

Takes a cell's rows from a finished `bench/fleet.py` folder (default: the HiAgent cell, the largest rows), copies
its warehouse, and times alternately, `--rounds` times each, what the cell's run does after `run_episodes` returns:
  old: `turn_frame(all rows)`, then `ncp_episodes`, `ncp_turns`, `ncp_failed_episodes` written, each with its own
       warehouse open;
  new: the per-episode frames (made beforehand, as the episodes end: not timed) concatenated, the same three
       writes inside one `Warehouse.held()`.
Prints wall and CPU seconds (medians) and the load. Run from the repository root:

    PYTHONPATH=$PWD python bench/ncp_cell_tail.py /tmp/wse-fleet-x/ncp [--arch memory+adversarial] [--rounds 5]

Found (2026-12-04 ~16:55 UTC, helper start, the HiAgent cell's rows of an NCP 256-slot t_max 25 fleet run: 2,600
turn rows, 21.7 MB of ledger, commitment and memory JSON; load 5.5 from other helpers' runs): old 0.460 s wall /
0.263 CPU s, new 0.354 s / 0.203 CPU s (medians of 7). Left in ~100 chunks the concatenated frame cost DuckDB's
insert ~0.06 CPU s more (hence the rechunk). In that fleet run, with time stamps, the same work took 0.12 s (frame)
+ 0.28 s (writes) of the cell's 1.29 s after the fleet's last answer.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    import polars as pl

    from wse_platform.ncp.episode import episode_frame, failed_frame, turn_frame
    from wse_platform.warehouse import Warehouse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="a finished bench/fleet.py folder of the NCP design (<workdir>/ncp)")
    ap.add_argument("--arch", default="memory+adversarial")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wse-ncp-tail-"))
    try:
        shutil.copy(Path(args.folder) / "wh.duckdb", tmp / "wh.duckdb")
        wh = Warehouse(tmp / "wh.duckdb")
        turns = wh.query("SELECT * FROM ncp_turns WHERE arch = ? ORDER BY spec_id, turn", [args.arch])
        eps_rows = wh.query("SELECT * FROM ncp_episodes WHERE arch = ?", [args.arch]).to_dicts()
        key = {"model": turns["model"][0], "arch": args.arch, "auditor_id": turns["auditor_id"][0]}
        rows = turns.to_dicts()
        by_episode: dict[str, list] = {}
        for r in rows:
            by_episode.setdefault(r["spec_id"], []).append(r)
        made = [turn_frame(v) for v in by_episode.values()]   # as `TurnFrames.add` makes them while episodes end
        fkey = {"analysis": "ncp_episodes", **key}

        def failed():
            return failed_frame([]).with_columns(pl.lit(0, dtype=pl.Int64).alias("retry_round"),
                                                 pl.lit(fkey["analysis"], dtype=pl.Utf8).alias("analysis"))

        def old() -> None:
            frame = turn_frame(rows)
            wh.replace_partition("ncp_episodes", episode_frame(eps_rows), key)
            wh.replace_partition("ncp_turns", frame, key)
            wh.replace_partition("ncp_failed_episodes", failed(), fkey)

        def new() -> None:
            frame = pl.concat(made, rechunk=True)   # as `TurnFrames.frame`
            with wh.held():
                wh.replace_partition("ncp_episodes", episode_frame(eps_rows), key)
                wh.replace_partition("ncp_turns", frame, key)
                wh.replace_partition("ncp_failed_episodes", failed(), fkey)

        assert pl.concat(made).equals(turn_frame(rows))
        times: dict[str, list] = {"old": [], "new": []}
        load0 = os.getloadavg()[0]
        for n in range(args.rounds):
            for name, fn in ((("old", old), ("new", new)) if n % 2 == 0 else (("new", new), ("old", old))):
                t, c = time.perf_counter(), time.process_time()
                fn()
                times[name].append((time.perf_counter() - t, time.process_time() - c))
        print(f"{len(rows)} turn rows ({turns.estimated_size() / 1e6:.1f} MB), {args.rounds} rounds, "
              f"load {load0:.1f}-{os.getloadavg()[0]:.1f}")
        for name, ts in times.items():
            print(f"  {name}: {statistics.median(w for w, _ in ts):.3f} s wall, "
                  f"{statistics.median(c for _, c in ts):.3f} s CPU (medians)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
