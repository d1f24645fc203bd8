"""The WSE-bench final tables, as pure polars functions of the upstream warehouse tables.

Inputs are DataFrames with the columns of `wse_trajectories`, `wse_trajectory_consistency`,
`wse_consistency_steps` and `wse_richness_verdicts`. The first
step joins them into one row per trajectory (`trajectory_frame`); every table is then
computed from that frame with the metric definitions in `wse_platform.metrics.wse`, so a
number means the same thing in every table. Missing values are nulls (never a default).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.stats import bootstrap as bs
from wse_platform.stats.scaling import MIN_MODELS, fit_with_leave_one_out
from wse_platform.wse.architecture import FAILURE_COMPONENTS, WORLD_MEMORY_AGENT, parse_architecture

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


# ---- 1. cell metrics ----------------------------------------------------------------------------
def cell_metrics(frame: pl.DataFrame, info: Mapping[str, Any]) -> pl.DataFrame:
    """`wse_cell_metrics`: one row per model × architecture."""
    h = info["horizon"]
    rows = []
    for (model, arch), g in frame.group_by(CELL, maintain_order=True):
        c_obs, c_adj = M.consistency_scores(g["length"].to_list(), g["first_contradiction"].to_list(), h,
                                            g["censored_at"].to_list())
        r_vals = g.filter(pl.col("length") >= 1)["R"].drop_nulls()
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
            "R": float(r_vals.mean()) if r_vals.len() else None,
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


# ---- 2. architecture contrasts --------------------------------------------------------------------
@dataclass(frozen=True)
class ContrastSpec:
    scope: str               # group (Table 1) | model (Table 8) | base_conditional (Table 9)
    model_group: str | None
    model: str | None
    base_level: str | None
    contrast: str
    n_models: int
    n_pairs: int


def arch_pairs(archs: Iterable[str], contrast: str, base_level: int | None = None) -> list[tuple[str, str]]:
    """(minuend arch, subtrahend arch) pairs differing only in the contrast's factor."""
    factor, hi, lo = CONTRASTS[contrast]
    available = set(archs)
    pairs = []
    for a in sorted(available):
        pa = parse_architecture(a)
        if getattr(pa, factor) != hi or (base_level is not None and pa.base != base_level):
            continue
        partner = type(pa)(**{**{"base": pa.base, "wmem": pa.wmem, "wmod": pa.wmod}, factor: lo}).key
        if partner in available:
            pairs.append((a, partner))
    return pairs


def contrast_specs(cells: Sequence[tuple[str, str]], params: TableParams
                   ) -> tuple[list[ContrastSpec], np.ndarray]:
    """All contrasts and their (n_cells × k) weight matrix (models equal, pairs equal within a model)."""
    cidx = {c: j for j, c in enumerate(cells)}
    models = sorted({m for m, _ in cells})
    archs_of = {m: [a for mm, a in cells if mm == m] for m in models}
    specs, cols = [], []

    def add(scope, group, model, base, name, members):
        w = np.zeros(len(cells))
        used = {m: arch_pairs(archs_of[m], name, base) for m in members}
        used = {m: p for m, p in used.items() if p}
        if not used:
            return
        for m, pairs in used.items():
            for a, b in pairs:
                w[cidx[(m, a)]] += 1.0 / (len(used) * len(pairs))
                w[cidx[(m, b)]] -= 1.0 / (len(used) * len(pairs))
        specs.append(ContrastSpec(scope, group, model, None if base is None else f"B{base}", name, len(used),
                                  max(len(p) for p in used.values())))
        cols.append(w)

    groups = params.groups(models)
    for group, members in groups.items():
        for name in CONTRASTS:
            add("group", group, None, None, name, members)
    for m in models:
        for name in CONTRASTS:
            add("model", None, m, None, name, [m])
    for group, members in groups.items():
        for base in (1, 2, 3):
            for name in ("WMEM on-off", "WMOD on-off"):
                add("base_conditional", group, None, base, name, members)
    return specs, (np.column_stack(cols) if cols else np.zeros((len(cells), 0)))


