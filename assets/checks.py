"""Asset checks for every lineage, shown in the UI next to each table (all non-blocking).

This module composes them: the generic, table-driven checks (duplicates, bounds, health) are here;
what is specific to a benchmark (its natural keys, bounds, usable rows, coverage checks) lives in
`assets/wse/checks.py`, `assets/ncp/checks.py` and `assets/endings/checks.py`; the building blocks
in `assets/check_kit.py` (a check that examined nothing warns, it does not pass).

Three families, each a plain function of the warehouse (``evaluate_*``), so tests can call the
evaluation without Dagster:

- **no duplicates**: the natural key of every table a partitioned asset writes (``NATURAL_KEYS``)
  is unique within the partition — a duplicate means an idempotent write broke.
- **verdict coverage**: every valid step / turn / prediction has its verdicts from the *current*
  judge configuration (WSE consistency and richness, NCP conflict reports and re-audits,
  100-Endings Y/N verdicts).
- **metric bounds**: percentages in [0, 100], shares, no-rates, survival and inflection rates
  in [0, 1] (``BOUNDS``), and the NCP spec statistics equal the paper's Table 6.

Checks of partitioned assets are partitioned the same way, so a run of one cell checks that
cell (and the UI shows a status per cell). The checks of one partitioning form one
``multi_asset_check`` (subsettable): a run executes only the checks of the assets it
materialized, in one step. Each result carries the number of offending rows and a few examples.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import contextlib
import contextvars
import functools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from dagster import (AssetCheckKey, AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, AssetKey, MetadataValue,
                     multi_asset_check)

from assets.check_kit import (EXAMPLES, TOLERANCE, Bound, CheckDef, Evaluate, partition_filter,  # noqa: F401
                              result, scope, where_sql)
from assets.endings import checks as endings_checks
from assets.endings.checks import evaluate_endings_verdict_coverage  # noqa: F401
from assets.ncp import checks as ncp_checks
from assets.ncp.checks import (PAPER_N_SPECS, PAPER_TABLE6, TABLE6_CHECK, evaluate_ncp_conflict_reports,  # noqa: F401
                               evaluate_ncp_reaudit_coverage, evaluate_table6, table6_mismatches)
from assets.partitions import BenchmarkPartitions
from assets.wse import checks as wse_checks
from assets.wse.checks import (evaluate_wse_consistency_coverage, evaluate_wse_richness_coverage,  # noqa: F401
                               missing_consistency_votes)
from resources import SettingsResource, WarehouseResource
from wse_platform.config import Settings
from wse_platform.dagster_private import check_targets_shared, newest_target
from wse_platform.warehouse import Warehouse

BENCHMARKS = (wse_checks, ncp_checks, endings_checks)
# Partition columns first. Verdict tables carry the judge configuration, so the verdicts of
# older configurations (kept on purpose) are not duplicates.
NATURAL_KEYS: dict[str, tuple[str, ...]] = {t: k for m in BENCHMARKS for t, k in m.NATURAL_KEYS.items()}
# Which partitions definition (field of BenchmarkPartitions) each partitioned table uses.
PARTITIONING: dict[str, str] = {t: k for m in BENCHMARKS for t, k in m.PARTITIONING.items()}
BOUNDS: dict[str, list[Bound]] = {t: b for m in BENCHMARKS for t, b in m.BOUNDS.items()}
# What a row must have to be usable, per partitioned table an LLM writes (SQL condition).
USABLE: dict[str, str] = {t: c for m in BENCHMARKS for t, c in m.USABLE.items()}
COVERAGE_CHECKS: tuple[CheckDef, ...] = tuple(c for m in BENCHMARKS for c in m.CHECKS)


# ---- no duplicates -----------------------------------------------------------------------
def table_summary(wh: Warehouse, table: str, where: Mapping[str, Any]) -> dict[str, Any]:
    """What a check step asks of a partitioned table, in one pass (one query): its rows in the scope
    `where` (`n`), the usable ones (`usable`, where the table has a `USABLE` condition, else None) and
    its natural-key values that occur more than once (`dups`: the key columns and their count `n`). Once per table and scope in `counts_shared`
    (`no_duplicate_rows` and `produced_usable_rows` of a cell read the same rows)."""
    memo = _STEP_COUNTS.get()
    memo_key = ("summary", str(wh.path), table, tuple(where.items()))
    if memo is not None and memo_key in memo:
        return memo[memo_key]
    key = NATURAL_KEYS[table]
    cols = ", ".join(f'"{c}"' for c in key)
    clause, params = where_sql(where)
    usable = f"count(*) FILTER (WHERE {USABLE[table]})" if table in USABLE else "NULL"
    # one row per duplicated key (n > 1), each with the scope's totals; one row of NULL keys with the
    # totals when no key is duplicated
    df = wh.query(
        f'WITH g AS (SELECT {cols}, count(*) AS n, {usable} AS u FROM "{table}" WHERE {clause} GROUP BY {cols}), '
        "s AS (SELECT coalesce(sum(n), 0) AS total_, sum(u) AS usable_ FROM g) "
        f"SELECT d.*, s.total_, s.usable_ FROM s LEFT JOIN (SELECT {cols}, n FROM g WHERE n > 1) d ON TRUE "
        f"ORDER BY {', '.join(f'd.{c}' for c in cols.split(', '))}", params)
    n = int(df["total_"][0])
    out = {"n": n, "usable": None if table not in USABLE else int(df["usable_"][0] or 0),
           "dups": df.filter(pl.col("n").is_not_null()).select(*key, "n")}
    if memo is not None:
        memo[memo_key] = out
    return out


def evaluate_no_duplicates(wh: Warehouse, table: str, where: Mapping[str, Any]) -> AssetCheckResult:
    summary = table_summary(wh, table, where)
    dups, total = summary["dups"], summary["n"]
    extra_rows = int((dups["n"] - 1).sum()) if dups.height else 0
    return result(dups, int(dups["n"].sum()) if dups.height else 0,
                  f"rows share their natural key {NATURAL_KEYS[table]} with another row", total,
                  {"n_duplicate_keys": dups.height, "n_extra_rows": extra_rows,
                   "natural_key": ", ".join(NATURAL_KEYS[table]), **scope(where)})


# ---- bounds --------------------------------------------------------------------------
def out_of_bounds(wh: Warehouse, table: str, bounds: Sequence[Bound], where: Mapping[str, Any]) -> pl.DataFrame:
    """One row per (row, column) outside its bounds: the column, its value, the bounds and the row's
    leading (identifying) columns. NULL means undefined and passes; NaN counts as outside."""
    clause, params = where_sql(where)
    ids = [c for c in wh.query(f'SELECT * FROM "{table}" LIMIT 0').columns
           if c not in {b.column for b in bounds} and not c.endswith("_json")][:4]
    id_cols = "".join(f', "{c}"' for c in ids)
    frames = []
    for b in bounds:
        df = wh.query(
            f"SELECT '{b.column}' AS \"column\", CAST(\"{b.column}\" AS DOUBLE) AS value, "
            f"CAST(? AS DOUBLE) AS lo, CAST(? AS DOUBLE) AS hi{id_cols} FROM \"{table}\" "
            f'WHERE {clause} AND ({b.rows}) AND "{b.column}" IS NOT NULL '
            f'AND (isnan(CAST("{b.column}" AS DOUBLE)) OR "{b.column}" < ? OR "{b.column}" > ?)',
            [b.lo, b.hi, *params, b.lo - TOLERANCE, b.hi + TOLERANCE])
        frames.append(df)
    return pl.concat(frames, how="vertical_relaxed")


def evaluate_bounds(wh: Warehouse, table: str, where: Mapping[str, Any] | None = None) -> AssetCheckResult:
    where = where or {}
    bad = out_of_bounds(wh, table, BOUNDS[table], where)
    clause, params = where_sql(where)
    n = int(wh.query(f'SELECT count(*) AS n FROM "{table}" WHERE {clause}', params)["n"][0])
    return result(bad, bad.height, "values lie outside their bounds", n, {
        "bounds": MetadataValue.md("\n".join(f"- `{b.column}` in [{b.lo:g}, {b.hi:g}]"
                                             + ("" if b.rows == "TRUE" else f" where {b.rows}")
                                             for b in BOUNDS[table])), **scope(where)})


# ---- health: nothing usable, failed LLM calls, empty tables (warnings) ----------------------
# Share of a cell's LLM requests that ended without a valid answer, or with a cut answer / prompt,
# above which its latest materialization is flagged (a warning: the rows are kept, as the papers do).
MAX_FAILED_SHARE = 0.2


def evaluate_usable_rows(wh: Warehouse, table: str, where: Mapping[str, Any]) -> AssetCheckResult:
    """The partition has at least one usable row (e.g. a narrated step, a story that was written)."""
    summary = table_summary(wh, table, where)  # every table with a USABLE condition has a natural key
    n, usable = summary["n"], summary["usable"]
    return AssetCheckResult(
        passed=usable > 0, severity=AssetCheckSeverity.WARN,
        description=None if usable else (f"nothing usable: {n} rows, none with {USABLE[table]}" if n
                                         else "nothing usable: the partition has no rows"),
        metadata={"n_rows": n, "n_usable": usable, "usable_means": USABLE[table], **scope(where)})


# (warehouse, run, partition) -> counts, while one check step evaluates: a cell's tables were
# all written by the same run, so their `llm_failures_below_threshold` read the same calls (once)
_STEP_COUNTS: contextvars.ContextVar = contextvars.ContextVar("llm_failure_counts", default=None)


@contextlib.contextmanager
def counts_shared():
    """`llm_failure_counts` asked again for the same run and partition (in this block) is not queried again."""
    token = _STEP_COUNTS.set({})
    try:
        yield
    finally:
        _STEP_COUNTS.reset(token)


def llm_failure_counts(wh: Warehouse, run_id: str, partition_key: str | None) -> dict[str, int]:
    """Requests, failed requests (no valid attempt) and cut ones (answer or prompt truncated) of a
    run's calls for one partition, from `llm_calls` (once per run and partition in `counts_shared`)."""
    memo = _STEP_COUNTS.get()
    key = (str(wh.path), run_id, partition_key)
    if memo is not None and key in memo:
        return dict(memo[key])
    counts = _llm_failure_counts(wh, run_id, partition_key)
    if memo is not None:
        memo[key] = dict(counts)
    return counts


