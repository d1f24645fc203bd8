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
MAX_EDITS = 5  # edits named in one cause line


@dataclass
class CellStatus:
    asset: str
    partition: str | None
    status: str                 # "missing" | "stale" | "incomplete" | "fresh"
    causes: list[str] = field(default_factory=list)
    # what a replay needs of a materialized partition's own causes (`status_replay`): "own", the
    # resolver's cause lines that a config edit does not change, each with its sort key; "wide" and
    # "ext", lines of the edges `status.py` checks itself, by parent (config parents left out)
    facts: dict | None = field(default=None, compare=False, repr=False)


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


def merge_edits(records) -> list[str]:
    """The edits of source records (each a list; sources in name order, each oldest first) as one
    list: first occurrence kept, the "(first version)" of a new source left out."""
    out: list[str] = []
    for edits in records:
        out += [c for c in edits if c not in out and c != "(first version)"]
    return out


def with_edits(causes: list[str], edits: list[str]) -> list[str]:
    """Cause lines that do not say what changed get the edits, e.g. `wse_trajectories[B1|m]: has a
    new data version (wse-gen › horizon: 1 → 2)`; lines about code stay as they are."""
    if not edits:
        return causes
    shown = "; ".join(edits[:MAX_EDITS]) + (f"; and {len(edits) - MAX_EDITS} more" if len(edits) > MAX_EDITS else "")
    return [c if c.endswith(")") or c.startswith("code:") else f"{c} ({shown})" for c in causes]


def report_lines(rows: list[CellStatus], only_problems: bool = True) -> list[str]:
    """The rows as `wse status` prints them (fresh ones only if not `only_problems`), then the counts."""
    lines: list[str] = []
    for r in rows:
        if only_problems and r.status == FRESH:
            continue
        where = f"[{r.partition}]" if r.partition else ""
        lines.append(f"{r.status:10s} {r.asset}{where}")
        lines += [f"           - {c}" for c in r.causes]
    counts = {s: sum(r.status == s for r in rows) for s in ("stale", "missing", "incomplete")}
    lines.append(f"{counts['stale']} stale, {counts['missing']} missing, {counts['incomplete']} incomplete")
    return lines
