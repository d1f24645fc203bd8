"""Hierarchical (cluster → unit) bootstrap for WSE-bench cell metrics and their contrasts.

Why hierarchical: EpisodeSeeds from the same world share characters and source text,
so they are not independent. A draw resamples worlds (clusters) with replacement —
optionally within strata such as source families — and then EpisodeSeeds (units) with
replacement inside each drawn world. Models and architectures are fixed: every cell
of a draw sees the same resampled seeds, which pairs the architectures within seeds.

A draw is fully described by its resampling *counts* per seed, so every cell metric
becomes a weighted statistic: G and R are weighted means, and the Kaplan–Meier
consistency scores use weighted Y_k / D_k. The production path turns thousands of
draws into one count matrix W (draws × seeds) and evaluates all cells with matrix
products (`bootstrap_contrasts`). `bootstrap_contrasts_loop` is the plain per-draw
reference: it expands each draw into a list of trajectories and calls the public
metric functions; both consume the same pre-drawn uniforms, so they must agree.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from wse_platform.metrics import wse as wse_metrics
from wse_platform.stats import km

METRICS: tuple[str, ...] = ("G", "C_obs", "C_adj", "R")


# ---- resampling design --------------------------------------------------------------
@dataclass(frozen=True)
class ClusterDesign:
    """Units (seeds) → clusters (worlds) → strata (e.g. source families; one stratum = none)."""
    unit_ids: tuple[str, ...]
    cluster_ids: tuple[str, ...]
    unit_cluster: np.ndarray      # (n_units,) cluster index of each unit
    cluster_stratum: np.ndarray   # (n_clusters,) stratum index of each cluster

    @classmethod
    def from_labels(cls, unit_ids: Sequence[str], cluster_of_unit: Sequence[str],
                    stratum_of_unit: Sequence[str] | None = None) -> "ClusterDesign":
        if len(unit_ids) != len(cluster_of_unit) or len(set(unit_ids)) != len(unit_ids):
            raise ValueError("ClusterDesign: unit ids must be unique and have one cluster each")
        cluster_ids = tuple(sorted(set(cluster_of_unit)))
        cidx = {c: i for i, c in enumerate(cluster_ids)}
        stratum_of_cluster: dict[str, str] = {}
        for u, c, s in zip(unit_ids, cluster_of_unit, stratum_of_unit or ["all"] * len(unit_ids)):
            if stratum_of_cluster.setdefault(c, s) != s:
                raise ValueError(f"ClusterDesign: cluster {c!r} spans strata {stratum_of_cluster[c]!r} and {s!r} "
                                 f"(unit {u!r})")
        strata = sorted(set(stratum_of_cluster.values()))
        return cls(tuple(unit_ids), cluster_ids,
                   np.array([cidx[c] for c in cluster_of_unit], dtype=np.int64),
                   np.array([strata.index(stratum_of_cluster[c]) for c in cluster_ids], dtype=np.int64))

    @property
    def n_units(self) -> int:
        return len(self.unit_ids)

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_ids)

    def members(self, cluster: int) -> np.ndarray:
        return np.flatnonzero(self.unit_cluster == cluster)

    def stratum_clusters(self, stratum: int) -> np.ndarray:
        return np.flatnonzero(self.cluster_stratum == stratum)

    @property
    def max_cluster_size(self) -> int:
        return int(np.bincount(self.unit_cluster, minlength=self.n_clusters).max())


@dataclass(frozen=True)
class ResampleDraws:
    """Pre-drawn uniforms: one per cluster slot and one per (slot, unit position)."""
    u_cluster: np.ndarray  # (B, n_clusters)
    u_unit: np.ndarray     # (B, n_clusters, max_cluster_size)

    @property
    def n_draws(self) -> int:
        return self.u_cluster.shape[0]


def draw_uniforms(design: ClusterDesign, n_draws: int, seed: int) -> ResampleDraws:
    if n_draws < 1:
        raise ValueError(f"n_draws must be ≥ 1, got {n_draws}")
    rng = np.random.default_rng(seed)
    u_cluster = rng.random((n_draws, design.n_clusters))
    u_unit = rng.random((n_draws, design.n_clusters, design.max_cluster_size))
    return ResampleDraws(u_cluster, u_unit)


def resample_counts(design: ClusterDesign, draws: ResampleDraws, start: int = 0, stop: int | None = None
                    ) -> np.ndarray:
    """Counts per unit for draws[start:stop], shape (b, n_units) — vectorised, no per-draw loop.

    Slot j (one per original cluster) draws a cluster uniformly from its own stratum;
    then each of that cluster's n_c unit positions draws one of its n_c units.
    """
    stop = draws.n_draws if stop is None else stop
    u_c, u_u = draws.u_cluster[start:stop], draws.u_unit[start:stop]
    b, n_c = u_c.shape
    # clusters listed stratum by stratum, with each slot's stratum offset and size
    by_stratum = np.argsort(design.cluster_stratum, kind="stable")
    stratum_sizes = np.bincount(design.cluster_stratum)
    stratum_start = np.concatenate([[0], np.cumsum(stratum_sizes)[:-1]])
    slot_size = stratum_sizes[design.cluster_stratum]
    slot_start = stratum_start[design.cluster_stratum]
    chosen = by_stratum[slot_start + _pick(u_c, slot_size)]                                 # (b, n_c)
    # units listed cluster by cluster
    unit_order = np.argsort(design.unit_cluster, kind="stable")
    cluster_sizes = np.bincount(design.unit_cluster, minlength=n_c)
    cluster_start = np.concatenate([[0], np.cumsum(cluster_sizes)[:-1]])
    size = cluster_sizes[chosen][..., None]                                                 # (b, n_c, 1)
    valid = np.arange(u_u.shape[2])[None, None, :] < size
    unit = unit_order[cluster_start[chosen][..., None] + _pick(u_u, size)]
    flat = (np.arange(b)[:, None, None] * design.n_units + unit)[valid]
    return np.bincount(flat, minlength=b * design.n_units).reshape(b, design.n_units).astype(float)


def resample_counts_loop(design: ClusterDesign, draws: ResampleDraws, draw: int) -> np.ndarray:
    """Reference: the counts of one draw, written as the plain nested loop."""
    counts = np.zeros(design.n_units)
    for slot in range(design.n_clusters):
        candidates = design.stratum_clusters(design.cluster_stratum[slot])
        cluster = candidates[min(int(draws.u_cluster[draw, slot] * len(candidates)), len(candidates) - 1)]
        members = design.members(cluster)
        for k in range(len(members)):
            counts[members[min(int(draws.u_unit[draw, slot, k] * len(members)), len(members) - 1)]] += 1
    return counts


def _pick(u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Uniform index in 0..n-1 from u ∈ [0, 1) (clamped against float rounding at u ≈ 1)."""
    return np.minimum(np.floor(u * n).astype(np.int64), n - 1)


