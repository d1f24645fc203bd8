"""Shared inputs of the WSE-bench final tables: parameters, input checks, the trajectory frame
and the (seed × cell) panel for the bootstrap.

Inputs are DataFrames with the columns of `wse_trajectories`, `wse_trajectory_consistency`,
`wse_consistency_steps` and `wse_richness_verdicts`. `trajectory_frame` joins them into one
row per trajectory; every table is computed from that frame with the metric definitions in
`wse_platform.metrics.wse`, so a number means the same thing in every table. Missing values
are nulls (never a default).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.stats import bootstrap as bs

CONSISTENCY_ROLE = "wse.consistency_judge"
RICHNESS_ROLE = "wse.richness_judge"
DEFAULT_BOOTSTRAP_SEED = 20_260_815
SENSITIVITY_HORIZONS = (5, 10, 15, 20)
EARLY_STEP = 10
END_KINDS = ("death", "permanent_incapacity", "closed_story")
COMMITMENT_SOURCES = ("initial_world", "opening", "earlier_narrative", "current_narrative", "unresolved")
NO_CATEGORY = "no_majority_category"
CONTRASTS: dict[str, tuple[str, Any, Any]] = {   # name -> (factor, level of the minuend, of the subtrahend)
    "B2-B1": ("base", 2, 1),
    "B3-B1": ("base", 3, 1),
    "B3-B2": ("base", 3, 2),
    "WMEM on-off": ("wmem", True, False),
    "WMOD on-off": ("wmod", True, False),
}

UPSTREAM_COLUMNS: dict[str, tuple[str, ...]] = {
    "wse_trajectories": ("model", "arch", "seed_id", "world_id", "source_family", "horizon", "length",
                         "failure_component", "failure_step", "end_kind", "end_step", "day_advances",
                         "lost_steps_wmem"),
    "wse_trajectory_consistency": ("judge_config_id", "model", "arch", "seed_id", "length",
                                   "first_contradiction", "censored_at", "censor_reason"),
    "wse_consistency_steps": ("judge_config_id", "model", "arch", "seed_id", "step", "majority",
                              "category_majority", "prior_source_majority"),
    "wse_richness_verdicts": ("judge_config_id", "model", "arch", "seed_id", "judge_index",
                              "n_units_non_repetitive", "observed_steps", "rating_event_diversity",
                              "rating_character_change", "rating_world_expansion", "failure_json"),
}
CELL = ["model", "arch"]
TRAJ = ["model", "arch", "seed_id"]


class TableInputError(ValueError):
    """Upstream rows that cannot be turned into final tables; the message names table, record, field."""


# ---- parameters ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TableParams:
    model_groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    model_params: Mapping[str, tuple[float | None, str | None]] = field(default_factory=dict)  # (params_b, family)
    bootstrap_draws: int = 1000
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED
    consistency_judge_id: str | None = None   # None: the only one present in the data
    richness_judge_id: str | None = None
    bootstrap_chunk: int = 1000

    @classmethod
    def from_settings(cls, settings, bootstrap_seed: int | None = None) -> "TableParams":
        w = settings.wse
        return cls(
            model_groups={g: list(ms) for g, ms in w.model_groups.items()},
            model_params={m: (settings.models[m].params_b, settings.models[m].family) for m in w.models},
            bootstrap_draws=w.bootstrap_draws or 1000,
            bootstrap_seed=bootstrap_seed if bootstrap_seed is not None else w.bootstrap_seed,
            consistency_judge_id=w.consistency_judge.judge_id(CONSISTENCY_ROLE) if w.consistency_judge else None,
            richness_judge_id=w.richness_judge.judge_id(RICHNESS_ROLE) if w.richness_judge else None,
        )

    def groups(self, models: Iterable[str]) -> dict[str, list[str]]:
        present = set(models)
        if not self.model_groups:
            return {"all": sorted(present)}
        return {g: [m for m in ms if m in present] for g, ms in self.model_groups.items()}


# ---- input checks and the trajectory frame ---------------------------------------------------
def require_columns(df: pl.DataFrame, table: str, columns: Sequence[str] | None = None) -> None:
    need = columns if columns is not None else UPSTREAM_COLUMNS[table]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise TableInputError(f"{table}: missing column(s) {missing} (have {df.columns})")


def _record(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={row[k]!r}" for k in ("model", "arch", "seed_id", "judge_index", "step") if k in row)


def select_judge(df: pl.DataFrame, table: str, judge_id: str | None) -> tuple[pl.DataFrame, str | None]:
    """Rows of one judge configuration (older configurations stay in the warehouse)."""
    ids = sorted(x for x in df["judge_config_id"].unique().to_list() if x is not None)
    if judge_id is None:
        if len(ids) > 1:
            raise TableInputError(f"{table}: several judge configurations {ids}; choose one (judge_config_id)")
        judge_id = ids[0] if ids else None
    elif ids and judge_id not in ids:
        raise TableInputError(f"{table}: no rows of judge configuration {judge_id!r} (present: {ids}); "
                              "run the judging assets for the current configuration")
    return df.filter(pl.col("judge_config_id") == judge_id), judge_id


def _check_unique(df: pl.DataFrame, table: str, keys: list[str]) -> None:
    dup = df.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise TableInputError(f"{table}: duplicate rows for {_record(dup.row(0, named=True))}")


def trajectory_richness(richness_verdicts: pl.DataFrame) -> pl.DataFrame:
    """Per trajectory: R = median of the valid judges' R; counts of valid and failed judges."""
    require_columns(richness_verdicts, "wse_richness_verdicts")
    ratings = ["rating_event_diversity", "rating_character_change", "rating_world_expansion"]
    rv = richness_verdicts.with_columns(
        _valid=pl.col("failure_json").is_null() & pl.all_horizontal(pl.col(c).is_not_null() for c in ratings)
        & pl.col("n_units_non_repetitive").is_not_null() & (pl.col("observed_steps").fill_null(0) >= 1))
    valid = rv.filter("_valid")
    for row in valid.iter_rows(named=True):
        for c in ratings:
            if not M.RATING_MIN <= row[c] <= M.RATING_MAX:
                raise TableInputError(f"wse_richness_verdicts: {_record(row)}: {c} = {row[c]!r} is outside 1..5")
        if row["n_units_non_repetitive"] < 0:
            raise TableInputError(f"wse_richness_verdicts: {_record(row)}: n_units_non_repetitive "
                                  f"= {row['n_units_non_repetitive']!r} < 0")
    r = M.richness_array(valid["n_units_non_repetitive"].to_numpy(), valid["observed_steps"].to_numpy(),
                         valid.select(ratings).to_numpy()) if valid.height else np.zeros(0)
    scored = valid.select(TRAJ).with_columns(judge_R=pl.Series(r, dtype=pl.Float64))
    per = scored.group_by(TRAJ).agg(R=pl.col("judge_R").median(), n_richness_valid=pl.len())
    failed = rv.filter(~pl.col("_valid")).group_by(TRAJ).agg(n_richness_failed=pl.len())
    return (rv.select(TRAJ).unique().join(per, on=TRAJ, how="left").join(failed, on=TRAJ, how="left")
            .with_columns(pl.col("n_richness_valid", "n_richness_failed").fill_null(0).cast(pl.Int64)))


