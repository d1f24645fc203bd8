"""Scaling fits over dense model families (paper Table 4)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.stats.scaling import MIN_MODELS, fit_with_leave_one_out
from wse_platform.wse.tables.frame import (
    TableParams,
)
from wse_platform.wse.tables.schema import _rows


# ---- 4. scaling --------------------------------------------------------------------------------------
SCALING_METRICS = ("G", "C_obs", "R")
POOLED_METRIC = "C_obs_pooled"


def model_pooled_consistency(frame: pl.DataFrame, info: Mapping[str, Any]) -> pl.DataFrame:
    """Per model: C_obs / C_adj of one Kaplan–Meier over all its trajectories (every architecture
    pooled), the way the paper condenses Consistency per model for Table 4."""
    rows = []
    for (model,), g in frame.group_by(["model"], maintain_order=True):
        c_obs, c_adj = M.consistency_scores(g["length"].to_list(), g["first_contradiction"].to_list(),
                                            info["horizon"], g["censored_at"].to_list())
        rows.append({"model": model, POOLED_METRIC: c_obs, "C_adj_pooled": c_adj})
    return pl.DataFrame(rows, schema={"model": pl.String, POOLED_METRIC: pl.Float64, "C_adj_pooled": pl.Float64})


def scaling_fit(cells: pl.DataFrame, params: TableParams, pooled: pl.DataFrame | None = None
                ) -> tuple[pl.DataFrame, str]:
    """`wse_scaling_fit`: Y = α + β·log2(P) per dense family on model means over architectures.

    metric C_obs is the mean over the model's cells; C_obs_pooled (when `pooled` from
    `model_pooled_consistency` is given) the per-model pooled Kaplan–Meier. Returns (table,
    note). Families with fewer than MIN_MODELS models with a parameter count give no rows;
    the note says so (the table then may be empty).
    """
    model_means = cells.group_by("model").agg(pl.col(m).mean() for m in SCALING_METRICS)
    metrics = SCALING_METRICS
    if pooled is not None:
        model_means = model_means.join(pooled.select("model", POOLED_METRIC), on="model", how="left")
        metrics = (*SCALING_METRICS, POOLED_METRIC)
    fam: dict[str, list[str]] = {}
    for m in sorted(model_means["model"].to_list()):
        p, f = params.model_params.get(m, (None, None))
        if p is not None and f is not None:
            fam.setdefault(f, []).append(m)
    rows, notes = [], []
    for family, members in sorted(fam.items()):
        if len(members) < MIN_MODELS:
            notes.append(f"family {family!r}: {len(members)} model(s) with a parameter count (< {MIN_MODELS}); "
                         "no fit")
            continue
        for metric in metrics:
            sub = model_means.filter(pl.col("model").is_in(members) & pl.col(metric).is_not_null()
                                     & pl.col(metric).is_not_nan()).sort("model")
            ms = sub["model"].to_list()
            if len(ms) < MIN_MODELS:
                notes.append(f"family {family!r}, {metric}: only {len(ms)} model(s) with a value; no fit")
                continue
            fits = fit_with_leave_one_out(ms, [params.model_params[m][0] for m in ms], sub[metric].to_list())
            for f in fits:
                rows.append({"family": family, "metric": metric,
                             "fit": "all" if f.dropped is None else "leave_one_out", "dropped_model": f.dropped,
                             "alpha": f.alpha, "beta": f.beta, "r2": f.r2, "n": f.n,
                             "models": ",".join(m for m in ms if m != f.dropped)})
    if not fam:
        notes.append("no evaluated model has both params_b and family in the config; no fit")
    table = _rows("wse_scaling_fit", rows)
    return table, "; ".join(notes)


