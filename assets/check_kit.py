"""Building blocks of the asset checks (`assets/checks.py` composes them; the benchmark-specific checks
live in `assets/{wse,ncp,endings}/checks.py`): the SQL scope of a partition, the result of a check
that counts offending rows, bounds, and `CheckDef` (one check, a plain function of the warehouse).

A check that examined nothing does not pass: `result` with `checked == 0` is a *warning*
("examined nothing"), never a green check over an empty scope (e.g. `every_turn_audited` on a cell
whose turns all ended in an invalid output).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from assets.helpers import markdown_preview
from assets.partitions import cell_of
from wse_platform.config import Settings
from wse_platform.warehouse import Warehouse

EXAMPLES = 5          # offending rows shown in the check's metadata
TOLERANCE = 1e-9      # float slack for the bounds (e.g. 100.00000000000001)


@dataclass(frozen=True)
class Bound:
    """`column` must lie in [lo, hi] on the rows matching the SQL condition `rows` (NULL = undefined, allowed)."""
    column: str
    lo: float
    hi: float
    rows: str = "TRUE"


def pct(*cols: str, rows: str = "TRUE") -> list[Bound]:
    return [Bound(c, 0.0, 100.0, rows) for c in cols]


def unit(*cols: str, rows: str = "TRUE") -> list[Bound]:
    return [Bound(c, 0.0, 1.0, rows) for c in cols]


# ---- helpers -----------------------------------------------------------------------------
def partition_filter(kind: str, partition_key: Any) -> dict[str, str]:
    """Column values of one partition of a partitions definition (`BenchmarkPartitions` field)."""
    if kind in ("wse", "ncp"):
        model, arch = cell_of(partition_key)
        return {"model": model, "arch": arch}
    if kind == "ncp_extraction":
        return {"extraction_model": str(partition_key)}
    if kind == "endings":
        return {"set_key": str(partition_key)}
    raise ValueError(f"unknown partitioning {kind!r}")


def where_sql(where: Mapping[str, Any], extra: str = "TRUE", alias: str = "") -> tuple[str, list[Any]]:
    """SQL condition `col = ?` for each scope column (prefixed with `alias.`), and the parameters."""
    prefix = f"{alias}." if alias else ""
    parts = [f'{prefix}"{c}" = ?' for c in where] + [f"({extra})"]
    return " AND ".join(parts), list(where.values())


def result(offending: pl.DataFrame, n_offending: int, what: str, checked: int,
           extra: Mapping[str, Any] | None = None, examined: str = "rows") -> AssetCheckResult:
    """Passed when nothing offends among `checked` `examined` things (an error otherwise); with
    nothing to examine, a warning that says so: a check over an empty scope proves nothing."""
    meta = {"n_offending": n_offending, "n_checked": checked,
            "examples": MetadataValue.md(markdown_preview(offending, rows=EXAMPLES)), **(extra or {})}
    if checked == 0 and n_offending == 0:
        where = (extra or {}).get("scope")
        return AssetCheckResult(passed=False, severity=AssetCheckSeverity.WARN, metadata=meta,
                                description=f"examined nothing: no {examined}" + (f" ({where})" if where else "")
                                + " — the check has nothing to confirm")
    return AssetCheckResult(passed=n_offending == 0, severity=AssetCheckSeverity.ERROR,
                            description=f"{n_offending} {what}" if n_offending else None, metadata=meta)


def scope(where: Mapping[str, Any]) -> dict[str, str]:
    return {"scope": ", ".join(f"{k}={v}" for k, v in where.items()) or "whole table"}


Evaluate = Callable[[Warehouse, Settings, Mapping[str, Any]], AssetCheckResult]


@dataclass(frozen=True)
class CheckDef:
    """One check: the table (asset) it is about, its evaluation and the partitioning of its scope."""
    table: str
    name: str
    description: str
    evaluate: Evaluate
    partitioning: str | None = None          # field of BenchmarkPartitions; None = unpartitioned table
    additional_deps: tuple[str, ...] = ()
    needs_context: bool = False              # evaluate(wh, settings, where, context): reads the instance