# ---- per-cell trajectory data -----------------------------------------------------------
@dataclass(frozen=True)
class TrajectoryPanel:
    """Trajectory values as (unit × cell) matrices; a cell is e.g. (model, arch).

    `present` marks which (seed, cell) trajectories exist. `first_contradiction` is NaN
    when none, `censored_at` NaN when not censored, `richness` NaN when the trajectory has
    no valid richness score (e.g. L = 0 or every judge failed).
    """
    unit_ids: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    horizon: int
    present: np.ndarray
    length: np.ndarray
    first_contradiction: np.ndarray
    censored_at: np.ndarray
    richness: np.ndarray

    @property
    def effective_length(self) -> np.ndarray:
        return np.where(np.isnan(self.censored_at), self.length, np.minimum(self.length, self.censored_at))

    def subset(self, units: np.ndarray) -> "TrajectoryPanel":
        """The panel restricted to the unit rows `units` (indices), e.g. one source family's seeds."""
        return TrajectoryPanel(tuple(self.unit_ids[i] for i in units), self.cells, self.horizon,
                               self.present[units], self.length[units], self.first_contradiction[units],
                               self.censored_at[units], self.richness[units])


@dataclass(frozen=True)
class _PanelArrays:
    """Weight-independent matrices of a panel, computed once and reused for every chunk of draws."""
    present: np.ndarray        # (units, cells) float
    length: np.ndarray         # (units, cells) length where present, else 0
    r_value: np.ndarray        # L_i · richness where it counts, else 0 (R is step-weighted, App. B.6)
    r_ok: np.ndarray           # L_i where richness counts, else 0
    at_risk: np.ndarray        # (units, cells·H) float
    event: np.ndarray
    shape: tuple[int, int]     # (cells, H)


