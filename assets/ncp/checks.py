"""NCP-Bench asset checks: natural keys, bounds, usable rows, conflict-report and re-audit coverage,
and the spec statistics against the paper's Table 6 (composed in `assets/checks.py`).
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from dagster import AssetCheckResult, MetadataValue

from assets.check_kit import Bound, CheckDef, pct, result, scope, unit, where_sql
from assets.ncp.episodes import reaudit_auditors
from wse_platform.warehouse import Warehouse

NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "ncp_episodes": ("model", "arch", "auditor_id", "spec_id"),
    "ncp_turns": ("model", "arch", "auditor_id", "spec_id", "session", "turn"),
    "ncp_reaudit_episodes": ("model", "arch", "auditor_id", "spec_id"),
    "ncp_reaudit_turns": ("model", "arch", "auditor_id", "spec_id", "turn"),
    "ncp_spec_extraction": ("extraction_model", "spec_id"),
    "ncp_extraction_comparison": ("extraction_model", "spec_id", "quantity"),
}
PARTITIONING: dict[str, str] = {
    **{t: "ncp" for t in ("ncp_episodes", "ncp_turns", "ncp_reaudit_episodes", "ncp_reaudit_turns")},
    "ncp_spec_extraction": "ncp_extraction", "ncp_extraction_comparison": "ncp_extraction",
}
NCP_PCT = ("trajectory_pct", "satisfied_pct", "pct_fact_conflict", "pct_commitment_conflict",
           "pct_player_input_conflict", "pct_conflict", "pct_success", "pct_survival", "pct_invalid",
           "pct_censored")
BOUNDS: dict[str, list[Bound]] = {
    "ncp_episodes": unit("trajectory_progress", "commitments_satisfied_share"),
    "ncp_summary": pct(*NCP_PCT) + unit("survival_at_20"),
    "ncp_survival": unit("survival", "ci_lower", "ci_upper", "raw_share_active"),
    "ncp_auditor_sensitivity": pct(*NCP_PCT) + unit("survival_at_20", "pearson_p", "spearman_p")
                              + [Bound("pearson_r", -1.0, 1.0), Bound("spearman_rho", -1.0, 1.0)],
    "ncp_genre": pct("trajectory_pct", "satisfied_pct"),
}
# The NCP paper's Table 6 as printed (total, mean, std, min, max over the 100 released specs).
PAPER_TABLE6: dict[str, tuple[str, str, str, str, str]] = {
    "facts": ("1660", "16.60", "4.88", "8", "31"),
    "commitments": ("1222", "12.22", "3.33", "5", "24"),
    "trajectory_nodes": ("1511", "15.11", "4.86", "6", "28"),
}
PAPER_N_SPECS = 100
USABLE: dict[str, str] = {
    "ncp_episodes": "invalid_role IS NULL",
    "ncp_turns": "turn >= 1 AND invalid_role IS NULL",
    "ncp_reaudit_episodes": "invalid_role IS NULL",
    "ncp_reaudit_turns": "turn >= 1 AND invalid_role IS NULL",
    "ncp_spec_extraction": "ok",
}


def evaluate_ncp_conflict_reports(wh: Warehouse, where: Mapping[str, Any]) -> AssetCheckResult:
    """Every stored turn >= 1 that did not end in an invalid output has a (parsable) conflict report."""
    clause, params = where_sql(where, "turn >= 1 AND invalid_role IS NULL")
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
    return result(offending.drop("conflict_report_json"), offending.height,
                  "valid turns >= 1 have no conflict report", turns.height, scope(where),
                  examined="valid turns >= 1 (every turn of the cell ended in an invalid output, or none was stored)")


def evaluate_ncp_reaudit_coverage(wh: Warehouse, auditor_ids: Sequence[str],
                                  where: Mapping[str, Any]) -> AssetCheckResult:
    """Every stored episode is re-audited by every configured auditor (in-loop + re-audit auditors)."""
    clause, params = where_sql(where)
    eps = wh.query(f"SELECT model, arch, spec_id FROM ncp_episodes WHERE {clause}", params)
    done = wh.query(f"SELECT DISTINCT model, arch, spec_id, auditor_id FROM ncp_reaudit_episodes WHERE {clause}",
                    params)
    want = eps.join(pl.DataFrame({"auditor_id": list(auditor_ids)}, schema={"auditor_id": pl.Utf8}), how="cross")
    missing = want.join(done, on=["model", "arch", "spec_id", "auditor_id"], how="anti") \
        .sort("model", "arch", "spec_id", "auditor_id")
    return result(missing, missing.height, "episode × auditor pairs have no re-audit", want.height,
                  {"auditors": MetadataValue.json(list(auditor_ids)), **scope(where)}, examined="stored episodes")



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
    return result(bad, bad.height, "quantities differ from the paper's Table 6 (total / mean / std / min / max)",
                  stats.height, {"paper_table6": MetadataValue.json({k: list(v) for k, v in PAPER_TABLE6.items()})})


CHECKS: tuple[CheckDef, ...] = (
    CheckDef("ncp_turns", "every_turn_audited",
             "Every stored turn >= 1 that did not end in an invalid output has a conflict report.",
             lambda wh, s, where: evaluate_ncp_conflict_reports(wh, where), "ncp"),
    CheckDef("ncp_reaudit_episodes", "every_episode_reaudited",
             "Every stored episode has a re-audit by each configured auditor (the in-loop auditor and "
             "`ncp.reaudit_auditors`).",
             lambda wh, s, where: evaluate_ncp_reaudit_coverage(wh, [a.auditor_id for a in reaudit_auditors(s)], where),
             "ncp", ("ncp_episodes",)),
)
TABLE6_CHECK = CheckDef("ncp_spec_stats", "equals_paper_table6",
                        "Facts, commitments and trajectory nodes over the released specs print exactly as the NCP "
                        "paper's Table 6 (n = 100; total, mean, sample std, min, max).",
                        lambda wh, s, where: evaluate_table6(wh))
