"""WSE-bench metric definitions against hand-computed cases and lifelines."""
import math

import numpy as np
import pytest
from lifelines import KaplanMeierFitter

from wse_platform.metrics.wse import (
    consistency_curve,
    consistency_scores,
    generation_coverage,
    pareto,
    richness,
    richness_array,
    upper_envelope,
)


# ---- G -------------------------------------------------------------------------------
def test_generation_coverage_counts_empty_trajectories_as_zero():
    # (4 + 4 + 2 + 3 + 0) / (5 * 4) = 13/20
    assert generation_coverage([4, 4, 2, 3, 0], 4) == pytest.approx(65.0)


@pytest.mark.parametrize("lengths", [[5], [-1], [1.5], []])
def test_generation_coverage_rejects_impossible_lengths(lengths):
    with pytest.raises(ValueError):
        generation_coverage(lengths, 4)


# ---- C_obs / C_adj -------------------------------------------------------------------------
def test_consistency_ties_and_length_censoring():
    # H=4. A: L4 none; B: L4 T2; C: L2 none (censored by length at 2); D: L3 T2; E: L0.
    # Y = [4, 4, 1, 1], D = [0, 2, 0, 0] -> S = [1, .5, .5, .5]
    y, d, s = consistency_curve([4, 4, 2, 3, 0], [None, 2, None, 2, None], 4)
    assert y.tolist() == [4, 4, 1, 1]
    assert d.tolist() == [0, 2, 0, 0]
    assert s.tolist() == [1, 0.5, 0.5, 0.5]
    c_obs, c_adj = consistency_scores([4, 4, 2, 3, 0], [None, 2, None, 2, None], 4)
    assert c_obs == pytest.approx(62.5)
    assert c_adj == pytest.approx(62.5)


def test_no_support_tail_separates_c_obs_and_c_adj():
    # H=4, both trajectories stop at 2: S = [1, .5] then no one at risk.
    # C_obs carries .5 forward: 25·(1+.5+.5+.5) = 62.5; C_adj credits only supported steps: 25·1.5
    c_obs, c_adj = consistency_scores([2, 2], [None, 2], 4)
    assert c_obs == pytest.approx(62.5)
    assert c_adj == pytest.approx(37.5)


def test_no_majority_censoring_shortens_observation():
    # H=3. A: L3 T3; B: L3 none but censored at 1; C: L3 none.
    # Y = [3, 2, 2], D = [0, 0, 1] -> S3 = .5; C_obs = 100/3 · 2.5
    c_obs, c_adj = consistency_scores([3, 3, 3], [3, None, None], 3, censored_at=[None, 1, None])
    assert c_obs == pytest.approx(250 / 3)
    assert c_adj == pytest.approx(250 / 3)
    # without the censoring B stays at risk at step 3: S3 = 2/3
    assert consistency_scores([3, 3, 3], [3, None, None], 3)[0] == pytest.approx(100 / 3 * (2 + 2 / 3))


def test_contradiction_after_censoring_is_not_an_event():
    # B contradicts at 3 but was censored at 1: only A is observed at steps 2..3, no event.
    assert consistency_scores([3, 3], [None, 3], 3, censored_at=[None, 1]) == pytest.approx((100.0, 100.0))


def test_no_observed_step_leaves_c_obs_undefined():
    c_obs, c_adj = consistency_scores([0, 0], [None, None], 3)
    assert math.isnan(c_obs)
    assert c_adj == 0.0


@pytest.mark.parametrize("first", [[0], [3]])
def test_first_contradiction_must_be_a_narrated_step(first):
    with pytest.raises(ValueError, match="first_contradiction"):
        consistency_scores([2], first, 4)


def test_survival_matches_lifelines_kaplan_meier():
    rng = np.random.default_rng(7)
    horizon, n = 12, 300
    lengths = rng.integers(0, horizon + 1, n)
    firsts = [int(rng.integers(1, lengths[i] + 1)) if lengths[i] and rng.random() < 0.5 else None
              for i in range(n)]
    censored = [int(rng.integers(0, lengths[i] + 1)) if rng.random() < 0.15 else None for i in range(n)]
    _, _, s = consistency_curve(lengths, firsts, horizon, censored)

    eff = np.array([min(lengths[i], censored[i]) if censored[i] is not None else lengths[i] for i in range(n)])
    t = np.array([np.inf if f is None else f for f in firsts])
    durations = np.minimum(t, eff)
    events = t <= eff
    # the data must contain steps where events and censorings tie (lifelines keeps subjects
    # censored at k in the risk set at k, as our Y_k does)
    assert set(durations[events].tolist()) & set(durations[~events].tolist())
    kmf = KaplanMeierFitter().fit(durations, event_observed=events)
    expected = kmf.survival_function_at_times(np.arange(1, horizon + 1)).to_numpy()
    np.testing.assert_allclose(s, expected, rtol=1e-12)