def _llm_failure_counts(wh: Warehouse, run_id: str, partition_key: str | None) -> dict[str, int]:
    cols = set(wh.query("SELECT * FROM llm_calls LIMIT 0").columns)
    cut = " OR ".join([c for c in ("error_kind = 'truncated'" if "error_kind" in cols else "",
                                   "finish_reason = 'length'" if "finish_reason" in cols else "",
                                   "coalesce(prompt_truncated_tokens, 0) > 0" if "prompt_truncated_tokens" in cols
                                   else "") if c]) or "FALSE"
    part = "partition_key IS NOT DISTINCT FROM ?"
    row = wh.query(
        "SELECT count(*) AS requests, count(*) FILTER (WHERE NOT ok) AS failed, count(*) FILTER (WHERE cut) AS cut "
        f"FROM (SELECT request_key, bool_or(valid) AS ok, bool_or({cut}) AS cut FROM llm_calls "
        f"WHERE run_id = ? AND {part} GROUP BY request_key)", [run_id, partition_key]).row(0, named=True)
    return {k: int(v or 0) for k, v in row.items()}


def evaluate_llm_failures(wh: Warehouse, run_id: str | None, partition_key: str | None,
                          threshold: float = MAX_FAILED_SHARE) -> AssetCheckResult:
    counts = llm_failure_counts(wh, run_id, partition_key) if run_id else {"requests": 0, "failed": 0, "cut": 0}
    n = counts["requests"]
    failed_share = counts["failed"] / n if n else 0.0
    cut_share = counts["cut"] / n if n else 0.0
    bad = [f"{failed_share:.0%} of {n} LLM requests failed" if failed_share > threshold else "",
           f"{cut_share:.0%} were truncated (answer or prompt)" if cut_share > threshold else ""]
    return AssetCheckResult(
        passed=not any(bad), severity=AssetCheckSeverity.WARN,
        description="; ".join(b for b in bad if b) + f" (threshold {threshold:.0%})" if any(bad) else None,
        metadata={"llm_requests": n, "failed_requests": counts["failed"], "truncated_requests": counts["cut"],
                  "failed_share": failed_share, "truncated_share": cut_share, "threshold": threshold,
                  "run_id": run_id or "(none)"})


