"""Horizon sensitivity (paper App. B.6 / Fig. 9)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.wse.tables.frame import (
    CELL,
    EARLY_STEP,
    SENSITIVITY_HORIZONS,
    TableParams,
    _nan,
)
from wse_platform.wse.tables.schema import _finish


# ---- 6. horizon sensitivity -----------------------------------------------------------------------------
def horizon_sensitivity(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams | None = None
                        ) -> pl.DataFrame:
    """`wse_horizon_sensitivity`: G_h, C_obs(h), C_adj(h) from the same trajectories truncated at h.

    h ∈ {5, 10, 15, 20} up to the configured horizon H, plus H itself (so a short demo
    horizon still has a row). Values average cells (scope=model: over the model's
    architectures; scope=all: models weighted equally; scope=group: models of one model group, i.e. the
    paper's panels, weighted equally). share_by_step10 is the share of
    observed first contradictions (by step H) that happened by step 10.
    """
    H = info["horizon"]
    hs = sorted({h for h in SENSITIVITY_HORIZONS if h <= H} | {H})
    per_cell = []
    for (model, arch), g in frame.group_by(CELL, maintain_order=True):
        for h in hs:
            lengths = np.minimum(g["length"].to_numpy(), h)
            cens = _nan(g["censored_at"])
            cens = np.where(np.isnan(cens), np.nan, np.minimum(cens, h))
            first = _nan(g["first_contradiction"])
            first = np.where(first <= lengths, first, np.nan)  # beyond the truncated length: not observed
            c_obs, c_adj = M.consistency_scores(lengths, first, h, [None if np.isnan(c) else c for c in cens])
            per_cell.append({"model": model, "arch": arch, "h": h, "G_h": M.generation_coverage(lengths, h),
                             "C_obs_h": c_obs, "C_adj_h": c_adj})
    pc = pl.DataFrame(per_cell).with_columns(pl.col("C_obs_h").fill_nan(None))
    obs = frame.filter("contradiction_observed")

    def share(sub: pl.DataFrame) -> float | None:
        return float((sub["first_contradiction"] <= EARLY_STEP).mean()) if sub.height else None

    by_model = pc.group_by("model", "h").agg(pl.col("G_h", "C_obs_h", "C_adj_h").mean(), n_cells=pl.len())
    models = by_model.with_columns(scope=pl.lit("model"))
    overall = by_model.group_by("h").agg(pl.col("G_h", "C_obs_h", "C_adj_h").mean(), n_cells=pl.col("n_cells").sum())
    overall = overall.with_columns(scope=pl.lit("all"), model=pl.lit(None, pl.String))
    models = models.with_columns(model_group=pl.lit(None, pl.String))
    overall = overall.with_columns(model_group=pl.lit(None, pl.String))
    parts = [overall.select(models.columns), models]
    groups = params.groups(frame["model"].unique().to_list()) if params is not None and params.model_groups else {}
    for group, members in groups.items():   # the paper's panels: models weighted equally within the group
        g = (by_model.filter(pl.col("model").is_in(members)).group_by("h")
             .agg(pl.col("G_h", "C_obs_h", "C_adj_h").mean(), n_cells=pl.col("n_cells").sum()))
        if g.height:
            parts.append(g.with_columns(scope=pl.lit("group"), model=pl.lit(None, pl.String),
                                        model_group=pl.lit(group)).select(models.columns))
    out = pl.concat(parts)
    key = pl.when(pl.col("scope") == "group").then(pl.col("model_group")).otherwise(pl.col("model"))
    subsets = {("model", m): obs.filter(pl.col("model") == m) for m in frame["model"].unique().to_list()}
    subsets.update({("group", g): obs.filter(pl.col("model").is_in(ms)) for g, ms in groups.items()})
    shares = {f"{k[0]}:{k[1]}": share(v) for k, v in subsets.items()}
    counts = {f"{k[0]}:{k[1]}": v.height for k, v in subsets.items()}
    tag = pl.col("scope") + pl.lit(":") + key
    out = out.with_columns(
        share_by_step10=pl.when(pl.col("scope") == "all").then(pl.lit(share(obs)))
        .otherwise(tag.replace_strict(shares, default=None, return_dtype=pl.Float64)),
        n_first_contradictions=pl.when(pl.col("scope") == "all").then(pl.lit(obs.height))
        .otherwise(tag.replace_strict(counts, default=None, return_dtype=pl.Int64)),
        horizon=pl.lit(H), judge_config_id=pl.lit(info["consistency_judge_id"]),
    )
    order = pl.col("scope").replace_strict({"all": 0, "group": 1, "model": 2}, return_dtype=pl.Int64)
    return _finish("wse_horizon_sensitivity", out.sort(order, "model_group", "model", "h", nulls_last=False))