# ---- R -----------------------------------------------------------------------------------
def test_richness_by_hand():
    # d = 7/2 = d95 -> Q = 1; B = (1 + .5 + 0)/3 = .5; R = 100·√.5
    assert richness(7, 2, [5, 3, 1]) == pytest.approx(100 * math.sqrt(0.5))
    # d = 1 -> Q = ln2/ln4.5; B = .5
    assert richness(1, 1, [3, 3, 3]) == pytest.approx(100 * math.sqrt(math.log(2) / math.log(4.5) * 0.5))
    assert richness(0, 3, [5, 5, 5]) == 0.0                 # no units -> Q = 0
    assert richness(40, 2, [5, 5, 5]) == pytest.approx(100)  # density clipped at 1
    assert richness(3, 1, [1, 1, 1]) == 0.0                 # lowest anchors -> B = 0


def test_richness_d95_parameter():
    # d = 1 = d95 -> Q = 1
    assert richness(2, 2, [5, 5, 5], d95=1.0) == pytest.approx(100)


@pytest.mark.parametrize("args", [(1, 0, [3, 3, 3]), (-1, 2, [3, 3, 3]), (1, 2, [3, 3]), (1, 2, [0, 3, 3]),
                                  (1, 2, [3, 3, 6])])
def test_richness_rejects_bad_inputs(args):
    with pytest.raises(ValueError):
        richness(*args)


def test_richness_array_equals_scalar():
    units, steps = np.array([0, 1, 7, 40, 5]), np.array([3, 1, 2, 2, 4])
    ratings = np.array([[5, 5, 5], [3, 3, 3], [5, 3, 1], [5, 5, 5], [2, 4, 1]])
    expected = [richness(u, s, r) for u, s, r in zip(units, steps, ratings)]
    np.testing.assert_allclose(richness_array(units, steps, ratings), expected)


# ---- Pareto --------------------------------------------------------------------------------
def test_pareto_status_support_and_gap():
    pts = [
        (0, 10),   # 0 A  supported (top-left end)
        (4, 8),    # 1 B  supported
        (6, 6),    # 2 C  on the straight edge B–D: supported (ties maximise)
        (8, 4),    # 3 D  supported
        (10, 0),   # 4 E  supported (right end)
        (5, 6.5),  # 5 F  non-dominated, below chord B–C (7 at x=5): gap .5
        (2, 7),    # 6 G  dominated by B
        (4, 8),    # 7 duplicate of B: non-dominated and supported too
        (9, 1),    # 8 I  non-dominated, below chord D–E (2 at x=9): gap 1
    ]
    res = pareto(pts)
    assert [p.non_dominated for p in res] == [True, True, True, True, True, True, False, True, True]
    assert [p.supported for p in res] == [True, True, True, True, True, False, False, True, False]
    gaps = [p.gap_below_chord for p in res]
    assert gaps[5] == pytest.approx(0.5)
    assert gaps[8] == pytest.approx(1.0)
    assert gaps[6] is None
    assert all(gaps[i] == 0.0 for i in (0, 1, 2, 3, 4, 7))
    assert upper_envelope(pts) == [(0, 10), (4, 8), (6, 6), (8, 4), (10, 0)]


def test_pareto_collinear_front_is_all_supported():
    res = pareto([(0, 3), (1, 2), (2, 1), (3, 0)])
    assert all(p.non_dominated and p.supported and p.gap_below_chord == 0 for p in res)


def test_pareto_concave_dent_is_unsupported():
    # (1, 1) lies below the chord (0,2)–(2,0) whose value at x=1 is 1... exactly on it -> supported;
    # (1, 0.5) is below it -> unsupported with gap .5
    on, below = pareto([(0, 2), (1, 1), (2, 0)]), pareto([(0, 2), (1, 0.5), (2, 0)])
    assert on[1].supported
    assert not below[1].supported and below[1].non_dominated
    assert below[1].gap_below_chord == pytest.approx(0.5)


def test_pareto_single_point_and_all_duplicates():
    assert pareto([(3, 4)])[0].supported
    res = pareto([(3, 4), (3, 4)])
    assert all(p.non_dominated and p.supported for p in res)


def test_pareto_point_dominated_by_an_equal_coordinate():
    res = pareto([(1, 5), (2, 5)])
    assert [p.non_dominated for p in res] == [False, True]


def test_pareto_rejects_non_finite():
    with pytest.raises(ValueError, match="point 1"):
        pareto([(1, 2), (float("nan"), 1)])