def architecture_contrasts(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams,
                           loop_reference: bool = False) -> pl.DataFrame:
    """`wse_architecture_contrasts`: Table 1 (scope=group), Table 8 (model), Table 9 (base_conditional)."""
    panel = build_panel(frame, info["horizon"])
    design = seed_design(frame)
    specs, cm = contrast_specs(panel.cells, params)
    if not specs:
        return _rows("wse_architecture_contrasts", [])
    if loop_reference:
        res = bs.bootstrap_contrasts_loop(panel, design, cm, params.bootstrap_draws, params.bootstrap_seed)
    else:
        res = bs.bootstrap_contrasts(panel, design, cm, params.bootstrap_draws, params.bootstrap_seed,
                                     chunk=params.bootstrap_chunk)
    rows = []
    for j, s in enumerate(specs):
        row = {**s.__dict__, "n_seeds": design.n_units, "n_worlds": design.n_clusters}
        for m in bs.METRICS:
            row[f"delta_{m}"] = res.estimate[m][j]
            row[f"delta_{m}_lo"] = res.lower[m][j]
            row[f"delta_{m}_hi"] = res.upper[m][j]
        row["n_draws"] = res.n_draws
        row["n_draws_valid"] = int(min(res.n_valid[m][j] for m in bs.METRICS))
        row["bootstrap_seed"] = res.seed
        row["judge_config_id"] = info["consistency_judge_id"]
        row["richness_judge_config_id"] = info["richness_judge_id"]
        rows.append(row)
    return _finish("wse_architecture_contrasts", _rows("wse_architecture_contrasts", rows))


# ---- 3. Pareto ------------------------------------------------------------------------------------
def pareto_table(cells: pl.DataFrame) -> pl.DataFrame:
    """`wse_pareto`: Pareto status of every cell on (C_adj, R) and on (C_obs, R).

    Cells without a defined consistency or richness value are left out of that axis.
    """
    rows = []
    for axis in ("C_adj", "C_obs"):
        ok = cells.filter(pl.col(axis).is_not_null() & pl.col("R").is_not_null()
                          & pl.col(axis).is_not_nan() & pl.col("R").is_not_nan())
        pts = list(zip(ok[axis].to_list(), ok["R"].to_list()))
        for (model, arch), p in zip(ok.select(CELL).iter_rows(), M.pareto(pts)):
            rows.append({"consistency_axis": axis, "model": model, "arch": arch, "consistency": p.consistency,
                         "R": p.richness, "non_dominated": p.non_dominated, "supported": p.supported,
                         "gap_below_chord": p.gap_below_chord})
    return _finish("wse_pareto", _rows("wse_pareto", rows), ["consistency_axis"] + CELL)


# ---- 4. scaling --------------------------------------------------------------------------------------
SCALING_METRICS = ("G", "C_obs", "R")


def scaling_fit(cells: pl.DataFrame, params: TableParams) -> tuple[pl.DataFrame, str]:
    """`wse_scaling_fit`: Y = α + β·log2(P) per dense family on model means over architectures.

    Returns (table, note). Families with fewer than MIN_MODELS models with a parameter
    count give no rows; the note says so (the table then may be empty).
    """
    model_means = cells.group_by("model").agg(pl.col(m).mean() for m in SCALING_METRICS)
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
        for metric in SCALING_METRICS:
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


def source_family_table(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams) -> pl.DataFrame:
    """`wse_source_family` (Table 7).

    A family's C_obs / C_adj is the mean over cells (models weighted equally) of the cell's
    KM score on that family's seeds. row_kind = family (bootstrap CIs: worlds resampled
    within each family, then seeds within worlds), contrast (dracor-itp, dracor-smallville:
    differences of family means, same draws), leave_one_play_out (DraCor without one play:
    family values and contrasts, point estimates).
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
    return _rows("wse_source_family", rows)


# ---- 6. horizon sensitivity -----------------------------------------------------------------------------
def horizon_sensitivity(frame: pl.DataFrame, info: Mapping[str, Any]) -> pl.DataFrame:
    """`wse_horizon_sensitivity`: G_h, C_obs(h), C_adj(h) from the same trajectories truncated at h.

    h ∈ {5, 10, 15, 20} up to the configured horizon H, plus H itself (so a short demo
    horizon still has a row). Values average cells (scope=model: over the model's
    architectures; scope=all: models weighted equally). share_by_step10 is the share of
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
    out = pl.concat([overall.select(models.columns), models])
    shares = {m: share(obs.filter(pl.col("model") == m)) for m in frame["model"].unique().to_list()}
    counts = {m: obs.filter(pl.col("model") == m).height for m in shares}
    out = out.with_columns(
        share_by_step10=pl.when(pl.col("scope") == "all").then(pl.lit(share(obs)))
        .otherwise(pl.col("model").replace_strict(shares, default=None, return_dtype=pl.Float64)),
        n_first_contradictions=pl.when(pl.col("scope") == "all").then(pl.lit(obs.height))
        .otherwise(pl.col("model").replace_strict(counts, default=None, return_dtype=pl.Int64)),
        horizon=pl.lit(H), judge_config_id=pl.lit(info["consistency_judge_id"]),
    )
    return _finish("wse_horizon_sensitivity", out.sort(pl.col("scope") != "all", "model", "h", nulls_last=False))


