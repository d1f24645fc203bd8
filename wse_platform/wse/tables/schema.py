"""Column names and types of every WSE-bench final table (must match sql/wse_tables.sql)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from wse_platform.stats import bootstrap as bs
from wse_platform.wse.architecture import FAILURE_COMPONENTS
from wse_platform.wse.tables.frame import END_KINDS

_F, _I, _S, _B = pl.Float64, pl.Int64, pl.String, pl.Boolean
FINAL_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "wse_cell_metrics": {
        "model": _S, "arch": _S, "judge_config_id": _S, "richness_judge_config_id": _S, "horizon": _I,
        "n": _I, "n_with_narrative": _I, "G": _F, "C_obs": _F, "C_adj": _F, "R": _F, "R_unweighted": _F, "n_richness": _I,
        "n_richness_judge_failures": _I, "n_contradictions": _I, "n_censored_no_majority": _I, "n_failures": _I,
        **{f"fail_{c}": _I for c in FAILURE_COMPONENTS}, "n_story_endings": _I, **{f"end_{k}": _I for k in END_KINDS}},
    "wse_architecture_contrasts": {
        "scope": _S, "model_group": _S, "model": _S, "base_level": _S, "contrast": _S, "n_models": _I,
        "n_pairs": _I, "n_seeds": _I, "n_worlds": _I,
        **{f"delta_{m}{s}": _F for m in bs.METRICS for s in ("", "_lo", "_hi")},
        "n_draws": _I, "n_draws_valid": _I, "bootstrap_seed": _I, "judge_config_id": _S,
        "richness_judge_config_id": _S},
    "wse_pareto": {"panel": _S, "consistency_axis": _S, "model": _S, "arch": _S, "consistency": _F, "R": _F,
                   "non_dominated": _B, "supported": _B, "gap_below_chord": _F},
    "wse_scaling_fit": {"family": _S, "metric": _S, "fit": _S, "dropped_model": _S, "alpha": _F, "beta": _F,
                        "r2": _F, "n": _I, "models": _S},
    "wse_source_family": {
        "row_kind": _S, "source_family": _S, "model": _S, "contrast": _S, "dropped_world": _S, "n_worlds": _I,
        "C_obs": _F, "C_obs_lo": _F, "C_obs_hi": _F, "C_adj": _F, "C_adj_lo": _F, "C_adj_hi": _F,
        "n_trajectories": _I, "observed_steps": _I, "mean_length": _F, "day_advance_pct": _F,
        "full_horizon_pct": _F, "first_contradiction_median": _F, "mean_first_contradiction_step": _F,
        "relative_day_at_contradiction": _F, "n_draws": _I, "bootstrap_seed": _I,
        "judge_config_id": _S},
    "wse_horizon_sensitivity": {
        "scope": _S, "model_group": _S, "model": _S, "h": _I, "G_h": _F, "C_obs_h": _F, "C_adj_h": _F, "n_cells": _I,
        "share_by_step10": _F, "n_first_contradictions": _I, "horizon": _I, "judge_config_id": _S},
    "wse_first_violations": {"table_kind": _S, "scope": _S, "model_group": _S, "model": _S, "label": _S,
                             "source": _S, "n": _I, "pct": _F, "median_step": _F, "judge_config_id": _S},
    "wse_generation_failures": {
        "scope": _S, "model_group": _S, "model": _S, "component": _S, "n_enabled": _I, "n_failures": _I,
        "failure_rate_pct": _F,
        "median_failure_step": _F, "lost_steps_wmem": _I, "lost_steps_pct": _F, "horizon": _I},
    "wse_failure_kinds": {"source": _S, "scope": _S, "model_group": _S, "model": _S, "role": _S, "error_kind": _S,
                          "n": _I, "n_length_cut": _I},
    "wse_judge_agreement": {
        "judge_config_id": _S, "model_group": _S, "kind": _S, "member_a": _S, "member_b": _S, "n_members": _I,
        "n_steps": _I, "n_steps_incomplete": _I, "fleiss_kappa": _F, "cohen_kappa": _F, "agreement_pct": _F,
        "unanimous_pct": _F, "consistent_pct": _F, "inconsistent_pct": _F, "uncertain_pct": _F},
    "wse_richness_agreement": {
        "judge_config_id": _S, "model_group": _S, "kind": _S, "quantity": _S, "member_a": _S, "member_b": _S,
        "n_members": _I, "n_trajectories": _I, "n_trajectories_incomplete": _I, "exact_pct": _F,
        "within_one_pct": _F, "qwk": _F, "fleiss_kappa": _F, "unanimous_pct": _F, "icc": _F, "mae": _F,
        "pearson_r": _F},
    "wse_precursor_audit": {
        "row_kind": _S, "scope": _S, "model_group": _S, "model": _S, "arch": _S, "seed_id": _S,
        "first_contradiction": _I, "origin": _S, "origin_step": _I, "persisted": _B, "match_score": _F,
        "n_votes": _I, "n": _I, "pct": _F, "n_persisted": _I, "n_trajectories": _I, "judge_config_id": _S,
        "ca_precursor": _B, "ca_through_world_model": _B, "world_model_only": _B},
    "wse_full_horizon_contrasts": {
        "scope": _S, "model_group": _S, "model": _S, "contrast": _S, "n_models": _I, "n_pairs": _I,
        "delta_C": _F, "delta_R": _F, "horizon": _I, "judge_config_id": _S},
    "wse_cost_contrasts": {
        "row_kind": _S, "scope": _S, "model_group": _S, "model": _S, "arch": _S, "contrast": _S, "n_models": _I,
        "n_pairs": _I, "n_calls": _I, "tokens_per_trajectory": _F, "cost_per_trajectory": _F,
        "tokens_per_step": _F, "G": _F, "delta_tokens_per_trajectory": _F, "delta_cost_per_trajectory": _F,
        "delta_G": _F, "pct_tokens_per_trajectory": _F, "pct_cost_per_trajectory": _F, "pct_G": _F},
    "wse_human_validation": {"study": _S, "statistic": _S, "value": _F, "n": _I, "n_unmatched": _I,
                             "judge_config_id": _S, "value_lo": _F, "value_hi": _F, "labels": _S},
}


def _rows(table: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Python rows → the table's schema (missing keys are nulls, NaN → null, column order fixed)."""
    schema = FINAL_COLUMNS[table]
    data = {c: [r.get(c) for r in rows] for c in schema}
    df = pl.DataFrame({c: pl.Series(c, [None if isinstance(v, float) and v != v else v for v in vals],
                                    dtype=schema[c], strict=False) for c, vals in data.items()})
    return df


def _finish(table: str, df: pl.DataFrame, sort_by: Sequence[str] = ()) -> pl.DataFrame:
    """The table's columns in order and types, NaN → null (SQL-friendly), stable order."""
    schema = FINAL_COLUMNS[table]
    df = df.with_columns([pl.lit(None, schema[c]).alias(c) for c in schema if c not in df.columns])
    df = df.select([pl.col(c).cast(t) for c, t in schema.items()])
    df = df.with_columns(pl.col(pl.Float64).fill_nan(None))
    return df.sort(list(sort_by), nulls_last=False) if sort_by else df
