"""The parts of a `wse status` row that need no Dagster: the statuses, the row type and how one
partition's status follows from its own stale causes and its parents' statuses.

`status.py` feeds it what Dagster's records say; `status_replay.py` what the last full check saved
plus a config edit. One combination rule for both, so they cannot drift apart.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

MISSING, STALE, INCOMPLETE, FRESH = "missing", "stale", "incomplete", "fresh"
MAX_LISTED = 5  # upstream partitions named in one cause line


@dataclass
class CellStatus:
    asset: str
    partition: str | None
    status: str                 # "missing" | "stale" | "incomplete" | "fresh"
    causes: list[str] = field(default_factory=list)


def listed(pks: list[str | None]) -> str:
    if pks == [None]:
        return "(unpartitioned)"
    shown = ", ".join(str(p) for p in pks[:MAX_LISTED])
    return shown + (f" and {len(pks) - MAX_LISTED} more" if len(pks) > MAX_LISTED else "")


def combine(stale: bool, causes: list[str], parents: list[tuple[str, list[str | None]]],
            seen: Callable[[str, str | None], str | None],
            wide_edge: Callable[[str, list[str | None]], list[str]]) -> tuple[str, list[str]]:
    """Status and cause lines of one materialized partition.

    `stale`/`causes`: what its own records say (Dagster's resolver, the config edges it does not
    check); `parents`: (materializable parent, the partitions of it this one reads), by name;
    `seen(parent, pk)`: the status already given to that parent partition; `wide_edge(parent, pks)`:
    cause lines for an edge Dagster does not check (≥ 100 upstream partitions), else []."""
    causes = list(causes)
    incomplete: list[str] = []
    for parent, ppks in parents:
        up = [p for p in ppks if seen(parent, p) == STALE]
        if up:
            stale = True
            causes.append(f"{parent}: upstream {listed(up)} stale")
        gone = [p for p in ppks if seen(parent, p) == MISSING]
        if gone:
            incomplete.append(f"{parent}: upstream {listed(gone)} missing")
        partial = [p for p in ppks if seen(parent, p) == INCOMPLETE]
        if partial:
            incomplete.append(f"{parent}: upstream {listed(partial)} incomplete")
        wide = wide_edge(parent, ppks)
        if wide:
            stale = True
            causes += wide
    if stale:
        return STALE, causes
    if incomplete:
        return INCOMPLETE, incomplete
    return FRESH, []
