"""Source families: prior-canon interference (paper Table 7 / Fig. 5)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import warnings

import numpy as np
import polars as pl

from wse_platform.stats import bootstrap as bs
from wse_platform.stats import km
from wse_platform.wse.tables.frame import (
    TRAJ,
    TableParams,
    build_panel,
    seed_design,
)
from wse_platform.wse.tables.schema import _rows


# ---- 5. source families ----------------------------------------------------------------------------
def _family_stats(g: pl.DataFrame, horizon: int) -> dict[str, Any]:
    steps = int(g["length"].sum())
    firsts = g.filter("contradiction_observed")["first_contradiction"]
    return {"n_trajectories": g.height, "observed_steps": steps,
            "mean_length": float(g["length"].mean()),
            "day_advance_pct": 100.0 * float(g["day_advances"].fill_null(0).sum()) / steps if steps else None,
            "full_horizon_pct": 100.0 * float((g["length"] == horizon).mean()),
            "first_contradiction_median": float(firsts.median()) if firsts.len() else None}


def cell_mean_weights(cells: Sequence[tuple[str, str]]) -> np.ndarray:
    """(n_cells, 1) weights of the mean over cells with models weighted equally
    (architectures equally within a model)."""
    models = sorted({m for m, _ in cells})
    per_model = {m: sum(1 for mm, _ in cells if mm == m) for m in models}
    return np.array([[1.0 / (len(models) * per_model[m])] for m, _ in cells])


def source_family_table(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams,
                        steps: pl.DataFrame | None = None) -> pl.DataFrame:
    """`wse_source_family` (Table 7).

    A family's C_obs / C_adj is the mean over cells (models weighted equally) of the cell's
    KM score on that family's seeds. row_kind = family (bootstrap CIs: worlds resampled
    within each family, then seeds within worlds), contrast (dracor-itp, dracor-smallville:
    differences of family means, same draws), leave_one_play_out (DraCor without one play:
    family values and contrasts, point estimates), and the rows of `source_family_pooled`
    (model_family, family_pooled: the paper's per-model pooled Kaplan–Meier).
    """
    h = info["horizon"]
    families = sorted(frame["source_family"].unique().to_list())
    panel = build_panel(frame, h)
    design = seed_design(frame, stratify_by_family=True)
    seed_family = dict(frame.select("seed_id", "source_family").unique().iter_rows())
    seed_world = dict(frame.select("seed_id", "world_id").unique().iter_rows())
    units = {f: np.array([i for i, u in enumerate(panel.unit_ids) if seed_family[u] == f]) for f in families}
    sub = {f: panel.subset(units[f]) for f in families}
    arrays = {f: bs.prepare(sub[f]) for f in families}
    mean_w = cell_mean_weights(panel.cells)
    labels = [("family", f, None) for f in families]
    labels += [("contrast", None, f"dracor-{o}") for o in ("itp", "smallville") if {"dracor", o} <= set(families)]

    def stat(w: np.ndarray, keep: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        fam = {}
        for f in families:
            wf = w[:, units[f]] * (keep[f] if keep else 1.0)
            cm = bs.cell_metrics_weighted(sub[f], wf, arrays[f])
            fam[f] = {m: bs.apply_contrasts(cm[m], mean_w)[:, 0] for m in ("C_obs", "C_adj")}
        out = {}
        for m in ("C_obs", "C_adj"):
            cols = [fam[f][m] for _, f, c in labels if f] + \
                   [fam["dracor"][m] - fam[c.split("-")[1]][m] for _, f, c in labels if c]
            out[m] = np.column_stack(cols)
        return out

    draws = bs.bootstrap_draws(design, params.bootstrap_draws, params.bootstrap_seed, stat, params.bootstrap_chunk)
    point = stat(np.ones((1, len(panel.unit_ids))))
    rows = []
    for j, (kind, fam, contrast) in enumerate(labels):
        row = {"row_kind": kind, "source_family": fam, "contrast": contrast,
               "n_worlds": frame.filter(pl.col("source_family") == fam)["world_id"].n_unique() if fam else None}
        for m in ("C_obs", "C_adj"):
            lo, hi, _ = bs.percentile_interval(draws[m][:, j:j + 1])
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = point[m][0, j], lo[0], hi[0]
        if fam:
            row.update(_family_stats(frame.filter(pl.col("source_family") == fam), h))
        rows.append(row)
    # leave one DraCor play (world) out: point estimates on the remaining seeds
    dracor_worlds = sorted(frame.filter(pl.col("source_family") == "dracor")["world_id"].unique().to_list())
    for world in dracor_worlds if len(dracor_worlds) > 1 else []:
        keep = {f: np.array([0.0 if seed_world[panel.unit_ids[i]] == world else 1.0 for i in units[f]])
                for f in families}
        est = stat(np.ones((1, len(panel.unit_ids))), keep)
        rest = frame.filter((pl.col("source_family") == "dracor") & (pl.col("world_id") != world))
        for j, (kind, fam, contrast) in enumerate(labels):
            if fam not in (None, "dracor"):
                continue
            row = {"row_kind": "leave_one_play_out", "source_family": fam, "contrast": contrast,
                   "dropped_world": world, "n_worlds": len(dracor_worlds) - 1,
                   "C_obs": est["C_obs"][0, j], "C_adj": est["C_adj"][0, j]}
            if fam:
                row.update(_family_stats(rest, h))
            rows.append(row)
    for row in rows:
        row.update(n_draws=params.bootstrap_draws, bootstrap_seed=params.bootstrap_seed,
                   judge_config_id=info["consistency_judge_id"])
    return pl.concat([_rows("wse_source_family", rows), source_family_pooled(frame, info, params, steps)])




# ---- Table 7 / Fig. 5 as the paper computes them: per-model pooled KM ------------------------------
def model_pool_matrix(cells: Sequence[tuple[str, str]]) -> tuple[list[str], np.ndarray]:
    """(models, (n_cells, n_models) 0/1 matrix) summing each model's cells (its architectures)."""
    models = sorted({m for m, _ in cells})
    pool = np.zeros((len(cells), len(models)))
    for j, (m, _) in enumerate(cells):
        pool[j, models.index(m)] = 1.0
    return models, pool


def pooled_arrays(arrays: bs._PanelArrays, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Per-unit risk and event indicators summed over each pooled group of cells: (units, groups·H)."""
    n_units = arrays.at_risk.shape[0]
    n_cells, h = arrays.shape
    at_risk = np.einsum("uch,cg->ugh", arrays.at_risk.reshape(n_units, n_cells, h), pool).reshape(n_units, -1)
    event = np.einsum("uch,cg->ugh", arrays.event.reshape(n_units, n_cells, h), pool).reshape(n_units, -1)
    return at_risk, event, (pool.shape[1], h)


def pooled_km(pooled: tuple[np.ndarray, np.ndarray, tuple[int, int]], weights: np.ndarray) -> dict[str, np.ndarray]:
    """C_obs / C_adj of one Kaplan–Meier per pooled group of cells (risk sets and events summed over
    the group's cells before the product-limit), for each weight row: arrays (b, n_groups)."""
    at_risk, event, shape = pooled
    w = np.atleast_2d(weights)
    c_obs, c_adj = km.c_obs_c_adj((w @ at_risk).reshape(-1, *shape), (w @ event).reshape(-1, *shape))
    return {"C_obs": c_obs, "C_adj": c_adj}


def _day_at_contradiction(steps: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per trajectory: the relative day of each step, counted from 1 (the opening's day is day 1;
    each new_day flag on an earlier or the current step adds one) — the paper's Table 7 values
    (≈ 1.1) imply counting from 1."""
    if steps is None or not steps.height:
        return None
    return (steps.sort(TRAJ + ["step"])
            .with_columns(day=1 + pl.col("new_day").fill_null(False).cast(pl.Int64).cum_sum().over(TRAJ))
            .select(TRAJ + ["step", "day"]))


def _equal_model_exposure(g: pl.DataFrame, horizon: int) -> dict[str, Any]:
    """Table 7's realized temporal exposure as equal-model means: per model over its trajectories
    (all architectures), then the mean over models."""
    per = (g.group_by("model").agg(
        mean_length=pl.col("length").mean(),
        day_advance_pct=100.0 * pl.col("day_advances").fill_null(0).sum() / pl.col("length").sum(),
        full_horizon_pct=100.0 * (pl.col("length") == horizon).mean()))
    mean = {c: (float(per[c].drop_nans().mean()) if per[c].drop_nans().len() else None)
            for c in ("mean_length", "day_advance_pct", "full_horizon_pct")} if per.height else {}
    return {"n_trajectories": g.height, **mean}


def source_family_pooled(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams,
                         steps: pl.DataFrame | None = None) -> pl.DataFrame:
    """`wse_source_family` rows computed as the paper does (Table 7 / Fig. 5).

    Each model's trajectories are pooled over its architectures into one Kaplan–Meier per
    source family (row_kind=model_family: per model, with bootstrap CIs); the family value is the
    equal-model mean of those (row_kind=family_pooled, CIs from the same draws), with the exposure
    rows as equal-model means (mean observed steps, day-advance %, full-horizon %); the DraCor
    contrasts of those family means (row_kind=contrast_pooled, same draws) and the leave-one-play-out
    rows with the same method (row_kind=leave_one_play_out_pooled, Fig. 15). Also: the equal-model
    mean first-contradiction step and the mean relative day at the contradiction (counted from 1:
    the start day is day 1, each new_day flag up to that step adds one; needs
    `wse_trajectory_steps`, else NULL).
    """
    h = info["horizon"]
    families = sorted(frame["source_family"].unique().to_list())
    panel = build_panel(frame, h)
    design = seed_design(frame, stratify_by_family=True)
    seed_family = dict(frame.select("seed_id", "source_family").unique().iter_rows())
    units = {f: np.array([i for i, u in enumerate(panel.unit_ids) if seed_family[u] == f]) for f in families}
    models, pool = model_pool_matrix(panel.cells)
    pooled = {f: pooled_arrays(bs.prepare(panel.subset(units[f])), pool) for f in families}

    contrasts = [o for o in ("itp", "smallville") if {"dracor", o} <= set(families)]
    seed_world = dict(frame.select("seed_id", "world_id").unique().iter_rows())

    def stat(w: np.ndarray, keep: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        out = {}
        per = {f: pooled_km(pooled[f], w[:, units[f]] * (keep[f] if keep else 1.0)) for f in families}
        for m in ("C_obs", "C_adj"):
            means = {f: np.nanmean(per[f][m], axis=1, keepdims=True) for f in families}
            cols = [per[f][m] for f in families] + [means[f] for f in families] + \
                   [means["dracor"] - means[o] for o in contrasts]      # DraCor contrasts, same method
            out[m] = np.column_stack(cols)
        return out

    with warnings.catch_warnings():   # a model without trajectories in a draw's family: NaN, left out
        warnings.simplefilter("ignore", RuntimeWarning)
        draws = bs.bootstrap_draws(design, params.bootstrap_draws, params.bootstrap_seed, stat, params.bootstrap_chunk)
        point = stat(np.ones((1, len(panel.unit_ids))))
    days = _day_at_contradiction(steps)
    obs = frame.filter("contradiction_observed")
    if days is not None:
        obs = obs.join(days.rename({"step": "first_contradiction"}), on=TRAJ + ["first_contradiction"], how="left")
    else:
        obs = obs.with_columns(day=pl.lit(None, pl.Int64))
    rows, j = [], 0
    for f in families:
        for m in models:
            sub = obs.filter((pl.col("source_family") == f) & (pl.col("model") == m))
            rows.append({"row_kind": "model_family", "source_family": f, "model": m,
                         "mean_first_contradiction_step": sub["first_contradiction"].mean() if sub.height else None,
                         "relative_day_at_contradiction": sub["day"].mean() if sub.height else None,
                         "_j": j})
            j += 1
    for f in families:
        sub = obs.filter(pl.col("source_family") == f)
        per_model = sub.group_by("model").agg(t=pl.col("first_contradiction").mean(), d=pl.col("day").mean())
        rows.append({"row_kind": "family_pooled", "source_family": f, "model": None,
                     "mean_first_contradiction_step": per_model["t"].mean() if per_model.height else None,
                     "relative_day_at_contradiction": per_model["d"].mean() if per_model.height else None,
                     "n_worlds": frame.filter(pl.col("source_family") == f)["world_id"].n_unique(), "_j": j,
                     **_equal_model_exposure(frame.filter(pl.col("source_family") == f), h)})
        j += 1
    for o in contrasts:
        rows.append({"row_kind": "contrast_pooled", "source_family": None, "model": None,
                     "contrast": f"dracor-{o}", "_j": j})
        j += 1
    # leave one DraCor play out, per-model pooled (Fig. 15): point estimates on the remaining seeds
    dracor_worlds = sorted(frame.filter(pl.col("source_family") == "dracor")["world_id"].unique().to_list())
    lopo = []
    for world in dracor_worlds if len(dracor_worlds) > 1 else []:
        keep = {f: np.array([0.0 if seed_world[panel.unit_ids[i]] == world else 1.0 for i in units[f]])
                for f in families}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            est = stat(np.ones((1, len(panel.unit_ids))), keep)
        base = len(families) * len(models)
        cols = [("dracor", None, base + families.index("dracor"))] + \
               [(None, f"dracor-{o}", base + len(families) + i) for i, o in enumerate(contrasts)]
        for fam, contrast, k in cols:
            lopo.append({"row_kind": "leave_one_play_out_pooled", "source_family": fam, "model": None,
                         "contrast": contrast, "dropped_world": world, "n_worlds": len(dracor_worlds) - 1,
                         "C_obs": est["C_obs"][0, k], "C_adj": est["C_adj"][0, k]})
    for row in rows:
        k = row.pop("_j")
        for m in ("C_obs", "C_adj"):
            lo, hi, _ = bs.percentile_interval(draws[m][:, k:k + 1])
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = point[m][0, k], lo[0], hi[0]
        row.update(n_draws=params.bootstrap_draws, bootstrap_seed=params.bootstrap_seed,
                   judge_config_id=info["consistency_judge_id"])
    for row in lopo:
        row.update(n_draws=None, bootstrap_seed=None, judge_config_id=info["consistency_judge_id"])
    return _rows("wse_source_family", rows + lopo)
