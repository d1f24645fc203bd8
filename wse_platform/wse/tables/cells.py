"""Paper Table 2 / Fig. 3-4: per-cell metrics (`wse_cell_metrics`) and Pareto status (`wse_pareto`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.wse.architecture import FAILURE_COMPONENTS
from wse_platform.wse.tables.frame import (
    CELL,
    END_KINDS,
    TableInputError,
    TableParams,
)
from wse_platform.wse.tables.schema import _finish, _rows


# ---- 1. cell metrics ----------------------------------------------------------------------------
def richness_step_weighted(r: pl.Series, lengths: pl.Series) -> float | None:
    """Cell Richness weighted by observed narrative steps (App. B.6): Σ L_i·R_i / Σ L_i over
    trajectories with a richness score. A long trajectory carries more evidence of development."""
    w = lengths.cast(pl.Float64).to_numpy()
    return float((w * r.cast(pl.Float64).to_numpy()).sum() / w.sum()) if w.sum() > 0 else None


def cell_metrics(frame: pl.DataFrame, info: Mapping[str, Any]) -> pl.DataFrame:
    """`wse_cell_metrics`: one row per model × architecture."""
    h = info["horizon"]
    rows = []
    for (model, arch), g in frame.group_by(CELL, maintain_order=True):
        c_obs, c_adj = M.consistency_scores(g["length"].to_list(), g["first_contradiction"].to_list(), h,
                                            g["censored_at"].to_list())
        r_vals = g.filter(pl.col("length") >= 1)["R"].drop_nulls()
        rated = g.filter((pl.col("length") >= 1) & pl.col("R").is_not_null())
        fails = g["failure_component"].drop_nulls().to_list()
        unknown = sorted(set(fails) - set(FAILURE_COMPONENTS))
        if unknown:
            raise TableInputError(f"wse_trajectories: model={model!r}, arch={arch!r}: failure_component "
                                  f"{unknown} not in {list(FAILURE_COMPONENTS)}")
        ends = g["end_kind"].drop_nulls().to_list()
        row = {
            "model": model, "arch": arch, "judge_config_id": info["consistency_judge_id"],
            "richness_judge_config_id": info["richness_judge_id"], "horizon": h,
            "n": g.height, "n_with_narrative": int((g["length"] >= 1).sum()),
            "G": M.generation_coverage(g["length"].to_list(), h),
            "C_obs": c_obs, "C_adj": c_adj,
            # R is the paper's cell Richness, weighted by observed steps (App. B.6); the plain mean
            # over trajectories stays as a second column
            "R": richness_step_weighted(rated["R"], rated["length"]),
            "R_unweighted": float(r_vals.mean()) if r_vals.len() else None,
            "n_richness": int(r_vals.len()),
            "n_richness_judge_failures": int(g["n_richness_failed"].sum()),
            "n_contradictions": int(g["contradiction_observed"].sum()),
            "n_censored_no_majority": int(g["censored_at"].is_not_null().sum()),
            "n_failures": len(fails),
            **{f"fail_{c}": fails.count(c) for c in FAILURE_COMPONENTS},
            "n_story_endings": len(ends),
            **{f"end_{k}": ends.count(k) for k in END_KINDS},
        }
        rows.append(row)
    return _finish("wse_cell_metrics", _rows("wse_cell_metrics", rows), CELL)


# ---- 3. Pareto ------------------------------------------------------------------------------------
def pareto_table(cells: pl.DataFrame, params: TableParams | None = None) -> pl.DataFrame:
    """`wse_pareto`: Pareto status of every cell on (C_adj, R) and on (C_obs, R), among all cells
    (panel=pooled) and among the cells of each model group (panel=<group>, the paper's panels).

    Cells without a defined consistency or richness value are left out of that axis.
    """
    panels: dict[str, pl.DataFrame] = {"pooled": cells}
    if params is not None and params.model_groups:
        for group, models in params.groups(cells["model"].unique().to_list()).items():
            panels[group] = cells.filter(pl.col("model").is_in(models))
    rows = []
    for panel, sub in panels.items():
        for axis in ("C_adj", "C_obs"):
            ok = sub.filter(pl.col(axis).is_not_null() & pl.col("R").is_not_null()
                            & pl.col(axis).is_not_nan() & pl.col("R").is_not_nan())
            pts = list(zip(ok[axis].to_list(), ok["R"].to_list()))
            for (model, arch), p in zip(ok.select(CELL).iter_rows(), M.pareto(pts)):
                rows.append({"panel": panel, "consistency_axis": axis, "model": model, "arch": arch,
                             "consistency": p.consistency, "R": p.richness, "non_dominated": p.non_dominated,
                             "supported": p.supported, "gap_below_chord": p.gap_below_chord})
    df = _rows("wse_pareto", rows)
    return df.sort(pl.col("panel") != "pooled", "panel", "consistency_axis", *CELL)