def evaluate_not_empty(wh: Warehouse, table: str) -> AssetCheckResult:
    n = int(wh.query(f'SELECT count(*) AS n FROM "{table}"')["n"][0])
    return AssetCheckResult(passed=n > 0, severity=AssetCheckSeverity.WARN,
                            description=None if n else f"{table} is empty: nothing upstream produced a row it uses",
                            metadata={"n_rows": n})


def _latest_run(context, table: str) -> str | None:
    """The run of the latest materialization of (table, this partition)."""
    from dagster import AssetRecordsFilter

    pk = context.partition_key if context.has_partition_key else None
    if pk:  # the lookup Dagster makes for the step's results on this asset (one read in check_targets_shared)
        target = newest_target(context.instance, context.run.run_id, AssetKey(table), pk)
        return target.run_id if target is not None else None
    res = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(table), asset_partitions=[pk] if pk else None), limit=1)
    return res.records[0].run_id if res.records else None


def health_check_defs(settings: Settings, parts: BenchmarkPartitions, known: Mapping[str, bool]) -> "list[CheckDef]":
    """`known`: materializable asset name -> partitioned?"""
    out = []
    for table, cond in USABLE.items():
        if table not in known or not _table_exists(table, settings, parts):
            continue
        kind = PARTITIONING[table]
        out.append(CheckDef(table, "produced_usable_rows",
                            f"The cell produced at least one usable row ({cond}); a cell whose every step failed is "
                            "flagged instead of showing green.",
                            lambda wh, s, where, t=table: evaluate_usable_rows(wh, t, where), kind))
        out.append(CheckDef(table, "llm_failures_below_threshold",
                            f"At most {MAX_FAILED_SHARE:.0%} of the LLM requests of the cell's latest run ended without "
                            "a valid answer, and at most as many were truncated (answer cut by max_tokens, or "
                            "prompt cut to fit the context window).",
                            lambda wh, s, where, ctx, t=table: evaluate_llm_failures(
                                wh, _latest_run(ctx, t), str(ctx.partition_key) if ctx.has_partition_key else None),
                            kind, needs_context=True))
    finals = sorted(t for t, partitioned in known.items() if not partitioned and _is_table(t)
                    and t not in NOT_EMPTY_EXEMPT)
    for table in finals:
        out.append(CheckDef(table, "not_empty", "The table has at least one row (an empty final table is a "
                            "failure upstream, not a result).", lambda wh, s, where, t=table: evaluate_not_empty(wh, t)))
    return out