def prepare(panel: TrajectoryPanel) -> _PanelArrays:
    present = panel.present.astype(float)
    r_ok = panel.present & (panel.length >= 1) & ~np.isnan(panel.richness)
    eff = np.where(panel.present, panel.effective_length, 0.0)
    at_risk, event = km.risk_and_event_indicators(eff, km.as_event_times(panel.first_contradiction), panel.horizon)
    n_units = len(panel.unit_ids)
    r_len = np.where(r_ok, panel.length, 0.0)   # R of a cell = Σ L_i·R_i / Σ L_i (step-weighted)
    return _PanelArrays(present, np.where(panel.present, panel.length, 0.0),
                        np.where(r_ok, panel.richness * panel.length, 0.0), r_len,
                        at_risk.reshape(n_units, -1).astype(float),
                        event.reshape(n_units, -1).astype(float), (len(panel.cells), panel.horizon))


def cell_metrics_weighted(panel: TrajectoryPanel, weights: np.ndarray,
                          arrays: _PanelArrays | None = None) -> dict[str, np.ndarray]:
    """G, C_obs, C_adj, R of every cell for each weight row: arrays of shape (b, n_cells)."""
    a = arrays or prepare(panel)
    w = np.atleast_2d(np.asarray(weights, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        g = 100.0 * (w @ a.length) / (panel.horizon * (w @ a.present))
        r = (w @ a.r_value) / (w @ a.r_ok)
    y = (w @ a.at_risk).reshape(-1, *a.shape)
    d = (w @ a.event).reshape(-1, *a.shape)
    c_obs, c_adj = km.c_obs_c_adj(y, d)
    return {"G": g, "C_obs": c_obs, "C_adj": c_adj, "R": r}


def cell_metrics_loop(panel: TrajectoryPanel, counts: np.ndarray) -> dict[str, np.ndarray]:
    """Reference for one draw: expand the counts into trajectories, call the metric functions."""
    out = {m: np.full(len(panel.cells), np.nan) for m in METRICS}
    for c in range(len(panel.cells)):
        rows = [u for u in range(len(panel.unit_ids)) if panel.present[u, c] for _ in range(int(counts[u]))]
        if not rows:
            continue
        lengths = [panel.length[u, c] for u in rows]
        firsts = [None if np.isnan(panel.first_contradiction[u, c]) else panel.first_contradiction[u, c]
                  for u in rows]
        cens = [None if np.isnan(panel.censored_at[u, c]) else panel.censored_at[u, c] for u in rows]
        out["G"][c] = wse_metrics.generation_coverage(lengths, panel.horizon)
        out["C_obs"][c], out["C_adj"][c] = wse_metrics.consistency_scores(lengths, firsts, panel.horizon, cens)
        rated = [u for u in rows if panel.length[u, c] >= 1 and not np.isnan(panel.richness[u, c])]
        if rated:   # step-weighted: Σ L_i·R_i / Σ L_i
            out["R"][c] = (sum(panel.length[u, c] * panel.richness[u, c] for u in rated)
                           / sum(panel.length[u, c] for u in rated))
    return out


# ---- contrasts and intervals ---------------------------------------------------------------
def apply_contrasts(metric_draws: np.ndarray, contrast_matrix: np.ndarray) -> np.ndarray:
    """(b, n_cells) @ (n_cells, k); a contrast is NaN when a cell it uses is NaN (others may be)."""
    nan = np.isnan(metric_draws)
    if not nan.any():
        return metric_draws @ contrast_matrix
    values = np.where(nan, 0.0, metric_draws) @ contrast_matrix
    touched = nan.astype(float) @ (contrast_matrix != 0).astype(float)
    return np.where(touched > 0, np.nan, values)


@dataclass(frozen=True)
class BootstrapResult:
    estimate: dict[str, np.ndarray]   # metric -> (k,) point estimates on the observed data
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    n_valid: dict[str, np.ndarray]    # draws where the contrast was defined
    n_draws: int
    seed: int


def _percentile_interval(draws: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    alpha = (1.0 - level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns -> NaN bounds
        lo, hi = np.nanpercentile(draws, [100 * alpha, 100 * (1 - alpha)], axis=0)
    return lo, hi, (~np.isnan(draws)).sum(axis=0)


def point_estimates(panel: TrajectoryPanel, contrast_matrix: np.ndarray) -> dict[str, np.ndarray]:
    observed = cell_metrics_weighted(panel, np.ones((1, len(panel.unit_ids))))
    return {m: apply_contrasts(observed[m], contrast_matrix)[0] for m in METRICS}


def bootstrap_contrasts(panel: TrajectoryPanel, design: ClusterDesign, contrast_matrix: np.ndarray,
                        n_draws: int, seed: int, level: float = 0.95, chunk: int = 1000) -> BootstrapResult:
    """Percentile intervals of linear contrasts of cell metrics; vectorised over draws (in chunks)."""
    _check_alignment(panel, design, contrast_matrix)
    arrays = prepare(panel)

    def statistic(w: np.ndarray) -> dict[str, np.ndarray]:
        cm = cell_metrics_weighted(panel, w, arrays)
        return {m: apply_contrasts(cm[m], contrast_matrix) for m in METRICS}

    draws = bootstrap_draws(design, n_draws, seed, statistic, chunk)
    return _result(panel, contrast_matrix, draws, level, n_draws, seed)


def bootstrap_draws(design: ClusterDesign, n_draws: int, seed: int,
                    statistic: Callable[[np.ndarray], dict[str, np.ndarray]], chunk: int = 1000
                    ) -> dict[str, np.ndarray]:
    """Evaluate `statistic(counts)` — counts (b, n_units) → {name: (b, k)} — on every draw, in chunks."""
    draws = draw_uniforms(design, n_draws, seed)
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, n_draws, chunk):
        for name, values in statistic(resample_counts(design, draws, start, min(start + chunk, n_draws))).items():
            parts.setdefault(name, []).append(values)
    return {name: np.vstack(v) for name, v in parts.items()}


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, n_valid) per column; NaN draws (undefined statistic) are left out."""
    return _percentile_interval(draws, level)


def bootstrap_contrasts_loop(panel: TrajectoryPanel, design: ClusterDesign, contrast_matrix: np.ndarray,
                             n_draws: int, seed: int, level: float = 0.95) -> BootstrapResult:
    """Reference implementation: one Python iteration per draw (used by tests and the bench)."""
    _check_alignment(panel, design, contrast_matrix)
    draws = draw_uniforms(design, n_draws, seed)
    k = contrast_matrix.shape[1]
    per_metric = {m: np.full((n_draws, k), np.nan) for m in METRICS}
    for b in range(n_draws):
        counts = resample_counts_loop(design, draws, b)
        cm = cell_metrics_loop(panel, counts)
        for m in METRICS:
            for j in range(k):
                used = np.flatnonzero(contrast_matrix[:, j])
                if not np.isnan(cm[m][used]).any():
                    per_metric[m][b, j] = float(np.dot(cm[m][used], contrast_matrix[used, j]))
    return _result(panel, contrast_matrix, per_metric, level, n_draws, seed)


def _result(panel, contrast_matrix, per_metric, level, n_draws, seed) -> BootstrapResult:
    est = point_estimates(panel, contrast_matrix)
    lo, hi, nv = {}, {}, {}
    for m in METRICS:
        lo[m], hi[m], nv[m] = _percentile_interval(per_metric[m], level)
    return BootstrapResult(est, lo, hi, nv, n_draws, seed)


def _check_alignment(panel: TrajectoryPanel, design: ClusterDesign, contrast_matrix: np.ndarray) -> None:
    if tuple(panel.unit_ids) != tuple(design.unit_ids):
        raise ValueError("bootstrap: the panel's units and the design's units differ or are in another order")
    if contrast_matrix.ndim != 2 or contrast_matrix.shape[0] != len(panel.cells):
        raise ValueError(f"bootstrap: contrast matrix must be (n_cells={len(panel.cells)}, k), "
                         f"got {contrast_matrix.shape}")