# ---- 7. first violations ---------------------------------------------------------------------------------
def first_violations(frame: pl.DataFrame, consistency_steps: pl.DataFrame, info: Mapping[str, Any]) -> pl.DataFrame:
    """`wse_first_violations`: table_kind=category (Table 5) and commitment_source (Table 6).

    One observation per trajectory with an observed first contradiction, at that step.
    category = the step's category agreed by ≥ 2 judges (`category_majority`, else
    `no_majority_category`); commitment source = where ≥ 2 inconsistent votes say the
    contradicted fact was established (`prior_source_majority`: initial_world / opening /
    earlier_narrative / current_narrative), else `unresolved`. Rows for scope all and per model.
    """
    require_columns(consistency_steps, "wse_consistency_steps")
    cj = info["consistency_judge_id"]
    firsts = frame.filter("contradiction_observed").select(TRAJ + [pl.col("first_contradiction").alias("step")])
    steps = (consistency_steps.filter(pl.col("judge_config_id") == cj)
             .select(TRAJ + ["step", "category_majority", "prior_source_majority"])
             .with_columns(_found=pl.lit(True)))
    f = firsts.join(steps, on=TRAJ + ["step"], how="left")
    if f.filter(pl.col("_found").is_null()).height:
        row = f.filter(pl.col("_found").is_null()).row(0, named=True)
        raise TableInputError(f"wse_consistency_steps (judge {cj!r}): no row for {_record(row)} "
                              "(the trajectory's first contradiction)")
    bad = f.filter(pl.col("prior_source_majority").is_not_null()
                   & ~pl.col("prior_source_majority").is_in(COMMITMENT_SOURCES[:-1]))
    if bad.height:
        raise TableInputError(f"wse_consistency_steps: {_record(bad.row(0, named=True))}: prior_source_majority "
                              f"{bad['prior_source_majority'][0]!r} not in {list(COMMITMENT_SOURCES[:-1])}")
    f = f.with_columns(category=pl.col("category_majority").fill_null(NO_CATEGORY),
                       commitment_source=pl.col("prior_source_majority").fill_null("unresolved"))
    if not f.height:
        return _rows("wse_first_violations", [])
    parts = []
    for kind in ("category", "commitment_source"):
        for scope, keys in (("all", []), ("model", ["model"])):
            agg = f.group_by(keys + [kind]).agg(n=pl.len(), median_step=pl.col("step").median())
            if keys:
                agg = agg.join(f.group_by(keys).agg(total=pl.len()), on=keys, how="left")
            else:
                agg = agg.with_columns(total=pl.lit(f.height), model=pl.lit(None, pl.String))
            parts.append(agg.select(table_kind=pl.lit(kind), scope=pl.lit(scope), model="model",
                                    label=pl.col(kind), n=pl.col("n").cast(pl.Int64),
                                    pct=100.0 * pl.col("n") / pl.col("total"),
                                    median_step=pl.col("median_step").cast(pl.Float64)))
    out = pl.concat(parts).with_columns(judge_config_id=pl.lit(cj))
    out = out.sort("table_kind", "scope", "model", "n", "label", descending=[False, False, False, True, False],
                   nulls_last=False)
    return _finish("wse_first_violations", out)


# ---- 8. generation failures ------------------------------------------------------------------------------
def horizon_of(trajectories: pl.DataFrame) -> int:
    """The one horizon H of the stored trajectories."""
    require_columns(trajectories, "wse_trajectories", ["horizon"])
    horizons = trajectories["horizon"].unique().to_list()
    if len(horizons) != 1:
        raise TableInputError(f"wse_trajectories: need exactly one horizon, found {sorted(horizons, key=str)}")
    return int(horizons[0])


def generation_failures(trajectories: pl.DataFrame) -> pl.DataFrame:
    """`wse_generation_failures` (Table 3): failure rate of each component over the trajectories
    where it is enabled, plus the narrative steps lost after World Memory Agent failures.
    Needs only `wse_trajectories` (the trajectory frame works too)."""
    require_columns(trajectories, "wse_trajectories")
    H = horizon_of(trajectories)
    frame = trajectories
    enabled = {a: set(parse_architecture(a).enabled_components()) for a in frame["arch"].unique().to_list()}
    rows = []
    for scope, groups in (("all", [(None, frame)]),
                          ("model", [(m, frame.filter(pl.col("model") == m))
                                     for m in sorted(frame["model"].unique().to_list())])):
        for model, g in groups:
            for comp in FAILURE_COMPONENTS + ("any",):
                sub = g if comp == "any" else g.filter(pl.col("arch").is_in([a for a, e in enabled.items()
                                                                              if comp in e]))
                if sub.is_empty():
                    continue
                failed = sub.filter(pl.col("failure_component").is_not_null() if comp == "any"
                                    else pl.col("failure_component") == comp)
                lost = int(failed["lost_steps_wmem"].fill_null(0).sum()) if comp == WORLD_MEMORY_AGENT else None
                rows.append({"scope": scope, "model": model, "component": comp, "n_enabled": sub.height,
                             "n_failures": failed.height, "failure_rate_pct": 100.0 * failed.height / sub.height,
                             "median_failure_step": float(failed["failure_step"].median()) if failed.height else None,
                             "lost_steps_wmem": lost,
                             "lost_steps_pct": None if lost is None else 100.0 * lost / (sub.height * H),
                             "horizon": H})
    return _rows("wse_generation_failures", rows)


