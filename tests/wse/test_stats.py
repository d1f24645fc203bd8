"""Hierarchical bootstrap (vectorised vs loop, reproducibility, design), KM helpers, scaling fits."""
import numpy as np
import pytest
import statsmodels.api as sm

from wse_platform.metrics.wse import consistency_scores, generation_coverage
from wse_platform.stats import bootstrap as bs
from wse_platform.stats import km
from wse_platform.stats.scaling import fit_log2, fit_with_leave_one_out

# 4 worlds with 3, 2, 1, 2 seeds; families: w0,w1 -> a; w2 -> b; w3 -> c
UNITS = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"]
WORLDS = ["w0", "w0", "w0", "w1", "w1", "w2", "w3", "w3"]
FAMILIES = ["a", "a", "a", "a", "a", "b", "c", "c"]


def _panel(seed=3, n_cells=6, horizon=5):
    rng = np.random.default_rng(seed)
    shape = (len(UNITS), n_cells)
    length = rng.integers(0, horizon + 1, shape).astype(float)
    first = np.where((length > 0) & (rng.random(shape) < 0.5), np.ceil(rng.random(shape) * np.maximum(length, 1)),
                     np.nan)
    cens = np.where((length > 0) & (rng.random(shape) < 0.2), np.floor(rng.random(shape) * length), np.nan)
    rich = np.where((length > 0) & (rng.random(shape) < 0.9), rng.random(shape) * 100, np.nan)
    present = rng.random(shape) < 0.95
    length = np.where(present, length, 0.0)
    cells = tuple((f"m{j // 3}", f"a{j % 3}") for j in range(n_cells))
    return bs.TrajectoryPanel(tuple(UNITS), cells, horizon, present, length, first, cens, rich)


def _contrasts(n_cells=6):
    cm = np.zeros((n_cells, 3))
    cm[[1, 4], 0], cm[[0, 3], 0] = 0.5, -0.5     # a1 - a0, two models equal
    cm[2, 1], cm[0, 1] = 1, -1                   # one model a2 - a0
    cm[:, 2] = 1 / n_cells                       # a mean
    return cm


def test_design_groups_units_by_cluster_and_stratum():
    d = bs.ClusterDesign.from_labels(UNITS, WORLDS, FAMILIES)
    assert d.cluster_ids == ("w0", "w1", "w2", "w3")
    assert d.members(0).tolist() == [0, 1, 2]
    assert d.cluster_stratum.tolist() == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="spans strata"):
        bs.ClusterDesign.from_labels(["x", "y"], ["w", "w"], ["a", "b"])


@pytest.mark.parametrize("strata", [None, FAMILIES])
def test_vectorised_counts_equal_the_loop(strata):
    d = bs.ClusterDesign.from_labels(UNITS, WORLDS, strata)
    draws = bs.draw_uniforms(d, 300, seed=11)
    vec = bs.resample_counts(d, draws)
    loop = np.array([bs.resample_counts_loop(d, draws, b) for b in range(300)])
    np.testing.assert_array_equal(vec, loop)
    sizes = np.bincount(d.unit_cluster)
    for b in range(300):   # a drawn world contributes as many seed slots as it has seeds
        per_cluster = np.bincount(d.unit_cluster, weights=vec[b], minlength=d.n_clusters)
        assert all(v % s == 0 for v, s in zip(per_cluster, sizes))
    if strata is not None:   # strata with one world always redraw that world with all its seed slots
        assert (vec[:, 5] == 1).all()
        assert (vec[:, 6] + vec[:, 7] == 2).all()
        assert set(vec[:, :5].sum(axis=1).tolist()) == {4.0, 5.0, 6.0}  # family a: 2 slots, worlds of 3 or 2
    else:
        assert set(vec.sum(axis=1).tolist()) <= set(range(4, 13))
        assert vec.sum(axis=1).max() > sizes.sum() or vec.sum(axis=1).min() < sizes.sum()


def test_cell_metrics_with_unit_weights_equal_the_metric_functions():
    p = _panel()
    got = bs.cell_metrics_weighted(p, np.ones((1, len(UNITS))))
    for c in range(len(p.cells)):
        rows = np.flatnonzero(p.present[:, c])
        lengths = p.length[rows, c]
        firsts = [None if np.isnan(v) else v for v in p.first_contradiction[rows, c]]
        cens = [None if np.isnan(v) else v for v in p.censored_at[rows, c]]
        assert got["G"][0, c] == pytest.approx(generation_coverage(lengths, p.horizon))
        c_obs, c_adj = consistency_scores(lengths, firsts, p.horizon, cens)
        assert got["C_obs"][0, c] == pytest.approx(c_obs, nan_ok=True)
        assert got["C_adj"][0, c] == pytest.approx(c_adj)
        ok = (lengths >= 1) & ~np.isnan(p.richness[rows, c])
        r, w = p.richness[rows, c][ok], lengths[ok]
        assert got["R"][0, c] == pytest.approx((r * w).sum() / w.sum())      # step-weighted (App. B.6)


def test_weights_equal_repeating_trajectories():
    # weight 2 on a trajectory == listing it twice (the basis of the vectorised bootstrap)
    lengths, firsts, horizon = np.array([3.0, 2.0, 3.0]), np.array([np.nan, 2.0, 1.0]), 3
    y, d = km.risk_and_events(lengths, km.as_event_times(firsts), horizon, weights=np.array([[2.0, 1.0, 0.0]]))
    c_obs, c_adj = km.c_obs_c_adj(y, d)
    assert (c_obs[0], c_adj[0]) == pytest.approx(consistency_scores([3, 3, 2], [None, None, 2], horizon))