def trajectory_frame(trajectories: pl.DataFrame, trajectory_consistency: pl.DataFrame,
                     richness_verdicts: pl.DataFrame, params: TableParams) -> tuple[pl.DataFrame, dict[str, Any]]:
    """One row per (model, arch, seed_id) with generation, consistency and richness values.

    Returns the frame and info {horizon, consistency_judge_id, richness_judge_id}. Every
    trajectory with a narrative must have a consistency row of the chosen judge whose
    length matches (a mismatch means the verdicts are stale).
    """
    require_columns(trajectories, "wse_trajectories")
    require_columns(trajectory_consistency, "wse_trajectory_consistency")
    _check_unique(trajectories, "wse_trajectories", TRAJ)
    if trajectories.is_empty():
        raise TableInputError("wse_trajectories: no rows; run the generation assets first")
    horizon = horizon_of(trajectories)
    bad = trajectories.filter((pl.col("length") < 0) | (pl.col("length") > horizon))
    if bad.height:
        raise TableInputError(f"wse_trajectories: {_record(bad.row(0, named=True))}: length "
                              f"{bad['length'][0]} outside 0..{horizon}")
    tc, cj = select_judge(trajectory_consistency, "wse_trajectory_consistency", params.consistency_judge_id)
    _check_unique(tc, "wse_trajectory_consistency", TRAJ)
    frame = trajectories.join(
        tc.select(TRAJ + [pl.col("length").alias("_judged_length"), "first_contradiction", "censored_at",
                          "censor_reason"]), on=TRAJ, how="left")
    missing = frame.filter(pl.col("_judged_length").is_null() & (pl.col("length") >= 1))
    if missing.height:
        raise TableInputError(f"wse_trajectory_consistency (judge {cj!r}): no row for "
                              f"{_record(missing.row(0, named=True))}; run the consistency judging asset")
    stale = frame.filter(pl.col("_judged_length").is_not_null() & (pl.col("_judged_length") != pl.col("length")))
    if stale.height:
        row = stale.row(0, named=True)
        raise TableInputError(f"wse_trajectory_consistency (judge {cj!r}): {_record(row)}: length "
                              f"{row['_judged_length']} but wse_trajectories.length {row['length']}; re-judge")
    bad_t = frame.filter(pl.col("first_contradiction").is_not_null()
                         & ((pl.col("first_contradiction") < 1) | (pl.col("first_contradiction") > pl.col("length"))))
    if bad_t.height:
        raise TableInputError(f"wse_trajectory_consistency: {_record(bad_t.row(0, named=True))}: first_contradiction "
                              f"{bad_t['first_contradiction'][0]} outside 1..length")
    bad_c = frame.filter(pl.col("censored_at").is_not_null()
                         & ((pl.col("censored_at") < 0) | (pl.col("censored_at") > pl.col("length"))))
    if bad_c.height:
        raise TableInputError(f"wse_trajectory_consistency: {_record(bad_c.row(0, named=True))}: censored_at "
                              f"{bad_c['censored_at'][0]} outside 0..length")
    rich_j = None
    if richness_verdicts.height:
        rv, rich_j = select_judge(richness_verdicts, "wse_richness_verdicts", params.richness_judge_id)
        _check_unique(rv, "wse_richness_verdicts", TRAJ + ["judge_index"])
        rich = trajectory_richness(rv)
        frame = frame.join(rich, on=TRAJ, how="left")
    else:
        frame = frame.with_columns(R=pl.lit(None, pl.Float64), n_richness_valid=pl.lit(0, pl.Int64),
                                   n_richness_failed=pl.lit(0, pl.Int64))
    frame = frame.with_columns(
        pl.col("n_richness_valid", "n_richness_failed").fill_null(0),
        R=pl.when(pl.col("length") >= 1).then(pl.col("R")),
        effective_length=pl.when(pl.col("censored_at").is_null()).then(pl.col("length"))
        .otherwise(pl.min_horizontal("length", "censored_at")),
    ).with_columns(
        contradiction_observed=pl.col("first_contradiction").is_not_null()
        & (pl.col("first_contradiction") <= pl.col("effective_length")),
    ).drop("_judged_length").sort(TRAJ)
    return frame, {"horizon": horizon, "consistency_judge_id": cj, "richness_judge_id": rich_j}


