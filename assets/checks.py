"""Asset checks for every lineage, shown in the UI next to each table (all non-blocking).

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
import functools
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from dagster import (AssetCheckKey, AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, AssetKey, MetadataValue,
                     multi_asset_check)

from assets.helpers import markdown_preview
from assets.ncp.episodes import reaudit_auditors
from assets.partitions import BenchmarkPartitions, cell_of
from resources import SettingsResource, WarehouseResource
from wse_platform.config import JudgeConfig, Settings
from wse_platform.endings.judge import judge_config_id
from wse_platform.warehouse import Warehouse
from wse_platform.wse.judges import CONSISTENCY_ROLE, RICHNESS_ROLE, aggregate_step
from wse_platform.wse.schemas import ConsistencyVerdict

EXAMPLES = 5          # offending rows shown in the check's metadata
TOLERANCE = 1e-9      # float slack for the bounds (e.g. 100.00000000000001)

# ---- natural keys ------------------------------------------------------------------------
# Partition columns first. Verdict tables carry the judge configuration, so the verdicts of
# older configurations (kept on purpose) are not duplicates.
NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "wse_trajectory_steps": ("model", "arch", "seed_id", "step"),
    "wse_trajectories": ("model", "arch", "seed_id"),
    "wse_consistency_verdicts": ("model", "arch", "judge_config_id", "seed_id", "step", "judge_index"),
    "wse_consistency_steps": ("model", "arch", "judge_config_id", "seed_id", "step"),
    "wse_trajectory_consistency": ("model", "arch", "judge_config_id", "seed_id"),
    "wse_richness_verdicts": ("model", "arch", "judge_config_id", "seed_id", "judge_index"),
    "ncp_episodes": ("model", "arch", "spec_id"),
    "ncp_turns": ("model", "arch", "spec_id", "turn"),
    "ncp_reaudit_episodes": ("model", "arch", "auditor_id", "spec_id"),
    "ncp_reaudit_turns": ("model", "arch", "auditor_id", "spec_id", "turn"),
    "ncp_spec_extraction": ("extraction_model", "spec_id"),
    "ncp_extraction_comparison": ("extraction_model", "spec_id", "quantity"),
    "endings_stories": ("set_key", "story_id"),
    "endings_positions": ("set_key", "story_id", "position"),
    "endings_predictions": ("set_key", "story_id", "position", "sample_index", "repeat"),
    "endings_verdicts": ("set_key", "judge_config_id", "story_id", "position", "sample_index", "repeat"),
}
# Which partitions definition (field of BenchmarkPartitions) each partitioned table uses.
PARTITIONING: dict[str, str] = {
    **{t: "wse" for t in NATURAL_KEYS if t.startswith("wse_")},
    **{t: "ncp" for t in ("ncp_episodes", "ncp_turns", "ncp_reaudit_episodes", "ncp_reaudit_turns")},
    "ncp_spec_extraction": "ncp_extraction", "ncp_extraction_comparison": "ncp_extraction",
    **{t: "endings" for t in NATURAL_KEYS if t.startswith("endings_")},
}


# ---- bounds ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    """`column` must lie in [lo, hi] on the rows matching the SQL condition `rows` (NULL = undefined, allowed)."""
    column: str
    lo: float
    hi: float
    rows: str = "TRUE"


def _pct(*cols: str, rows: str = "TRUE") -> list[Bound]:
    return [Bound(c, 0.0, 100.0, rows) for c in cols]


def _unit(*cols: str, rows: str = "TRUE") -> list[Bound]:
    return [Bound(c, 0.0, 1.0, rows) for c in cols]


NCP_PCT = ("trajectory_pct", "satisfied_pct", "pct_fact_conflict", "pct_commitment_conflict",
           "pct_player_input_conflict", "pct_conflict", "pct_success", "pct_survival", "pct_invalid",
           "pct_censored")
TENSION_RATES = ("mean_no_rate", "late_no_rate", "ir30", "ir60", "ir120")
BOUNDS: dict[str, list[Bound]] = {
    # WSE-bench (percent scales throughout; contrast rows of Table 7 hold differences)
    "wse_cell_metrics": _pct("G", "C_obs", "C_adj", "R"),
    "wse_horizon_sensitivity": _pct("G_h", "C_obs_h", "C_adj_h") + _unit("share_by_step10"),
    "wse_source_family": _pct("C_obs", "C_adj", "day_advance_pct", "full_horizon_pct",
                              rows="row_kind <> 'contrast'"),
    "wse_first_violations": _pct("pct"),
    "wse_generation_failures": _pct("failure_rate_pct", "lost_steps_pct"),
    # NCP-Bench
    "ncp_episodes": _unit("trajectory_progress", "commitments_satisfied_share"),
    "ncp_summary": _pct(*NCP_PCT) + _unit("survival_at_20"),
    "ncp_survival": _unit("survival", "ci_lower", "ci_upper", "raw_share_active"),
    "ncp_auditor_sensitivity": _pct(*NCP_PCT) + _unit("survival_at_20", "pearson_p", "spearman_p")
                               + [Bound("pearson_r", -1.0, 1.0), Bound("spearman_rho", -1.0, 1.0)],
    "ncp_genre": _pct("trajectory_pct", "satisfied_pct"),
    # 100-Endings (no-rates, revealed shares and inflection rates are shares)
    "endings_positions": _unit("revealed_share"),
    "endings_no_rate": _unit("no_rate", "revealed_share"),
    "endings_story_tension": _unit(*TENSION_RATES),
    "endings_corpus_tension": _unit(*TENSION_RATES),
    "endings_pipeline_effect": _unit(*TENSION_RATES),
    "endings_length_buckets": _unit("mean_no_rate", "median_no_rate"),
}

# The NCP paper's Table 6 as printed (total, mean, std, min, max over the 100 released specs).
PAPER_TABLE6: dict[str, tuple[str, str, str, str, str]] = {
    "facts": ("1660", "16.60", "4.88", "8", "31"),
    "commitments": ("1222", "12.22", "3.33", "5", "24"),
    "trajectory_nodes": ("1511", "15.11", "4.86", "6", "28"),
}
PAPER_N_SPECS = 100


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


def _where(where: Mapping[str, Any], extra: str = "TRUE", alias: str = "") -> tuple[str, list[Any]]:
    """SQL condition `col = ?` for each scope column (prefixed with `alias.`), and the parameters."""
    prefix = f"{alias}." if alias else ""
    parts = [f'{prefix}"{c}" = ?' for c in where] + [f"({extra})"]
    return " AND ".join(parts), list(where.values())


def _result(offending: pl.DataFrame, n_offending: int, what: str, checked: int,
            extra: Mapping[str, Any] | None = None) -> AssetCheckResult:
    return AssetCheckResult(
        passed=n_offending == 0,
        severity=AssetCheckSeverity.ERROR,
        description=f"{n_offending} {what}" if n_offending else None,
        metadata={
            "n_offending": n_offending,
            "n_checked": checked,
            "examples": MetadataValue.md(markdown_preview(offending, rows=EXAMPLES)),
            **(extra or {}),
        },
    )


def _scope(where: Mapping[str, Any]) -> dict[str, str]:
    return {"scope": ", ".join(f"{k}={v}" for k, v in where.items()) or "whole table"}


# ---- no duplicates -----------------------------------------------------------------------
def duplicate_keys(wh: Warehouse, table: str, key: Sequence[str], where: Mapping[str, Any]) -> pl.DataFrame:
    """Natural-key values that occur more than once (with their count `n`) in the scope `where`."""
    cols = ", ".join(f'"{c}"' for c in key)
    clause, params = _where(where)
    return wh.query(f'SELECT {cols}, count(*) AS n FROM "{table}" WHERE {clause} '
                    f"GROUP BY {cols} HAVING count(*) > 1 ORDER BY {cols}", params)


def evaluate_no_duplicates(wh: Warehouse, table: str, where: Mapping[str, Any]) -> AssetCheckResult:
    dups = duplicate_keys(wh, table, NATURAL_KEYS[table], where)
    clause, params = _where(where)
    total = int(wh.query(f'SELECT count(*) AS n FROM "{table}" WHERE {clause}', params)["n"][0])
    extra_rows = int((dups["n"] - 1).sum()) if dups.height else 0
    return _result(dups, int(dups["n"].sum()) if dups.height else 0,
                   f"rows share their natural key {NATURAL_KEYS[table]} with another row", total,
                   {"n_duplicate_keys": dups.height, "n_extra_rows": extra_rows,
                    "natural_key": ", ".join(NATURAL_KEYS[table]), **_scope(where)})


# ---- verdict coverage --------------------------------------------------------------------
def missing_consistency_votes(steps: pl.DataFrame, votes: pl.DataFrame, judge_count: int) -> pl.DataFrame:
    """Steps that should carry `judge_count` consistency votes but do not.

    Mirrors the judging loop of `wse_platform.wse.judges.judge_consistency`: the narrated
    steps of a trajectory are judged in order, each by judges 0..count-1, and judging stops
    after the first step whose majority is not "consistent" (a contradiction, or no valid
    majority = censoring). So the steps needing votes are 1..k, k = that step (or L).
    Votes of another generation of the trajectory do not count.
    `steps`: model, arch, seed_id, step, generation_version of the narrated steps;
    `votes`: model, arch, seed_id, step, judge_index, verdict, category, prior_source,
    prior_step, generation_version of the current judge configuration.
    """
    by_step: dict[tuple, dict[int, dict]] = {}
    for v in votes.iter_rows(named=True):
        by_step.setdefault((v["model"], v["arch"], v["seed_id"], v["step"], v["generation_version"]),
                           {})[v["judge_index"]] = v
    missing = []
    for (model, arch, seed_id), traj in steps.sort("step").group_by(["model", "arch", "seed_id"],
                                                                     maintain_order=True):
        for row in traj.iter_rows(named=True):
            found = by_step.get((model, arch, seed_id, row["step"], row["generation_version"]), {})
            have = sorted(i for i in found if 0 <= i < judge_count)
            if len(have) < judge_count:
                missing.append({"model": model, "arch": arch, "seed_id": seed_id, "step": row["step"],
                                "judge_indices_found": ",".join(map(str, have)), "expected": judge_count})
                break
            ballot = [None if found[i]["verdict"] is None else ConsistencyVerdict.model_construct(
                verdict=found[i]["verdict"], category=found[i]["category"],
                prior_source=found[i]["prior_source"], prior_step=found[i]["prior_step"]) for i in have]
            if aggregate_step(ballot, judge_count, row["step"])["majority"] != "consistent":
                break  # judging of this trajectory stops here
    return pl.DataFrame(missing, schema={"model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "step": pl.Int64,
                                         "judge_indices_found": pl.Utf8, "expected": pl.Int64})


def evaluate_wse_consistency_coverage(wh: Warehouse, judge: JudgeConfig, where: Mapping[str, Any]) -> AssetCheckResult:
    judge_id = judge.judge_id(CONSISTENCY_ROLE)
    clause, params = _where(where, "narrative IS NOT NULL")
    steps = wh.query("SELECT model, arch, seed_id, step, generation_version FROM wse_trajectory_steps "
                     f"WHERE {clause}", params)
    vclause, vparams = _where({**where, "judge_config_id": judge_id})
    votes = wh.query("SELECT model, arch, seed_id, step, judge_index, verdict, category, prior_source, prior_step, "
                     f"generation_version FROM wse_consistency_verdicts WHERE {vclause}", vparams)
    missing = missing_consistency_votes(steps, votes, judge.count)
    n_traj = steps.select("model", "arch", "seed_id").n_unique() if steps.height else 0
    return _result(missing, missing.height, "narrated steps lack consistency votes of the current judge "
                   "configuration (up to the trajectory's first non-consistent step)", n_traj,
                   {"judge_config_id": judge_id, **_scope(where)})


def evaluate_wse_richness_coverage(wh: Warehouse, judge: JudgeConfig, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every trajectory with a narrative (L >= 1) has richness verdicts 0..count-1 of the current judge."""
    judge_id = judge.judge_id(RICHNESS_ROLE)
    clause, params = _where(where, "t.length >= 1", alias="t")
    missing = wh.query(
        "SELECT t.model, t.arch, t.seed_id, t.length, count(DISTINCT r.judge_index) AS n_verdicts, "
        f"{judge.count} AS expected FROM wse_trajectories t LEFT JOIN wse_richness_verdicts r "
        "ON r.model = t.model AND r.arch = t.arch AND r.seed_id = t.seed_id AND r.judge_config_id = ? "
        "AND r.generation_version IS NOT DISTINCT FROM t.generation_version "
        f"AND r.judge_index BETWEEN 0 AND {judge.count - 1} "
        f"WHERE {clause} GROUP BY ALL HAVING count(DISTINCT r.judge_index) < {judge.count} "
        "ORDER BY t.model, t.arch, t.seed_id", [judge_id, *params])
    n = int(wh.query(f"SELECT count(*) AS n FROM wse_trajectories t WHERE {clause}", params)["n"][0])
    return _result(missing, missing.height, "trajectories with a narrative lack richness verdicts of the current "
                   "judge configuration", n, {"judge_config_id": judge_id, **_scope(where)})


