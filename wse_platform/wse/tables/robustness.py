"""Appendix C robustness tables: the full-horizon paired comparison (C.3 / Fig. 10) and the cost
and coverage contrasts of the architectures (Fig. 11), both as plain point estimates."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from wse_platform.wse.tables.contrasts import arch_pairs
from wse_platform.wse.tables.frame import CELL, CONTRASTS, TableParams
from wse_platform.wse.tables.schema import _finish, _rows

JUDGE_ROLES = ("wse.consistency_judge", "wse.richness_judge")


def trajectory_consistency_share(first: np.ndarray, horizon: int) -> np.ndarray:
    """Per full-horizon trajectory: % of the H steps before its first contradiction (100 without one)."""
    return np.where(np.isnan(first), 100.0, 100.0 * (first - 1.0) / horizon)


def _group_rows(per_model: list[dict[str, Any]], params: TableParams, value_cols: tuple[str, ...]
                ) -> list[dict[str, Any]]:
    """Mean of the available model estimates within each model group (scope=group)."""
    out = []
    models = sorted({r["model"] for r in per_model})
    for group, members in params.groups(models).items():
        for contrast in CONTRASTS:
            rs = [r for r in per_model if r["model"] in members and r["contrast"] == contrast]
            if not rs:
                continue
            row = {"scope": "group", "model_group": group, "model": None, "contrast": contrast,
                   "n_models": len(rs), "n_pairs": sum(r["n_pairs"] for r in rs)}
            for c in value_cols:
                vals = [r[c] for r in rs if r[c] is not None]
                row[c] = float(np.mean(vals)) if vals else None
            out.append(row)
    return out


def full_horizon_contrasts(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams) -> pl.DataFrame:
    """`wse_full_horizon_contrasts` (App. C.3): an architecture pair of one seed is kept only when
    both trajectories reach the horizon (L = H) with valid scores (a richness score, and a binary
    verdict on every step: not censored). The per-trajectory consistency is the % of the H steps
    before the first contradiction. Paired differences are averaged within each model
    (scope=model), then the available model estimates within each model group (scope=group)."""
    h = info["horizon"]
    full = frame.filter((pl.col("length") == h) & pl.col("censored_at").is_null() & pl.col("R").is_not_null())
    full = full.with_columns(C_traj=pl.Series(
        trajectory_consistency_share(full["first_contradiction"].cast(pl.Float64).fill_null(np.nan).to_numpy(), h)))
    per_model: list[dict[str, Any]] = []
    for model in sorted(frame["model"].unique().to_list()):
        mine = full.filter(pl.col("model") == model)
        archs = frame.filter(pl.col("model") == model)["arch"].unique().to_list()
        for contrast in CONTRASTS:
            diffs = []
            for a, b in arch_pairs(archs, contrast):
                pa = mine.filter(pl.col("arch") == a).select("seed_id", "C_traj", "R")
                pb = mine.filter(pl.col("arch") == b).select("seed_id", "C_traj", "R")
                diffs.append(pa.join(pb, on="seed_id", suffix="_b").select(
                    dC=pl.col("C_traj") - pl.col("C_traj_b"), dR=pl.col("R") - pl.col("R_b")))
            if not diffs:
                continue
            d = pl.concat(diffs)
            per_model.append({"scope": "model", "model_group": None, "model": model, "contrast": contrast,
                              "n_models": 1, "n_pairs": d.height,
                              "delta_C": d["dC"].mean() if d.height else None,
                              "delta_R": d["dR"].mean() if d.height else None})
    rows = _group_rows(per_model, params, ("delta_C", "delta_R")) + per_model
    for r in rows:
        r.update(horizon=h, judge_config_id=info["consistency_judge_id"])
    return _rows("wse_full_horizon_contrasts", rows)


# the `llm_calls` columns `cell_costs` (and so `cost_contrasts`) reads: the asset selects these, not `*` (at
# horizon 20 the fleet's 100,000 calls x 24 columns cost ~0.3 s of CPU to read in a table run, these ~0.03 s)
COST_COLUMNS = ("role", "partition_key", "request_key", "attempt", "tokens_in", "tokens_out", "cost_usd")


def cell_costs(llm_calls: pl.DataFrame) -> pl.DataFrame:
    """Generation cost per cell from `llm_calls` (judge calls excluded): calls, tokens, cost.

    Each (request_key, attempt) counts once, so a re-run served from the cache does not double
    the cost; the cell comes from the partition key ("arch|model")."""
    calls = llm_calls.filter(pl.col("role").str.starts_with("wse.") & ~pl.col("role").is_in(JUDGE_ROLES)
                             & pl.col("partition_key").str.contains("|", literal=True))
    calls = calls.unique(subset=["request_key", "attempt", "partition_key"], keep="first", maintain_order=True)
    calls = calls.with_columns(pl.col("tokens_in", "tokens_out").cast(pl.Int64), pl.col("cost_usd").cast(pl.Float64))
    calls = calls.with_columns(arch=pl.col("partition_key").str.split_exact("|", 1).struct.field("field_0"),
                               model=pl.col("partition_key").str.split_exact("|", 1).struct.field("field_1"))
    return calls.group_by(CELL).agg(
        n_calls=pl.len(), tokens_in=pl.col("tokens_in").fill_null(0).sum(),
        tokens_out=pl.col("tokens_out").fill_null(0).sum(),
        cost_usd=pl.when(pl.col("cost_usd").is_not_null().any()).then(pl.col("cost_usd").sum()))


def cost_contrasts(llm_calls: pl.DataFrame, cells: pl.DataFrame, params: TableParams) -> pl.DataFrame:
    """`wse_cost_contrasts` (Fig. 11): row_kind=cell — generation tokens and cost per trajectory and
    per observed narrative step next to G; row_kind=contrast — the architecture contrasts of tokens
    and cost per trajectory and of G, averaged over pairs within a model (scope=model) and over
    models within a group (scope=group); `pct_*` are the same as within-model percentage changes
    (100·(a − b)/b per pair, averaged over pairs, then over models: the bars of Fig. 11)."""
    cost = cell_costs(llm_calls)
    c = cells.select(CELL + ["n", "G", "horizon"]).join(cost, on=CELL, how="left").with_columns(
        steps=pl.col("G") / 100.0 * pl.col("horizon") * pl.col("n"))
    c = c.with_columns(
        tokens_per_trajectory=(pl.col("tokens_in") + pl.col("tokens_out")) / pl.col("n"),
        cost_per_trajectory=pl.col("cost_usd") / pl.col("n"),
        tokens_per_step=pl.when(pl.col("steps") > 0)
        .then((pl.col("tokens_in") + pl.col("tokens_out")) / pl.col("steps")))
    rows = [{"row_kind": "cell", "scope": "cell", "model": r["model"], "arch": r["arch"], "n_calls": r["n_calls"],
             "tokens_per_trajectory": r["tokens_per_trajectory"], "cost_per_trajectory": r["cost_per_trajectory"],
             "tokens_per_step": r["tokens_per_step"], "G": r["G"]} for r in c.iter_rows(named=True)]
    by = {(r["model"], r["arch"]): r for r in c.iter_rows(named=True)}
    per_model = []
    values = ("tokens_per_trajectory", "cost_per_trajectory", "G")
    pcts = tuple(f"pct_{v}" for v in values)
    for model in sorted(c["model"].unique().to_list()):
        archs = [a for m, a in by if m == model]
        for contrast in CONTRASTS:
            pairs = arch_pairs(archs, contrast)
            if not pairs:
                continue
            row = {"scope": "model", "model_group": None, "model": model, "contrast": contrast,
                   "n_models": 1, "n_pairs": len(pairs)}
            for v in values:
                ds = [by[(model, a)][v] - by[(model, b)][v] for a, b in pairs
                      if by[(model, a)][v] is not None and by[(model, b)][v] is not None]
                row[v] = float(np.mean(ds)) if ds else None
                # Fig. 11: within-model percentage change of each pair, averaged over the model's pairs
                ps = [100.0 * (by[(model, a)][v] - by[(model, b)][v]) / by[(model, b)][v] for a, b in pairs
                      if by[(model, a)][v] is not None and by[(model, b)][v] not in (None, 0)]
                row[f"pct_{v}"] = float(np.mean(ps)) if ps else None
            per_model.append(row)
    for r in _group_rows(per_model, params, values + pcts) + per_model:
        rows.append({"row_kind": "contrast", **{k: v for k, v in r.items() if k not in values + pcts},
                     "delta_tokens_per_trajectory": r["tokens_per_trajectory"],
                     "delta_cost_per_trajectory": r["cost_per_trajectory"], "delta_G": r["G"],
                     **{p: r[p] for p in pcts}})
    return _finish("wse_cost_contrasts", _rows("wse_cost_contrasts", rows))
