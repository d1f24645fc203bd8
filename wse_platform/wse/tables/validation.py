"""Human validation of the judges (paper §5.2, App. B.5): `wse_human_validation`.

Two CSV files of human labels (format in the README, example in
`wse_platform/wse/human_labels_example/`):

* `consistency_labels.csv`: model, arch, seed_id, step, label (consistent | inconsistent),
  weight (optional design weight = inverse inclusion probability; default 1). Compared with the
  panel's valid majority at that step (`wse_consistency_steps`); a step without a binary panel
  verdict, or not judged, is left out and counted (n_unmatched).
* `richness_labels.csv`: model, arch, seed_id, n_units_non_repetitive, rating_event_diversity,
  rating_character_change, rating_world_expansion, weight (optional). The human R uses the same
  formula (observed steps = the trajectory's L) and is compared with the panel median R; each
  breadth rating with the median of the valid judges' ratings (rounded half up).

A consistency label without `step` (empty) labels the whole trajectory — the paper's unit (120
trajectories): compared with the panel's trajectory verdict (inconsistent at an observed first
contradiction, consistent when contradiction-free and never censored), study
`consistency_trajectory`; an optional `category` column gives Fig. 8b's one-vs-rest agreement per
inconsistency type (shared presence and shared absence both agree).

One row per (study, statistic) with a 95 % bootstrap interval (labels resampled, 1,000 seeded
draws): accuracy (design-weighted), balanced_accuracy (weighted mean of per-class recall, the human
label as truth), mae, pearson_r and bias (panel − human, weighted) of R, each single judge's MAE
next to the panel median's, and per breadth dimension the design-weighted quadratic κ and share
within one point. `labels` says where the labels came from (the shipped example is not real).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from wse_platform.metrics import wse as M
from wse_platform.wse.tables.frame import TRAJ, TableInputError
from wse_platform.wse.tables.schema import _rows

CONSISTENCY_LABEL_COLUMNS = ("model", "arch", "seed_id", "step", "label")
RICHNESS_LABEL_COLUMNS = ("model", "arch", "seed_id", "n_units_non_repetitive", "rating_event_diversity",
                          "rating_character_change", "rating_world_expansion")
RATINGS = ("rating_event_diversity", "rating_character_change", "rating_world_expansion")


# ---- statistics ------------------------------------------------------------------------------
def weighted_accuracy(truth: Sequence[str], pred: Sequence[str], weights: Sequence[float] | None = None) -> float:
    t, p = np.asarray(truth, object), np.asarray(pred, object)
    w = np.ones(len(t)) if weights is None else np.asarray(weights, float)
    return float((w * (t == p)).sum() / w.sum())


def balanced_accuracy(truth: Sequence[str], pred: Sequence[str], weights: Sequence[float] | None = None) -> float:
    """Mean over the human classes present of the (weighted) recall of that class."""
    t, p = np.asarray(truth, object), np.asarray(pred, object)
    w = np.ones(len(t)) if weights is None else np.asarray(weights, float)
    recalls = [float((w * ((t == c) & (p == c))).sum() / (w * (t == c)).sum()) for c in sorted(set(t))]
    return float(np.mean(recalls))


def mean_absolute_error(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None) -> float:
    x, y = np.asarray(a, float), np.asarray(b, float)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, float)
    return float((w * np.abs(x - y)).sum() / w.sum())


def pearson_r(a: Sequence[float], b: Sequence[float]) -> float | None:
    x, y = np.asarray(a, float), np.asarray(b, float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def quadratic_weighted_kappa(a: Sequence[int], b: Sequence[int], lo: int = M.RATING_MIN, hi: int = M.RATING_MAX,
                             weights: Sequence[float] | None = None) -> float | None:
    """Cohen's κ with quadratic disagreement weights (i − j)² / (k − 1)² on the ordinal scale lo..hi;
    `weights` are design weights of the compared items (App. B.5's weighted comparisons)."""
    x, y = np.asarray(a, int) - lo, np.asarray(b, int) - lo
    k = hi - lo + 1
    if len(x) == 0:
        return None
    obs = np.zeros((k, k))
    np.add.at(obs, (x, y), 1.0 if weights is None else np.asarray(weights, float))
    obs /= obs.sum()
    exp = np.outer(obs.sum(axis=1), obs.sum(axis=0))
    idx = np.arange(k)
    wgt = (idx[:, None] - idx[None, :]) ** 2 / (k - 1) ** 2
    den = float((wgt * exp).sum())
    return None if den == 0 else 1.0 - float((wgt * obs).sum()) / den


# ---- the table -----------------------------------------------------------------------------------
def _check(df: pl.DataFrame, name: str, cols: Sequence[str]) -> pl.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise TableInputError(f"{name}: missing column(s) {missing} (have {df.columns})")
    if "weight" not in df.columns:
        df = df.with_columns(weight=pl.lit(1.0))
    return df.with_columns(pl.col("weight").cast(pl.Float64).fill_null(1.0))


def _median_half_up(values: list[int]) -> int:
    return int(math.floor(float(np.median(values)) + 0.5))


BOOT_DRAWS, BOOT_SEED = 1000, 20_260_815   # percentile CIs of every statistic (labels resampled)


def _ci(fn, n: int, draws: int = BOOT_DRAWS, seed: int = BOOT_SEED) -> tuple[float | None, float | None]:
    """95 % percentile interval of `fn(idx)` over resamples of the n labelled items."""
    if n < 2:
        return None, None
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(draws):
        try:
            v = fn(rng.integers(0, n, n))
        except (ZeroDivisionError, ValueError, FloatingPointError):
            v = None
        if v is not None and not np.isnan(v):
            vals.append(v)
    if not vals:
        return None, None
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def _stat(base: dict[str, Any], name: str, fn, n: int) -> dict[str, Any]:
    """One statistic row: the value on all items and its bootstrap interval."""
    lo, hi = _ci(fn, n)
    return {**base, "statistic": name, "value": fn(np.arange(n)), "value_lo": lo, "value_hi": hi}


def _classification_rows(base: dict[str, Any], truth: list[str], pred: list[str], w: list[float]) -> list[dict]:
    t, p, ww = np.asarray(truth, object), np.asarray(pred, object), np.asarray(w, float)
    n = len(t)
    with np.errstate(invalid="ignore", divide="ignore"):
        return [_stat(base, "accuracy", lambda i: weighted_accuracy(t[i], p[i], ww[i]), n),
                _stat(base, "balanced_accuracy", lambda i: balanced_accuracy(t[i], p[i], ww[i]), n)]


def _trajectory_verdicts(frame: pl.DataFrame, consistency_steps: pl.DataFrame, cj: str) -> pl.DataFrame:
    """The panel's verdict per trajectory: inconsistent at an observed first contradiction (with its
    agreed category), consistent when contradiction-free and never censored, else none."""
    cols = TRAJ + ["step", "category_majority"]
    cats = (consistency_steps.filter(pl.col("judge_config_id") == cj).select([c for c in cols
                                                                             if c in consistency_steps.columns])
            if "category_majority" in consistency_steps.columns else None)
    v = frame.select(TRAJ + ["contradiction_observed", "censored_at", "first_contradiction"]).with_columns(
        panel=pl.when(pl.col("contradiction_observed")).then(pl.lit("inconsistent"))
        .when(pl.col("censored_at").is_null()).then(pl.lit("consistent")).otherwise(None))
    if cats is not None:
        v = v.join(cats.rename({"step": "first_contradiction", "category_majority": "panel_category"}),
                   on=TRAJ + ["first_contradiction"], how="left")
    else:
        v = v.with_columns(panel_category=pl.lit(None, pl.String))
    return v.select(TRAJ + ["panel", "panel_category"])


def human_validation(consistency_labels: pl.DataFrame | None, richness_labels: pl.DataFrame | None,
                     consistency_steps: pl.DataFrame, frame: pl.DataFrame, richness_verdicts: pl.DataFrame,
                     info: dict[str, Any], labels: str | None = None) -> pl.DataFrame:
    """`wse_human_validation` (see the module docstring for inputs and statistics). `labels` names
    where the labels came from (the shipped example says so in every row)."""
    rows: list[dict[str, Any]] = []
    cj, rj = info["consistency_judge_id"], info.get("richness_judge_id")
    if consistency_labels is not None and consistency_labels.height:
        lab = _check(consistency_labels, "consistency_labels.csv", CONSISTENCY_LABEL_COLUMNS[:3] + ("label",))
        if "step" not in lab.columns:
            lab = lab.with_columns(step=pl.lit(None, pl.Int64))
        bad = lab.filter(~pl.col("label").is_in(["consistent", "inconsistent"]))
        if bad.height:
            raise TableInputError(f"consistency_labels.csv: label {bad['label'][0]!r} (seed {bad['seed_id'][0]}, "
                                  "step {}) must be consistent or inconsistent".format(bad["step"][0]))
        lab = lab.with_columns(pl.col("step").cast(pl.Int64))
        steps = consistency_steps.filter(pl.col("judge_config_id") == cj).select(TRAJ + ["step", "majority"])
        at_step = lab.filter(pl.col("step").is_not_null())
        if at_step.height:    # a label per step, against the panel's valid majority at that step
            m = at_step.join(steps.with_columns(pl.col("step").cast(pl.Int64)), on=TRAJ + ["step"], how="left")
            ok = m.filter(pl.col("majority").is_not_null())
            base = {"study": "consistency", "judge_config_id": cj, "n": ok.height,
                    "n_unmatched": m.height - ok.height}
            if ok.height:
                rows += _classification_rows(base, ok["label"].to_list(), ok["majority"].to_list(),
                                             ok["weight"].to_list())
        per_traj = lab.filter(pl.col("step").is_null())
        if per_traj.height:   # the paper's unit (App. B.5: 120 trajectories): the trajectory's verdict
            m = per_traj.join(_trajectory_verdicts(frame, consistency_steps, cj), on=TRAJ, how="left")
            ok = m.filter(pl.col("panel").is_not_null())
            base = {"study": "consistency_trajectory", "judge_config_id": cj, "n": ok.height,
                    "n_unmatched": m.height - ok.height}
            if ok.height:
                rows += _classification_rows(base, ok["label"].to_list(), ok["panel"].to_list(),
                                             ok["weight"].to_list())
                if "category" in ok.columns:   # Fig. 8b: one-vs-rest agreement per inconsistency type
                    hc = np.asarray(ok["category"].to_list(), object)
                    pc = np.asarray(ok["panel_category"].to_list(), object)
                    w = np.asarray(ok["weight"].to_list(), float)
                    for c in sorted({x for x in hc if x} | {x for x in pc if x}):
                        rows.append(_stat(base, f"one_vs_rest_{c}",
                                          lambda i, c=c: float((w[i] * ((hc[i] == c) == (pc[i] == c))).sum()
                                                               / w[i].sum()), ok.height))
    if richness_labels is not None and richness_labels.height:
        lab = _check(richness_labels, "richness_labels.csv", RICHNESS_LABEL_COLUMNS)
        lab = lab.join(frame.select(TRAJ + ["length", "R"]), on=TRAJ, how="left")
        valid = richness_verdicts.filter((pl.col("judge_config_id") == rj) & pl.col("failure_json").is_null())
        med = valid.group_by(TRAJ).agg(pl.col(c).drop_nulls() for c in RATINGS)
        lab = lab.join(med, on=TRAJ, how="left", suffix="_judges")
        ok = lab.filter(pl.col("R").is_not_null() & (pl.col("length") >= 1))
        base = {"study": "richness", "judge_config_id": rj, "n": ok.height, "n_unmatched": lab.height - ok.height}
        if ok.height:
            human_r = M.richness_array(ok["n_units_non_repetitive"].to_numpy(), ok["length"].to_numpy(),
                                       ok.select(RATINGS).to_numpy())
            judge_r, w, n = np.asarray(ok["R"].to_list(), float), np.asarray(ok["weight"].to_list(), float), ok.height
            rows += [_stat(base, "mae_R", lambda i: mean_absolute_error(judge_r[i], human_r[i], w[i]), n),
                     _stat(base, "pearson_r_R", lambda i: pearson_r(judge_r[i], human_r[i]), n),
                     # judge bias: design-weighted mean of (panel median R − human R)
                     _stat(base, "bias_R", lambda i: float((w[i] * (judge_r[i] - human_r[i])).sum() / w[i].sum()), n)]
            rows += _single_judge_rows(base, ok, human_r, valid)
            for c in RATINGS:
                pairs = [(h, _median_half_up(js), wt) for h, js, wt in
                         zip(ok[c].to_list(), ok[f"{c}_judges"].to_list(), ok["weight"].to_list())
                         if js is not None and len(js)]
                if not pairs:
                    continue
                h, j, pw = (np.asarray(x, float) for x in zip(*pairs))
                dim = c.removeprefix("rating_")
                rows += [_stat({**base, "n": len(pairs)}, f"qwk_{dim}",
                               lambda i: quadratic_weighted_kappa(h[i], j[i], weights=pw[i]), len(pairs)),
                         _stat({**base, "n": len(pairs)}, f"within_one_pct_{dim}",
                               lambda i: 100.0 * float((pw[i] * (np.abs(h[i] - j[i]) <= 1)).sum() / pw[i].sum()),
                               len(pairs))]
    for r in rows:
        r["labels"] = labels
    return _rows("wse_human_validation", rows)


def _single_judge_rows(base: dict[str, Any], ok: pl.DataFrame, human_r: np.ndarray,
                       valid: pl.DataFrame) -> list[dict[str, Any]]:
    """App. B.5 single judge vs panel median: each member's own R against the human R (MAE)."""
    need = {"n_units_non_repetitive", "observed_steps", *RATINGS}
    if not need <= set(valid.columns) or valid.is_empty():
        return []
    member_col = "judge_member" if "judge_member" in valid.columns else "judge_index"
    v = valid.filter(pl.col("observed_steps") >= 1).with_columns(pl.col(member_col).cast(pl.String))
    if v.is_empty():
        return []
    v = v.with_columns(R_judge=pl.Series(M.richness_array(v["n_units_non_repetitive"].to_numpy(),
                                                          v["observed_steps"].to_numpy(),
                                                          v.select(RATINGS).to_numpy())))
    idx = ok.select(TRAJ).with_row_index("_i")
    out = []
    for member in sorted(v[member_col].unique().to_list()):
        mine = idx.join(v.filter(pl.col(member_col) == member).select(TRAJ + ["R_judge"]), on=TRAJ, how="inner")
        if mine.is_empty():
            continue
        ii = mine["_i"].to_numpy()
        jr, hr = mine["R_judge"].to_numpy(), human_r[ii]
        w = np.asarray(ok["weight"].to_list(), float)[ii]
        out.append(_stat({**base, "n": mine.height}, f"mae_R_judge_{member}",
                         lambda i: mean_absolute_error(jr[i], hr[i], w[i]), mine.height))
    return out


def read_labels(folder) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The two CSV files of a label folder (either may be absent)."""
    from pathlib import Path
    folder = Path(folder)
    out = []
    for name in ("consistency_labels.csv", "richness_labels.csv"):
        path = folder / name
        if path.exists():   # a regular file inside the folder, within the size limit (never a FIFO)
            from wse_platform.inputs import read_input_bytes
            out.append(pl.read_csv(read_input_bytes(path, what="human label file", root=folder), comment_prefix="#"))
        else:
            out.append(None)
    return out[0], out[1]