# ---- all tables -----------------------------------------------------------------------------------------
@dataclass
class WseTables:
    tables: dict[str, pl.DataFrame]
    notes: dict[str, str]
    frame: pl.DataFrame
    info: dict[str, Any]


def build_all_tables(trajectories: pl.DataFrame, trajectory_consistency: pl.DataFrame,
                     consistency_steps: pl.DataFrame, richness_verdicts: pl.DataFrame,
                     params: TableParams) -> WseTables:
    """Every final table from the upstream tables (one consistency and one richness judge config)."""
    frame, info = trajectory_frame(trajectories, trajectory_consistency, richness_verdicts, params)
    cells = cell_metrics(frame, info)
    scaling, note = scaling_fit(cells, params)
    tables = {
        "wse_cell_metrics": cells,
        "wse_architecture_contrasts": architecture_contrasts(frame, info, params),
        "wse_pareto": pareto_table(cells),
        "wse_scaling_fit": scaling,
        "wse_source_family": source_family_table(frame, info, params),
        "wse_horizon_sensitivity": horizon_sensitivity(frame, info),
        "wse_first_violations": first_violations(frame, consistency_steps, info),
        "wse_generation_failures": generation_failures(trajectories),
    }
    return WseTables(tables, {"wse_scaling_fit": note} if note else {}, frame, info)


# ---- output schema -------------------------------------------------------------------------------------------
_F, _I, _S, _B = pl.Float64, pl.Int64, pl.String, pl.Boolean
FINAL_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "wse_cell_metrics": {
        "model": _S, "arch": _S, "judge_config_id": _S, "richness_judge_config_id": _S, "horizon": _I,
        "n": _I, "n_with_narrative": _I, "G": _F, "C_obs": _F, "C_adj": _F, "R": _F, "n_richness": _I,
        "n_richness_judge_failures": _I, "n_contradictions": _I, "n_censored_no_majority": _I, "n_failures": _I,
        **{f"fail_{c}": _I for c in FAILURE_COMPONENTS}, "n_story_endings": _I, **{f"end_{k}": _I for k in END_KINDS}},
    "wse_architecture_contrasts": {
        "scope": _S, "model_group": _S, "model": _S, "base_level": _S, "contrast": _S, "n_models": _I,
        "n_pairs": _I, "n_seeds": _I, "n_worlds": _I,
        **{f"delta_{m}{s}": _F for m in bs.METRICS for s in ("", "_lo", "_hi")},
        "n_draws": _I, "n_draws_valid": _I, "bootstrap_seed": _I, "judge_config_id": _S,
        "richness_judge_config_id": _S},
    "wse_pareto": {"consistency_axis": _S, "model": _S, "arch": _S, "consistency": _F, "R": _F,
                   "non_dominated": _B, "supported": _B, "gap_below_chord": _F},
    "wse_scaling_fit": {"family": _S, "metric": _S, "fit": _S, "dropped_model": _S, "alpha": _F, "beta": _F,
                        "r2": _F, "n": _I, "models": _S},
    "wse_source_family": {
        "row_kind": _S, "source_family": _S, "contrast": _S, "dropped_world": _S, "n_worlds": _I,
        "C_obs": _F, "C_obs_lo": _F, "C_obs_hi": _F, "C_adj": _F, "C_adj_lo": _F, "C_adj_hi": _F,
        "n_trajectories": _I, "observed_steps": _I, "mean_length": _F, "day_advance_pct": _F,
        "full_horizon_pct": _F, "first_contradiction_median": _F, "n_draws": _I, "bootstrap_seed": _I,
        "judge_config_id": _S},
    "wse_horizon_sensitivity": {
        "scope": _S, "model": _S, "h": _I, "G_h": _F, "C_obs_h": _F, "C_adj_h": _F, "n_cells": _I,
        "share_by_step10": _F, "n_first_contradictions": _I, "horizon": _I, "judge_config_id": _S},
    "wse_first_violations": {"table_kind": _S, "scope": _S, "model": _S, "label": _S, "n": _I, "pct": _F,
                             "median_step": _F, "judge_config_id": _S},
    "wse_generation_failures": {
        "scope": _S, "model": _S, "component": _S, "n_enabled": _I, "n_failures": _I, "failure_rate_pct": _F,
        "median_failure_step": _F, "lost_steps_wmem": _I, "lost_steps_pct": _F, "horizon": _I},
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
