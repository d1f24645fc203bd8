"""WSE-bench metrics: Generation coverage G, Consistency C_obs / C_adj, Richness R, Pareto status.

These are the exact definitions of the benchmark; the final tables and the bootstrap
(`wse_platform.stats`) reuse the same helpers so every number has one definition.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wse_platform.stats import km

RATING_MIN, RATING_MAX = 1, 5
D95_DEFAULT = 3.5  # units per observed step that already counts as (near-)full density


# ---- G ------------------------------------------------------------------------------
def _check_lengths(lengths: Sequence[int] | np.ndarray, horizon: int, name: str = "lengths") -> np.ndarray:
    if horizon < 1:
        raise ValueError(f"horizon must be ≥ 1, got {horizon}")
    arr = np.asarray(lengths, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: need a non-empty 1-D sequence of trajectory lengths")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0) | (arr > horizon) | (arr != np.round(arr)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}] = {arr[i]!r}: must be an integer in 0..{horizon}")
    return arr


def generation_coverage(lengths: Sequence[int] | np.ndarray, horizon: int) -> float:
    """G = 100/(nH) · Σ L_i; a trajectory without any valid narrative contributes L_i = 0."""
    arr = _check_lengths(lengths, horizon)
    return float(100.0 * arr.sum() / (arr.size * horizon))


# ---- C_obs / C_adj --------------------------------------------------------------------
def effective_lengths(lengths: Sequence[int] | np.ndarray, censored_at: Sequence[int | None] | None,
                      horizon: int) -> np.ndarray:
    """Steps observed for consistency: L_i, or the no-valid-majority censoring step if earlier."""
    arr = _check_lengths(lengths, horizon)
    if censored_at is None:
        return arr
    cens = np.array(censored_at, dtype=float)  # None -> nan
    if cens.shape != arr.shape:
        raise ValueError(f"censored_at has {cens.size} entries for {arr.size} trajectories")
    bad = np.flatnonzero(~np.isnan(cens) & ((cens < 0) | (cens > arr) | (cens != np.round(cens))))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"censored_at[{i}] = {cens[i]!r}: must be an integer in 0..length ({arr[i]:.0f})")
    return np.where(np.isnan(cens), arr, np.minimum(arr, cens))


def _check_first_contradiction(first_contradiction, lengths: np.ndarray) -> np.ndarray:
    t = km.as_event_times(first_contradiction)
    if t.shape != lengths.shape:
        raise ValueError(f"first_contradiction has {t.size} entries for {lengths.size} trajectories")
    finite = np.isfinite(t)
    bad = np.flatnonzero(finite & ((t < 1) | (t > lengths) | (t != np.round(t))))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"first_contradiction[{i}] = {t[i]!r}: must be None or an integer step in "
                         f"1..length ({lengths[i]:.0f})")
    return t


def consistency_curve(lengths, first_contradiction, horizon: int, censored_at=None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y_k, D_k, S(k)) for k = 1..H — the Kaplan–Meier pieces behind C_obs and C_adj."""
    raw = _check_lengths(lengths, horizon)
    t = _check_first_contradiction(first_contradiction, raw)
    eff = effective_lengths(raw, censored_at, horizon)
    y, d = km.risk_and_events(eff, t, horizon)
    return y, d, km.survival(y, d)


def consistency_scores(lengths: Sequence[int] | np.ndarray,
                       first_contradiction: Sequence[int | None] | np.ndarray,
                       horizon: int,
                       censored_at: Sequence[int | None] | None = None) -> tuple[float, float]:
    """(C_obs, C_adj) in percent.

    Y_k = #{L_i ≥ k, T_i ≥ k}, D_k = #{L_i ≥ k, T_i = k} (T_i = ∞ without a contradiction),
    S(t) = Π_{k ≤ t, Y_k > 0} (1 − D_k/Y_k); C_obs = 100/H Σ_t S(t) (last estimable value
    carried forward), C_adj = 100/H Σ_t 1[Y_t > 0] S(t). `censored_at[i]` (judging found no
    valid majority) shortens trajectory i's observed length to that step. If no trajectory
    has an observed step, C_obs is NaN (nothing is estimable) and C_adj is 0.
    """
    y, d, _ = consistency_curve(lengths, first_contradiction, horizon, censored_at)
    c_obs, c_adj = km.c_obs_c_adj(y, d)
    return float(c_obs), float(c_adj)