def evaluate_ncp_conflict_reports(wh: Warehouse, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every stored turn >= 1 that did not end in an invalid output has a (parsable) conflict report."""
    clause, params = _where(where, "turn >= 1 AND invalid_role IS NULL")
    turns = wh.query("SELECT model, arch, spec_id, turn, conflict_report_json FROM ncp_turns "
                     f"WHERE {clause} ORDER BY model, arch, spec_id, turn", params)

    def bad(text: str | None) -> bool:
        if text is None:
            return True
        try:
            return not isinstance(json.loads(text), dict)
        except ValueError:
            return True

    offending = turns.filter(pl.Series([bad(t) for t in turns["conflict_report_json"]], dtype=pl.Boolean))
    return _result(offending.drop("conflict_report_json"), offending.height,
                   "valid turns >= 1 have no conflict report", turns.height, _scope(where))


def evaluate_ncp_reaudit_coverage(wh: Warehouse, auditor_ids: Sequence[str],
                                  where: Mapping[str, Any]) -> AssetCheckResult:
    """Every stored episode is re-audited by every configured auditor (in-loop + re-audit auditors)."""
    clause, params = _where(where)
    eps = wh.query(f"SELECT model, arch, spec_id FROM ncp_episodes WHERE {clause}", params)
    done = wh.query(f"SELECT DISTINCT model, arch, spec_id, auditor_id FROM ncp_reaudit_episodes WHERE {clause}",
                    params)
    want = eps.join(pl.DataFrame({"auditor_id": list(auditor_ids)}, schema={"auditor_id": pl.Utf8}), how="cross")
    missing = want.join(done, on=["model", "arch", "spec_id", "auditor_id"], how="anti") \
        .sort("model", "arch", "spec_id", "auditor_id")
    return _result(missing, missing.height, "episode × auditor pairs have no re-audit", want.height,
                   {"auditors": MetadataValue.json(list(auditor_ids)), **_scope(where)})


def evaluate_endings_verdict_coverage(wh: Warehouse, judge_id: str, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every prediction without failure has a verdict row of the current judge configuration."""
    clause, params = _where(where, "p.failure_json IS NULL AND p.prediction IS NOT NULL", alias="p")
    missing = wh.query(
        "SELECT p.set_key, p.story_id, p.position, p.sample_index FROM endings_predictions p "
        "WHERE " + clause + " AND NOT EXISTS (SELECT 1 FROM endings_verdicts v WHERE v.set_key = p.set_key "
        "AND v.story_id = p.story_id AND v.position = p.position AND v.sample_index = p.sample_index "
        "AND coalesce(v.\"repeat\", 0) = coalesce(p.\"repeat\", 0) "
        "AND v.judge_config_id = ?) ORDER BY p.set_key, p.story_id, p.position, p.sample_index",
        [*params, judge_id])
    n = int(wh.query(f"SELECT count(*) AS n FROM endings_predictions p WHERE {clause}", params)["n"][0])
    return _result(missing, missing.height, "valid predictions have no verdict of the current judge "
                   "configuration", n, {"judge_config_id": judge_id, **_scope(where)})


# ---- bounds and Table 6 ------------------------------------------------------------------
def out_of_bounds(wh: Warehouse, table: str, bounds: Sequence[Bound], where: Mapping[str, Any]) -> pl.DataFrame:
    """One row per (row, column) outside its bounds: the column, its value, the bounds and the row's
    leading (identifying) columns. NULL means undefined and passes; NaN counts as outside."""
    clause, params = _where(where)
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
    clause, params = _where(where)
    n = int(wh.query(f'SELECT count(*) AS n FROM "{table}" WHERE {clause}', params)["n"][0])
    return _result(bad, bad.height, "values lie outside their bounds", n, {
        "bounds": MetadataValue.md("\n".join(f"- `{b.column}` in [{b.lo:g}, {b.hi:g}]"
                                             + ("" if b.rows == "TRUE" else f" where {b.rows}")
                                             for b in BOUNDS[table])), **_scope(where)})


def table6_mismatches(stats: pl.DataFrame) -> pl.DataFrame:
    """Rows of `ncp_spec_stats` that, printed like the paper (2 decimals), differ from Table 6."""
    rows = []
    got = {r["quantity"]: r for r in stats.iter_rows(named=True)}
    for quantity, want in PAPER_TABLE6.items():
        r = got.get(quantity)
        printed = None if r is None else (str(r["total"]), f"{r['mean']:.2f}", f"{r['std']:.2f}",
                                          str(r["min"]), str(r["max"]))
        n_specs = None if r is None else r["n_specs"]
        if printed != want or n_specs != PAPER_N_SPECS:
            rows.append({"quantity": quantity, "n_specs": n_specs, "stored": " / ".join(printed or ("missing",)),
                         "paper": " / ".join(want)})
    return pl.DataFrame(rows, schema={"quantity": pl.Utf8, "n_specs": pl.Int64, "stored": pl.Utf8, "paper": pl.Utf8})


def evaluate_table6(wh: Warehouse) -> AssetCheckResult:
    stats = wh.query("SELECT * FROM ncp_spec_stats ORDER BY quantity")
    bad = table6_mismatches(stats)
    return _result(bad, bad.height, "quantities differ from the paper's Table 6 (total / mean / std / min / max)",
                   stats.height, {"paper_table6": MetadataValue.json({k: list(v) for k, v in PAPER_TABLE6.items()})})


# ---- health: nothing usable, failed LLM calls, empty tables (warnings) ----------------------
# What a row must have to be usable, per partitioned table an LLM writes (SQL condition).
USABLE: dict[str, str] = {
    "wse_trajectory_steps": "narrative IS NOT NULL",
    "wse_trajectories": "length >= 1",
    "wse_consistency_verdicts": "verdict IS NOT NULL",
    "wse_richness_verdicts": "failure_json IS NULL",
    "ncp_episodes": "invalid_role IS NULL",
    "ncp_turns": "turn >= 1 AND invalid_role IS NULL",
    "ncp_reaudit_episodes": "invalid_role IS NULL",
    "ncp_reaudit_turns": "turn >= 1 AND invalid_role IS NULL",
    "ncp_spec_extraction": "ok",
    "endings_stories": "included AND text IS NOT NULL AND failure_json IS NULL",
    "endings_predictions": "failure_json IS NULL AND prediction IS NOT NULL",
    "endings_verdicts": "verdict IS NOT NULL",
}
# Share of a cell's LLM requests that ended without a valid answer, or with a cut answer / prompt,
# above which its latest materialization is flagged (a warning: the rows are kept, as the papers do).
MAX_FAILED_SHARE = 0.2


def evaluate_usable_rows(wh: Warehouse, table: str, where: Mapping[str, Any]) -> AssetCheckResult:
    """The partition has at least one usable row (e.g. a narrated step, a story that was written)."""
    clause, params = _where(where)
    row = wh.query(f'SELECT count(*) AS n, count(*) FILTER (WHERE {USABLE[table]}) AS usable '
                   f'FROM "{table}" WHERE {clause}', params).row(0, named=True)
    n, usable = int(row["n"]), int(row["usable"])
    return AssetCheckResult(
        passed=usable > 0, severity=AssetCheckSeverity.WARN,
        description=None if usable else (f"nothing usable: {n} rows, none with {USABLE[table]}" if n
                                         else "nothing usable: the partition has no rows"),
        metadata={"n_rows": n, "n_usable": usable, "usable_means": USABLE[table], **_scope(where)})


def llm_failure_counts(wh: Warehouse, run_id: str, partition_key: str | None) -> dict[str, int]:
    """Requests, failed requests (no valid attempt) and cut ones (answer or prompt truncated) of a
    run's calls for one partition, from `llm_calls`."""
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


def _no_duplicates(table: str) -> CheckDef:
    return CheckDef(table, "no_duplicate_rows",
                    f"No two rows of a partition share the natural key ({', '.join(NATURAL_KEYS[table])}).",
                    lambda wh, s, where: evaluate_no_duplicates(wh, table, where), PARTITIONING[table])


def _bounds(table: str) -> CheckDef:
    cols = ", ".join(dict.fromkeys(b.column for b in BOUNDS[table]))
    return CheckDef(table, "metric_bounds", f"Percentages in [0, 100], shares and rates in [0, 1]: {cols}.",
                    lambda wh, s, where: evaluate_bounds(wh, table, where), PARTITIONING.get(table))


COVERAGE_CHECKS: tuple[CheckDef, ...] = (
    CheckDef("wse_consistency_verdicts", "every_step_judged",
             "Every narrated step up to the trajectory's first majority-inconsistent or no-majority step has one "
             "vote per consistency judge of the current judge configuration (judging stops after that step).",
             lambda wh, s, where: evaluate_wse_consistency_coverage(wh, s.wse.consistency_judge, where),
             "wse", ("wse_trajectory_steps",)),
    CheckDef("wse_richness_verdicts", "every_trajectory_rated",
             "Every trajectory with at least one narrated step has one richness verdict per judge of the current "
             "judge configuration.",
             lambda wh, s, where: evaluate_wse_richness_coverage(wh, s.wse.richness_judge, where),
             "wse", ("wse_trajectories",)),
    CheckDef("ncp_turns", "every_turn_audited",
             "Every stored turn >= 1 that did not end in an invalid output has a conflict report.",
             lambda wh, s, where: evaluate_ncp_conflict_reports(wh, where), "ncp"),
    CheckDef("ncp_reaudit_episodes", "every_episode_reaudited",
             "Every stored episode has a re-audit by each configured auditor (the in-loop auditor and "
             "`ncp.reaudit_auditors`).",
             lambda wh, s, where: evaluate_ncp_reaudit_coverage(wh, [a.auditor_id for a in reaudit_auditors(s)], where),
             "ncp", ("ncp_episodes",)),
    CheckDef("endings_verdicts", "every_prediction_judged",
             "Every predicted ending without a failure has a verdict of the current judge configuration.",
             lambda wh, s, where: evaluate_endings_verdict_coverage(wh, judge_config_id(s), where),
             "endings", ("endings_predictions",)),
)
TABLE6_CHECK = CheckDef("ncp_spec_stats", "equals_paper_table6",
                        "Facts, commitments and trajectory nodes over the released specs print exactly as the NCP "
                        "paper's Table 6 (n = 100; total, mean, sample std, min, max).",
                        lambda wh, s, where: evaluate_table6(wh))


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
        wh, s = warehouse.get(), settings.get()
        results = []
        with wh.held():  # many small queries: one connection (each open reads the whole catalog)
            for key in sorted(context.selected_asset_check_keys,
                              key=lambda k: (k.asset_key.to_user_string(), k.name)):
                d = by_key[key]
                where = partition_filter(d.partitioning, context.partition_key) \
                    if d.partitioning is not None and context.has_partition_key else {}
                results.append((key, d.evaluate(wh, s, where, context) if d.needs_context
                                else d.evaluate(wh, s, where)))
        for key, r in results:
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
