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

One row per (study, statistic): accuracy (design-weighted), balanced_accuracy (weighted mean
of per-class recall, the human label as truth), mae and pearson_r of R, and per breadth
dimension the quadratic-weighted κ and the share within one point.
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


def quadratic_weighted_kappa(a: Sequence[int], b: Sequence[int], lo: int = M.RATING_MIN, hi: int = M.RATING_MAX
                             ) -> float | None:
    """Cohen's κ with quadratic disagreement weights (i − j)² / (k − 1)² on the ordinal scale lo..hi."""
    x, y = np.asarray(a, int) - lo, np.asarray(b, int) - lo
    k = hi - lo + 1
    if len(x) == 0:
        return None
    obs = np.zeros((k, k))
    np.add.at(obs, (x, y), 1.0)
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


def human_validation(consistency_labels: pl.DataFrame | None, richness_labels: pl.DataFrame | None,
                     consistency_steps: pl.DataFrame, frame: pl.DataFrame, richness_verdicts: pl.DataFrame,
                     info: dict[str, Any]) -> pl.DataFrame:
    """`wse_human_validation` (see the module docstring for inputs and statistics)."""
    rows: list[dict[str, Any]] = []
    cj, rj = info["consistency_judge_id"], info.get("richness_judge_id")
    if consistency_labels is not None and consistency_labels.height:
        lab = _check(consistency_labels, "consistency_labels.csv", CONSISTENCY_LABEL_COLUMNS)
        bad = lab.filter(~pl.col("label").is_in(["consistent", "inconsistent"]))
        if bad.height:
            raise TableInputError(f"consistency_labels.csv: label {bad['label'][0]!r} (seed {bad['seed_id'][0]}, "
                                  "step {}) must be consistent or inconsistent".format(bad["step"][0]))
        steps = consistency_steps.filter(pl.col("judge_config_id") == cj).select(TRAJ + ["step", "majority"])
        m = lab.with_columns(pl.col("step").cast(pl.Int64)).join(
            steps.with_columns(pl.col("step").cast(pl.Int64)), on=TRAJ + ["step"], how="left")
        ok = m.filter(pl.col("majority").is_not_null())
        base = {"study": "consistency", "judge_config_id": cj, "n": ok.height, "n_unmatched": m.height - ok.height}
        if ok.height:
            t, p, w = ok["label"].to_list(), ok["majority"].to_list(), ok["weight"].to_list()
            rows += [{**base, "statistic": "accuracy", "value": weighted_accuracy(t, p, w)},
                     {**base, "statistic": "balanced_accuracy", "value": balanced_accuracy(t, p, w)}]
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
            w = ok["weight"].to_list()
            rows += [{**base, "statistic": "mae_R", "value": mean_absolute_error(ok["R"].to_list(), human_r, w)},
                     {**base, "statistic": "pearson_r_R", "value": pearson_r(ok["R"].to_list(), human_r)}]
            for c in RATINGS:
                pairs = [(h, _median_half_up(js)) for h, js in zip(ok[c].to_list(), ok[f"{c}_judges"].to_list())
                         if js is not None and len(js)]
                if not pairs:
                    continue
                h, j = zip(*pairs)
                rows += [{**base, "n": len(pairs), "statistic": f"qwk_{c.removeprefix('rating_')}",
                          "value": quadratic_weighted_kappa(h, j)},
                         {**base, "n": len(pairs), "statistic": f"within_one_pct_{c.removeprefix('rating_')}",
                          "value": 100.0 * float(np.mean(np.abs(np.array(h) - np.array(j)) <= 1))}]
    return _rows("wse_human_validation", rows)


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
