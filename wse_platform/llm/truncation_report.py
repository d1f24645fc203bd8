"""The truncated-call block of `wse status`: a token budget set too low is seen at once.

One aggregated, read-only query over `llm_calls` (no DDL, no write lock kept): the share of
attempts recorded as `truncated` (answer cut by max_tokens, a failure), overall, per benchmark
(the role's prefix) and for the role × model with the highest share. Details: `llm_usage`.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

_QUERY = """
SELECT split_part(role, '.', 1) AS benchmark, role, model,
       count(*) AS calls,
       count(*) FILTER (WHERE error_kind = 'truncated') AS truncated,
       count(*) FILTER (WHERE finish_reason = 'length') AS cut
FROM llm_calls GROUP BY ALL
"""


def truncation_rows(warehouse_path: str | Path, lock_timeout: float = 3.0) -> list[tuple[str, str, str, int, int, int]] | None:
    """(benchmark, role, model, calls, truncated, answers cut) per role × model; [] when the
    warehouse or its `llm_calls` table does not exist or is empty; None when it cannot be read
    within a few seconds (a run holds it)."""
    from wse_platform.warehouse import Warehouse, WarehouseError

    path = Path(warehouse_path)
    if not path.exists():
        return []
    with contextlib.suppress(WarehouseError, duckdb.Error):
        # short lock wait: status must stay fast while a run writes to the warehouse
        with Warehouse(path, lock_timeout=lock_timeout).connect(read_only=True) as con:
            exists = con.execute("SELECT count(*) FROM information_schema.tables "
                                 "WHERE table_schema = 'main' AND table_name = 'llm_calls'").fetchone()[0]
            if exists:
                return [tuple(r) for r in con.execute(_QUERY).fetchall()]
            return []
    return None


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "0.0 %"


NOT_READ = "LLM calls: not read (the warehouse is busy or unreadable; see `llm_usage` later)"


def truncation_lines(warehouse_path: str | Path, lock_timeout: float = 3.0) -> list[str]:
    """The lines `wse status` prints (none when the warehouse has no LLM calls)."""
    rows = truncation_rows(warehouse_path, lock_timeout)
    if rows is None:
        return [NOT_READ]
    calls = sum(r[3] for r in rows)
    if not calls:
        return []
    trunc = sum(r[4] for r in rows)
    cut = sum(r[5] for r in rows)
    lines = [f"LLM calls: {calls}, truncated {_pct(trunc, calls)} ({trunc}); "
             f"answers cut by max_tokens {_pct(cut, calls)}"]
    by_bench: dict[str, list[int]] = {}
    for bench, _role, _model, n, t, _c in rows:
        acc = by_bench.setdefault(bench, [0, 0])
        acc[0] += n
        acc[1] += t
    lines.append("  truncated by benchmark: " + ", ".join(
        f"{b} {_pct(t, n)} of {n}" for b, (n, t) in sorted(by_bench.items())))
    worst = max(rows, key=lambda r: (r[4] / r[3], r[4]))
    if worst[4]:
        lines.append(f"  most truncated: {worst[1]} / {worst[2]} {_pct(worst[4], worst[3])} of {worst[3]} "
                     "(raise its max_tokens; per run: `wse sql 'SELECT * FROM llm_usage'`)")
    return lines
