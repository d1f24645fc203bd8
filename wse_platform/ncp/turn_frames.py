"""An NCP cell's `ncp_turns` frame made episode by episode while the cell runs (issue 24).

The last cell of a fleet command ends after the fleet's last answer: its rows become frames and are written
while no request is in flight. At t_max 25 a cell's turn rows (~2,600 rows, ~20 MB of ledger, commitment and
memory JSON) took 0.04-0.12 s to become one frame there (time stamps in a fleet run at 256 slots,
2026-12-04). Here each episode's rows become a frame as soon as the episode has ended (in its thread, inside the
request span), and the cell's frame is their concatenation in the result's order: the frame
`turn_frame(result.turn_rows())` gives (an episode seen with other rows is made again at the end).
"""
from __future__ import annotations

import threading
from typing import Any

from wse_platform.ncp.episode import turn_frame


class TurnFrames:
    """`add(runs)` as each episode ends (`run_episodes(on_episode=...)`), `frame(result)` once at the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[int, tuple[Any, int, Any]] = {}   # id(run) -> (the run, its rows' count, their frame)

    def add(self, runs: list) -> None:
        for run in runs:
            if run.failed:
                continue
            rows = list(run.turn_rows)
            frame = turn_frame(rows)
            with self._lock:
                self._made[id(run)] = (run, len(rows), frame)

    def frame(self, result):
        """The cell's turn frame: the frames made as episodes ended, in `result.runs` order, FAILED ones left out."""
        import polars as pl

        parts = []
        for run in result.runs:
            if run.failed:
                continue
            with self._lock:
                made = self._made.get(id(run))
            if made is None or made[0] is not run or made[1] != len(run.turn_rows):
                parts.append(turn_frame(list(run.turn_rows)))
            else:
                parts.append(made[2])
        # one chunk: DuckDB's insert of ~100 chunks cost ~0.06 s more CPU than the 22 MB rechunk (~0.005 s)
        return pl.concat(parts, rechunk=True) if parts else turn_frame([])