# ---- R --------------------------------------------------------------------------------
def richness(non_repetitive_units: int, observed_steps: int, ratings: Sequence[int], d95: float = D95_DEFAULT
             ) -> float:
    """One judge's R = 100·√(Q·B).

    Q = clip(log(1+d)/log(1+d95), 0, 1) with d = non-repetitive units per observed step
    (density saturates at d95); B = (1/3) Σ_j (s_j − 1)/4 over the three anchored 1–5
    ratings (event diversity, character/relationship change, world/social expansion).
    """
    if observed_steps is None or observed_steps < 1:
        raise ValueError(f"observed_steps = {observed_steps!r}: richness needs at least one observed step")
    if non_repetitive_units is None or non_repetitive_units < 0:
        raise ValueError(f"non_repetitive_units = {non_repetitive_units!r}: must be ≥ 0")
    if d95 <= 0:
        raise ValueError(f"d95 = {d95!r}: must be > 0")
    ratings = list(ratings)
    if len(ratings) != 3:
        raise ValueError(f"ratings: need exactly 3 ratings, got {len(ratings)}")
    for j, s in enumerate(ratings):
        if s is None or not (RATING_MIN <= s <= RATING_MAX):
            raise ValueError(f"ratings[{j}] = {s!r}: must be in {RATING_MIN}..{RATING_MAX}")
    d = non_repetitive_units / observed_steps
    q = min(max(math.log1p(d) / math.log1p(d95), 0.0), 1.0)
    b = sum((s - 1) / 4 for s in ratings) / 3
    return 100.0 * math.sqrt(q * b)


def richness_array(non_repetitive_units: np.ndarray, observed_steps: np.ndarray, ratings: np.ndarray,
                   d95: float = D95_DEFAULT) -> np.ndarray:
    """Vectorised `richness` (ratings shape (n, 3)); inputs must already be validated."""
    d = np.asarray(non_repetitive_units, float) / np.asarray(observed_steps, float)
    q = np.clip(np.log1p(d) / np.log1p(d95), 0.0, 1.0)
    b = ((np.asarray(ratings, float) - 1.0) / 4.0).sum(axis=1) / 3.0
    return 100.0 * np.sqrt(q * b)


# ---- Pareto ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ParetoPoint:
    index: int
    consistency: float
    richness: float
    non_dominated: bool
    supported: bool
    gap_below_chord: float | None  # None for dominated points, 0 for supported ones


_EPS = 1e-9


def _supporting_weight_exists(p: np.ndarray, pts: np.ndarray) -> bool:
    """Is there λ ∈ (0,1) with λ·x_p + (1−λ)·y_p ≥ λ·x_q + (1−λ)·y_q for every q?

    Each q gives one linear constraint b + λ(a − b) ≥ 0 with a = x_p − x_q, b = y_p − y_q;
    their intersection is an interval [lo, hi] that must meet the open interval (0, 1).
    Ties count as maximising, so points in the middle of a straight envelope edge and
    duplicates of supported points are supported.
    """
    lo, hi = 0.0, 1.0
    for a, b in zip(p[0] - pts[:, 0], p[1] - pts[:, 1]):
        slope = a - b
        if abs(slope) <= _EPS:
            if b < -_EPS:
                return False
            continue
        bound = -b / slope
        if slope > 0:
            lo = max(lo, bound)
        else:
            hi = min(hi, bound)
    return lo <= hi + _EPS and lo < 1.0 - _EPS and hi > _EPS


def pareto(points: Sequence[tuple[float, float]]) -> list[ParetoPoint]:
    """Pareto status of (consistency, richness) points (both to be maximised).

    * non-dominated: no other point is ≥ in both coordinates and > in one (exact
      duplicates do not dominate each other);
    * supported: maximises some strictly positive weighting of the two axes, i.e. lies on
      the upper concave envelope of the non-dominated set;
    * gap_below_chord (unsupported non-dominated points): richness of the chord between
      the neighbouring supported points (by consistency) minus the point's richness.
    """
    pts = np.asarray(points, dtype=float).reshape(-1, 2) if len(points) else np.zeros((0, 2))
    bad = np.flatnonzero(~np.isfinite(pts).all(axis=1))
    if bad.size:
        raise ValueError(f"pareto: point {int(bad[0])} = {tuple(pts[bad[0]])} is not finite")
    n = len(pts)
    ge = (pts[None, :, 0] >= pts[:, None, 0]) & (pts[None, :, 1] >= pts[:, None, 1])
    gt = (pts[None, :, 0] > pts[:, None, 0]) | (pts[None, :, 1] > pts[:, None, 1])
    non_dominated = ~(ge & gt).any(axis=1)
    nd_pts = pts[non_dominated]
    supported = np.array([non_dominated[i] and _supporting_weight_exists(pts[i], nd_pts) for i in range(n)],
                         dtype=bool)
    sup_pts = pts[supported]
    order = np.argsort(sup_pts[:, 0], kind="stable")
    sup_x, sup_y = sup_pts[order, 0], sup_pts[order, 1]
    out = []
    for i in range(n):
        gap: float | None = None
        if supported[i]:
            gap = 0.0
        elif non_dominated[i]:
            x, y = pts[i]
            left = np.flatnonzero(sup_x < x)
            right = np.flatnonzero(sup_x > x)
            if left.size and right.size:  # always true for an unsupported non-dominated point
                (x0, y0), (x1, y1) = (sup_x[left[-1]], sup_y[left[-1]]), (sup_x[right[0]], sup_y[right[0]])
                chord = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
                gap = float(chord - y)
        out.append(ParetoPoint(i, float(pts[i, 0]), float(pts[i, 1]), bool(non_dominated[i]),
                               bool(supported[i]), gap))
    return out


def upper_envelope(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Supported points sorted by consistency: the vertices of the plotted concave envelope."""
    sup = sorted({(p.consistency, p.richness) for p in pareto(points) if p.supported})
    return sup