@pytest.mark.parametrize("strata", [None, FAMILIES])
def test_vectorised_bootstrap_equals_loop_reference(strata):
    p, cm = _panel(), _contrasts()
    d = bs.ClusterDesign.from_labels(UNITS, WORLDS, strata)
    vec = bs.bootstrap_contrasts(p, d, cm, n_draws=150, seed=5, chunk=40)
    loop = bs.bootstrap_contrasts_loop(p, d, cm, n_draws=150, seed=5)
    for m in bs.METRICS:
        np.testing.assert_allclose(vec.lower[m], loop.lower[m], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(vec.upper[m], loop.upper[m], rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(vec.n_valid[m], loop.n_valid[m])
        np.testing.assert_allclose(vec.estimate[m], loop.estimate[m])


def test_bootstrap_is_reproducible_and_seed_dependent():
    p, cm = _panel(), _contrasts()
    d = bs.ClusterDesign.from_labels(UNITS, WORLDS)
    a = bs.bootstrap_contrasts(p, d, cm, 200, seed=1)
    again = bs.bootstrap_contrasts(p, d, cm, 200, seed=1)
    b = bs.bootstrap_contrasts(p, d, cm, 200, seed=1, chunk=7)
    c = bs.bootstrap_contrasts(p, d, cm, 200, seed=2)
    for m in bs.METRICS:
        np.testing.assert_array_equal(a.lower[m], again.lower[m])  # same seed, same chunk: bit for bit
        np.testing.assert_array_equal(a.upper[m], again.upper[m])
        # another chunk size draws the same resamples; BLAS may block a (7 x n) product differently from a
        # (200 x n) one, so sums can differ in the last bit (seen: 7e-15 on an AMD EPYC's OpenBLAS)
        np.testing.assert_allclose(a.lower[m], b.lower[m], rtol=1e-12, atol=0)
        np.testing.assert_allclose(a.upper[m], b.upper[m], rtol=1e-12, atol=0)
    assert any(not np.allclose(a.lower[m], c.lower[m], equal_nan=True) for m in bs.METRICS)
    # the observed estimate lies in a sensible interval for the mean contrast
    assert a.lower["G"][2] <= a.estimate["G"][2] <= a.upper["G"][2]


def test_contrast_nan_only_when_a_used_cell_is_nan():
    draws = np.array([[1.0, np.nan, 3.0]])
    cm = np.array([[1.0, 1.0], [0.0, -1.0], [-1.0, 0.0]])
    out = bs.apply_contrasts(draws, cm)
    assert out[0, 0] == -2.0 and np.isnan(out[0, 1])


def test_bootstrap_rejects_misaligned_units():
    p = _panel()
    d = bs.ClusterDesign.from_labels(list(reversed(UNITS)), list(reversed(WORLDS)))
    with pytest.raises(ValueError, match="units"):
        bs.bootstrap_contrasts(p, d, _contrasts(), 10, 0)


# ---- scaling -------------------------------------------------------------------------------
def test_scaling_fit_equals_statsmodels():
    params = [0.5, 1.7, 4.0, 8.0, 32.0]
    y = [40.0, 47.0, 52.5, 55.0, 63.0]
    fit = fit_log2(params, y)
    ref = sm.OLS(np.array(y), sm.add_constant(np.log2(params))).fit()
    assert (fit.alpha, fit.beta, fit.r2, fit.n) == pytest.approx((ref.params[0], ref.params[1], ref.rsquared, 5))


def test_scaling_exact_line_and_leave_one_out():
    params = [1.0, 2.0, 4.0, 8.0]
    y = [10.0, 13.0, 16.0, 19.0]  # 10 + 3·log2(P)
    fits = fit_with_leave_one_out(["a", "b", "c", "d"], params, y)
    assert len(fits) == 5 and fits[0].dropped is None
    assert [f.dropped for f in fits[1:]] == ["a", "b", "c", "d"]
    for f in fits:
        assert (f.alpha, f.beta, f.r2) == pytest.approx((10.0, 3.0, 1.0))
    assert all(f.n == 3 for f in fits[1:])


def test_scaling_needs_three_models_and_positive_counts():
    assert fit_with_leave_one_out(["a", "b"], [1.0, 2.0], [1.0, 2.0]) == []
    with pytest.raises(ValueError, match="positive"):
        fit_log2([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])


def test_bootstrap_richness_is_step_weighted_like_the_cell_table():
    """R in every bootstrap draw (contrasts, intervals) is the paper's step-weighted cell Richness
    Σ L_i·R_i / Σ L_i (App. B.6), the same R as wse_cell_metrics.R, Pareto and the heatmaps."""
    units = ("u1", "u2", "u3")
    present = np.ones((3, 1), bool)
    length = np.array([[4.0], [1.0], [2.0]])
    rich = np.array([[80.0], [20.0], [np.nan]])          # u3 has no richness score
    nan = np.full((3, 1), np.nan)
    panel = bs.TrajectoryPanel(units, (("m", "B1"),), 4, present, length, nan, nan, rich)
    expected = (4 * 80 + 1 * 20) / 5                      # 68, not the plain mean 50
    assert bs.cell_metrics_weighted(panel, np.ones((1, 3)))["R"][0, 0] == pytest.approx(expected)
    assert bs.cell_metrics_loop(panel, np.ones(3))["R"][0] == pytest.approx(expected)
    # a draw that takes u2 twice and u1 once: (4·80 + 2·1·20) / (4 + 2)
    assert bs.cell_metrics_weighted(panel, np.array([[1.0, 2.0, 0.0]]))["R"][0, 0] == pytest.approx(360 / 6)