NOT_EMPTY_EXEMPT = {"llm_calls"}  # written by the LLM resource, not by an asset run


@functools.cache
def ddl_tables() -> frozenset[str]:
    """Tables of the warehouse: created by the DDL in `sql/` or by a SQL model."""
    from assets.helpers import ddl_column_schemas
    from wse_platform.sql_models import load_models

    return frozenset(ddl_column_schemas()) | {m.name for m in load_models()}


def _is_table(name: str) -> bool:
    return name in ddl_tables()


# ---- Dagster wrappers --------------------------------------------------------------------
def _no_duplicates(table: str) -> CheckDef:
    return CheckDef(table, "no_duplicate_rows",
                    f"No two rows of a partition share the natural key ({', '.join(NATURAL_KEYS[table])}).",
                    lambda wh, s, where: evaluate_no_duplicates(wh, table, where), PARTITIONING[table])


def _bounds(table: str) -> CheckDef:
    cols = ", ".join(dict.fromkeys(b.column for b in BOUNDS[table]))
    return CheckDef(table, "metric_bounds", f"Percentages in [0, 100], shares and rates in [0, 1]: {cols}.",
                    lambda wh, s, where: evaluate_bounds(wh, table, where), PARTITIONING.get(table))



def _table_exists(table: str, settings: Settings, parts: BenchmarkPartitions) -> bool:
    """Mirror of the asset modules' build conditions (a check must not name a missing asset)."""
    if table.startswith("wse_consistency") or table == "wse_trajectory_consistency":
        return parts.wse is not None and settings.wse.consistency_judge is not None
    if table == "wse_richness_verdicts":
        return parts.wse is not None and settings.wse.richness_judge is not None
    if table in PARTITIONING:
        return getattr(parts, PARTITIONING[table]) is not None
    prefix = table.split("_", 1)[0]
    return {"wse": parts.wse, "ncp": parts.ncp, "endings": parts.endings}[prefix] is not None


