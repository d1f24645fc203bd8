"""Inter-judge agreement of a richness panel (`wse_richness_agreement`).

Subjects are trajectories on which every panel member returned a valid rating (failed members
leave the trajectory out; counted in n_trajectories_incomplete). The paper reports no
inter-judge statistic for richness; we use the ones it applies to the same ratings against
humans (App. B.5), with the ordinal 1–5 ratings and the continuous R and unit density kept apart:

* quantities: the three breadth ratings (`event_diversity`, `character_change`,
  `world_expansion`), `units_per_step` (non-repetitive units / observed steps, the d of Q) and
  `R` (each member's own R).
* kind=pairwise (one row per member pair × quantity): ratings — % exact agreement, % within one
  point, quadratic-weighted κ; every quantity — MAE and Pearson r.
* kind=panel (one row per quantity): ratings — Fleiss' κ over the five rating categories
  (nominal, a lower bound for ordinal data), % unanimous trajectories, % where all members lie
  within one point, mean pairwise quadratic-weighted κ (as B.5 averages it); every quantity —
  ICC(2,1) (two-way random, absolute agreement, single rater; Shrout & Fleiss 1979).
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.wse.tables.agreement import fleiss_kappa, rows_per_panel
from wse_platform.wse.tables.frame import TRAJ, TableParams, require_columns
from wse_platform.wse.tables.schema import _rows
from wse_platform.wse.tables.validation import mean_absolute_error, pearson_r, quadratic_weighted_kappa

RATING_COLUMNS = ("rating_event_diversity", "rating_character_change", "rating_world_expansion")
RATING_NAMES = tuple(c.removeprefix("rating_") for c in RATING_COLUMNS)
CONTINUOUS = ("units_per_step", "R")


def icc_2_1(x: np.ndarray) -> float | None:
    """ICC(2,1) of an (n subjects × k raters) matrix: (MSR − MSE) / (MSR + (k−1)MSE + k(MSC − MSE)/n).

    None when undefined (fewer than 2 subjects or raters, or a zero denominator)."""
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        return None
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((x - grand) ** 2).sum() - ss_rows - ss_cols
    msr, msc, mse = ss_rows / (n - 1), ss_cols / (k - 1), ss_err / ((n - 1) * (k - 1))
    den = msr + (k - 1) * mse + k * (msc - mse) / n
    return None if abs(den) < 1e-12 else float((msr - mse) / den)


def _valid(v: pl.DataFrame) -> pl.DataFrame:
    """Valid member rows with each member's units per step and own R."""
    ok = v.filter(pl.col("failure_json").is_null() & pl.all_horizontal(pl.col(c).is_not_null() for c in RATING_COLUMNS)
                  & pl.col("n_units_non_repetitive").is_not_null() & (pl.col("observed_steps") >= 1))
    r = (M.richness_array(ok["n_units_non_repetitive"].to_numpy(), ok["observed_steps"].to_numpy(),
                          ok.select(RATING_COLUMNS).to_numpy()) if ok.height else np.zeros(0))
    return ok.with_columns(
        units_per_step=pl.col("n_units_non_repetitive").cast(pl.Float64) / pl.col("observed_steps"),
        R=pl.Series("R", r, dtype=pl.Float64),
        **{n: pl.col(c).cast(pl.Int64) for n, c in zip(RATING_NAMES, RATING_COLUMNS)})


def _panel_rows(v: pl.DataFrame, judge_id: str, group: str | None) -> list[dict[str, Any]]:
    members = sorted(v["judge_member"].unique().to_list())
    n_all = v.select(TRAJ).unique().height
    ok = _valid(v)
    counts = ok.group_by(TRAJ).agg(pl.col("judge_member").n_unique().alias("k"))
    complete = ok.join(counts.filter(pl.col("k") == len(members)).select(TRAJ), on=TRAJ, how="semi")
    base = {"judge_config_id": judge_id, "model_group": group, "n_members": len(members),
            "n_trajectories": complete.select(TRAJ).unique().height}
    base["n_trajectories_incomplete"] = n_all - base["n_trajectories"]
    rows: list[dict[str, Any]] = []
    for q in (*RATING_NAMES, *CONTINUOUS):
        wide = complete.pivot(on="judge_member", index=TRAJ, values=q, aggregate_function="first").sort(TRAJ)
        mat = wide.select(members).to_numpy() if wide.height else np.zeros((0, len(members)))
        ordinal = q in RATING_NAMES
        pair_qwk: list[float] = []
        for a, b in combinations(range(len(members)), 2):
            xa, xb = mat[:, a], mat[:, b]
            row = {**base, "kind": "pairwise", "quantity": q, "member_a": members[a], "member_b": members[b],
                   "mae": mean_absolute_error(xa, xb) if len(xa) else None, "pearson_r": pearson_r(xa, xb)}
            if ordinal and len(xa):
                row |= {"exact_pct": 100.0 * float(np.mean(xa == xb)),
                        "within_one_pct": 100.0 * float(np.mean(np.abs(xa - xb) <= 1)),
                        "qwk": quadratic_weighted_kappa(xa.astype(int), xb.astype(int))}
                if row["qwk"] is not None:
                    pair_qwk.append(row["qwk"])
            rows.append(row)
        panel = {**base, "kind": "panel", "quantity": q, "icc": icc_2_1(mat)}
        if ordinal and len(mat) and len(members) >= 2:
            cats = np.stack([(mat == c).sum(axis=1) for c in range(M.RATING_MIN, M.RATING_MAX + 1)], axis=1)
            spread = mat.max(axis=1) - mat.min(axis=1)
            panel |= {"fleiss_kappa": fleiss_kappa(cats), "unanimous_pct": 100.0 * float(np.mean(spread == 0)),
                      "within_one_pct": 100.0 * float(np.mean(spread <= 1)),
                      "qwk": float(np.mean(pair_qwk)) if pair_qwk else None}
        rows.append(panel)
    return rows


def richness_agreement(verdicts: pl.DataFrame, params: TableParams,
                       judge_ids: Sequence[str | None] | None = None) -> pl.DataFrame:
    """`wse_richness_agreement` from `wse_richness_verdicts` rows (every judge configuration present,
    or only `judge_ids`); model_group NULL = all models, else one row set per model group."""
    require_columns(verdicts, "wse_richness_verdicts",
                    ["judge_config_id", *TRAJ, "judge_index", "n_units_non_repetitive", "observed_steps",
                     *RATING_COLUMNS, "failure_json"])
    member = pl.col("judge_index").cast(pl.String)
    if "judge_member" in verdicts.columns:
        member = pl.coalesce(pl.col("judge_member"), member)
    v = verdicts.with_columns(judge_member=member)
    return _rows("wse_richness_agreement", rows_per_panel(v, params, list(judge_ids or ()), _panel_rows))