# ---- panel for the bootstrap -------------------------------------------------------------------
def _nan(series: pl.Series) -> np.ndarray:
    return series.cast(pl.Float64).fill_null(np.nan).to_numpy()


def build_panel(frame: pl.DataFrame, horizon: int, cells: Sequence[tuple[str, ...]] | None = None,
                cell_columns: Sequence[str] = ("model", "arch")) -> bs.TrajectoryPanel:
    """(seed × cell) matrices from the trajectory frame; absent trajectories are marked absent."""
    cols = list(cell_columns)
    units = sorted(frame["seed_id"].unique().to_list())
    cells = sorted(set(frame.select(cols).iter_rows())) if cells is None else list(cells)
    uidx = {u: i for i, u in enumerate(units)}
    cidx = {c: j for j, c in enumerate(cells)}
    shape = (len(units), len(cells))
    present = np.zeros(shape, bool)
    length, first, cens, rich = (np.zeros(shape), np.full(shape, np.nan), np.full(shape, np.nan),
                                 np.full(shape, np.nan))
    sub = frame.filter(pl.struct(cols).is_in([dict(zip(cols, c)) for c in cells])) if cells else frame.head(0)
    ui = np.array([uidx[u] for u in sub["seed_id"].to_list()], dtype=np.int64)
    ci = np.array([cidx[c] for c in sub.select(cols).iter_rows()], dtype=np.int64)
    present[ui, ci] = True
    length[ui, ci] = sub["length"].to_numpy()
    first[ui, ci] = _nan(sub["first_contradiction"])
    cens[ui, ci] = _nan(sub["censored_at"])
    rich[ui, ci] = _nan(sub["R"])
    return bs.TrajectoryPanel(tuple(units), tuple(cells), horizon, present, length, first, cens, rich)


def seed_design(frame: pl.DataFrame, stratify_by_family: bool = False) -> bs.ClusterDesign:
    """Seeds clustered by world (optionally stratified by source family), in panel order."""
    seeds = frame.select("seed_id", "world_id", "source_family").unique().sort("seed_id")
    if seeds["seed_id"].n_unique() != seeds.height:
        s = seeds.filter(pl.col("seed_id").is_duplicated())["seed_id"][0]
        raise TableInputError(f"wse_trajectories: seed_id {s!r} appears with different world_id/source_family")
    return bs.ClusterDesign.from_labels(seeds["seed_id"].to_list(), seeds["world_id"].to_list(),
                                        seeds["source_family"].to_list() if stratify_by_family else None)


def horizon_of(trajectories: pl.DataFrame) -> int:
    """The one horizon H of the stored trajectories."""
    require_columns(trajectories, "wse_trajectories", ["horizon"])
    horizons = trajectories["horizon"].unique().to_list()
    if len(horizons) != 1:
        raise TableInputError(f"wse_trajectories: need exactly one horizon, found {sorted(horizons, key=str)}")
    return int(horizons[0])