def check_defs(settings: Settings, parts: BenchmarkPartitions) -> list[CheckDef]:
    """Every check whose table exists under this configuration."""
    defs = [_no_duplicates(t) for t in NATURAL_KEYS] + [_bounds(t) for t in BOUNDS] + list(COVERAGE_CHECKS)
    return [d for d in defs if _table_exists(d.table, settings, parts)] + [TABLE6_CHECK]


def _group_check(name: str, defs: list[CheckDef], pdef) -> Any:
    """All checks of one partitioning in one op: a run pays one extra step, not one per check
    (with the multiprocess executor every step is a process start), and runs only the selected ones."""
    by_key = {AssetCheckKey(AssetKey(d.table), d.name): d for d in defs}
    with warnings.catch_warnings():
        # Partitioned checks are a Dagster preview feature (1.13), used on purpose so the UI shows a
        # status per cell; tests/orchestration/test_checks.py pins the behaviour relied on.
        warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*")
        specs = [AssetCheckSpec(d.name, asset=d.table, description=d.description, blocking=False,
                                additional_deps=list(d.additional_deps) or None, partitions_def=pdef) for d in defs]

    @multi_asset_check(name=name, specs=specs, can_subset=True,
                       description=f"Data checks of the {name.removesuffix('_checks').replace('_', ' ')} tables.")
    def _checks(context, warehouse: WarehouseResource, settings: SettingsResource):
        with check_targets_shared():  # the checks of one asset describe the same materialization: read once
            wh, s = warehouse.get(), settings.get()
            results = []
            with wh.held(), counts_shared():  # many small queries: one connection (each open reads the whole catalog)
                for key in sorted(context.selected_asset_check_keys,
                                  key=lambda k: (k.asset_key.to_user_string(), k.name)):
                    d = by_key[key]
                    where = partition_filter(d.partitioning, context.partition_key) \
                        if d.partitioning is not None and context.has_partition_key else {}
                    results.append((key, d.evaluate(wh, s, where, context) if d.needs_context
                                    else d.evaluate(wh, s, where)))
            for key, r in results:  # the warehouse released: Dagster stores each result meanwhile
                yield AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=r.passed,
                                       severity=r.severity, description=r.description, metadata=r.metadata)
    return _checks


def build(settings: Settings, parts: BenchmarkPartitions, known: Mapping[str, bool] | None = None) -> list:
    """Every check op. `known`: materializable asset name -> partitioned?, of the definitions; adds the health checks (nothing
    usable in a cell, failed / truncated LLM calls, empty final table) for the tables that exist."""
    groups: dict[str | None, list[CheckDef]] = {}
    defs = check_defs(settings, parts) + (health_check_defs(settings, parts, known) if known is not None else [])
    for d in defs:
        groups.setdefault(d.partitioning, []).append(d)
    return [_group_check(f"{kind or 'final_table'}_checks", defs, getattr(parts, kind) if kind else None)
            for kind, defs in groups.items()]
