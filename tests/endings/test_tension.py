"""no-rate, story_tension and group_summary on hand-computed curves."""
import math

import pytest

from wse_platform.metrics.endings import (
    group_summary,
    no_rate,
    smooth,
    story_tension,
    vertex_angle,
)

# ---- no_rate -----------------------------------------------------------------------------

def test_no_rate_is_one_minus_yes_share():
    assert no_rate(["Y", "N", "N", "Y"]) == pytest.approx(0.5)
    assert no_rate(["Y", "Y", "Y", "N"]) == pytest.approx(0.25)
    assert no_rate(["N", "N"]) == 1.0
    assert no_rate(["Y"]) == 0.0


def test_no_rate_refuses_empty_and_unparsed_verdicts():
    with pytest.raises(ValueError, match="no verdicts"):
        no_rate([])
    with pytest.raises(ValueError, match="'Y' or 'N'"):
        no_rate(["Y", "y"])
    with pytest.raises(ValueError, match="'Y' or 'N'"):
        no_rate(["Y", None])


# ---- smoothing and angles ----------------------------------------------------------------

def test_moving_average_shrinks_symmetrically_at_edges():
    # window 5: ends keep their value, second points average 3, interior averages 5
    assert smooth([0, 3, 6, 0, 3, 9]) == pytest.approx([0, 3, 12 / 5, 21 / 5, 4, 9])
    assert smooth([1.0, 2.0], window=5) == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError):
        smooth([1.0], window=4)


def test_vertex_angle():
    assert vertex_angle((0, 1), (0, 0), (1, 0)) == pytest.approx(90.0)
    assert vertex_angle((-1, 0), (0, 0), (1, 0)) == pytest.approx(180.0)
    # (−0.5, −1) and (0.5, −1): cos = 0.75 / 1.25
    assert vertex_angle((0, 0), (0.5, 1), (1, 0)) == pytest.approx(math.degrees(math.acos(0.6)))


# ---- story_tension -----------------------------------------------------------------------

def test_single_peak_retention_convergence_and_mean():
    t = story_tension([0.1, 0.2, 0.3, 0.4, 0.5], [0.2, 0.4, 0.8, 0.4, 0.2])
    assert t.mean_no_rate == pytest.approx(0.4)
    assert t.late_no_rate is None            # no position at >= 80 %
    assert t.peak_positions == [2]
    assert t.retention == pytest.approx(0.2 / 0.8)
    assert t.convergence == pytest.approx(-75.0)  # negative: tension drops


def test_two_peaks_average_their_retention():
    t = story_tension([0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.2, 0.6, 0.3, 0.5, 0.1, 0.4])
    assert t.peak_positions == [1, 3]         # the last position has one neighbour: not a peak
    assert t.retention == pytest.approx((0.1 / 0.6 + 0.1 / 0.5) / 2)
    assert t.convergence == pytest.approx(-(100 * 0.5 / 0.6 + 100 * 0.4 / 0.5) / 2)
    assert t.late_no_rate == pytest.approx(0.4)   # share 0.8 is late (inclusive)


def test_retention_looks_only_at_next_ten_positions():
    nr = [0.0, 0.5] + [0.4] * 10 + [0.0]
    pcts = [0.1 + 0.05 * i for i in range(len(nr))]
    t = story_tension(pcts, nr)
    assert t.peak_positions == [1]            # the 0.4 run is a plateau, not a peak
    assert t.retention == pytest.approx(0.8)  # the 0.0 at index 12 is 11 positions later
    assert t.convergence == pytest.approx(-20.0)


def test_plateau_is_not_a_peak():
    t = story_tension([0.2, 0.4, 0.6, 0.8], [0.1, 0.5, 0.5, 0.1], smooth_window=1)
    assert t.n_peaks == 0
    assert t.retention is None and t.convergence is None
    assert t.extrema == []                    # the smoothed curve has the plateau too
    assert (t.ir30, t.ir60, t.ir120) == (0, 0, 0)


def test_flat_curve_has_no_extrema_and_zero_rates():
    t = story_tension([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.5] * 6)
    assert t.mean_no_rate == pytest.approx(0.5)
    assert t.extrema == [] and t.n_peaks == 0
    assert (t.ir30, t.ir60, t.ir120) == (0.0, 0.0, 0.0)
    assert t.retention is None


def test_right_angle_valley_and_peak_angles_without_smoothing():
    # x rescales to 0, .25, .5, .75, 1 and y (already in [0, 1]) to itself.
    t = story_tension([0.1, 0.3, 0.5, 0.7, 0.9], [1.0, 0.5, 0.25, 0.5, 0.0], smooth_window=1)
    kinds = {e.position: (e.kind, e.angle) for e in t.extrema}
    assert kinds.keys() == {2, 3}
    assert kinds[2][0] == "valley" and kinds[2][1] == pytest.approx(90.0)
    # peak at (.75, .5): vectors (−.25, −.25) and (.25, −.5) → cos = 1/√10
    assert kinds[3][0] == "peak" and kinds[3][1] == pytest.approx(math.degrees(math.acos(1 / math.sqrt(10))))
    assert t.ir30 == 0 and t.ir60 == 0
    assert t.ir120 == pytest.approx(2 / 5)    # both extrema ≤ 120°, divided by 5 kept positions


def test_rescaling_makes_angles_scale_invariant():
    base = story_tension([0.1, 0.3, 0.5, 0.7, 0.9], [1.0, 0.5, 0.25, 0.5, 0.0], smooth_window=1)
    # same shape, shares squeezed into [0.2, 0.6], no-rates into [0.2, 0.6]
    t = story_tension([0.2, 0.3, 0.4, 0.5, 0.6], [0.6, 0.4, 0.3, 0.4, 0.2], smooth_window=1)
    assert [e.angle for e in t.extrema] == pytest.approx([e.angle for e in base.extrema])
    assert [c for e in t.extrema for c in (e.x, e.y)] == pytest.approx([0.5, 0.25, 0.75, 0.5])
    assert t.extrema[0].pct == pytest.approx(0.4) and t.extrema[0].smoothed == pytest.approx(0.3)


def test_sharp_peak_counts_for_ir60_not_ir30():
    t = story_tension([0.2, 0.5, 0.8], [0.0, 1.0, 0.0], smooth_window=1)
    assert [e.angle for e in t.extrema] == pytest.approx([math.degrees(math.acos(0.6))])  # 53.13°
    assert (t.ir30, t.ir60, t.ir120) == pytest.approx((0.0, 1 / 3, 1 / 3))


def test_default_smoothing_window_five_on_a_triangle():
    nr = [0, 0, 0, 0.2, 0.4, 0.6, 0.4, 0.2, 0, 0, 0]
    pcts = [0.10 + 0.08 * i for i in range(11)]
    t = story_tension(pcts, nr)
    assert t.smoothed == pytest.approx([0, 0, 0.12, 0.24, 0.32, 0.36, 0.32, 0.24, 0.12, 0, 0])
    assert [(e.position, e.kind) for e in t.extrema] == [(5, "peak")]
    # rescaled neighbours: (.4, 8/9), (.5, 1), (.6, 8/9) → cos = (−.01 + 1/81) / (.01 + 1/81)
    cos = (-0.01 + 1 / 81) / (0.01 + 1 / 81)
    assert t.extrema[0].angle == pytest.approx(math.degrees(math.acos(cos)))   # ≈ 83.97°
    assert (t.ir30, t.ir60, t.ir120) == pytest.approx((0, 0, 1 / 11))
    assert t.mean_no_rate == pytest.approx(1.8 / 11)
    assert t.late_no_rate == pytest.approx(0.0)      # positions 9 and 10 (shares .82, .90)
    assert t.retention == pytest.approx(0.0) and t.convergence == pytest.approx(-100.0)


def test_smoothing_can_turn_a_spike_into_a_plateau():
    t = story_tension([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], [0, 0, 0, 1, 0, 0, 0])
    assert t.smoothed == pytest.approx([0, 0, 0.2, 0.2, 0.2, 0, 0])
    assert t.extrema == [] and t.ir120 == 0
    assert t.n_peaks == 1                     # raw curve still has the spike


def test_single_position_story():
    t = story_tension([0.5], [0.75])
    assert t.mean_no_rate == 0.75 and t.extrema == [] and t.retention is None


def test_bad_curves_fail_clearly():
    with pytest.raises(ValueError, match="2 revealed shares but 3"):
        story_tension([0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="strictly increasing"):
        story_tension([0.2, 0.1], [0.1, 0.2])
    with pytest.raises(ValueError, match="missing"):
        story_tension([0.1, 0.2], [0.1, float("nan")])
    with pytest.raises(ValueError, match="empty"):
        story_tension([], [])


# ---- group_summary -----------------------------------------------------------------------

def test_group_ci_by_hand():
    mean, lo, hi, n = group_summary([1.0, 2.0, 3.0, 4.0])
    s = math.sqrt(5 / 3)                      # sample std (ddof=1) of 1..4
    assert (mean, n) == (2.5, 4)
    assert lo == pytest.approx(2.5 - 1.96 * s / 2)
    assert hi == pytest.approx(2.5 + 1.96 * s / 2)


def test_group_ci_matches_statsmodels_normal_interval():
    from statsmodels.stats.weightstats import DescrStatsW
    xs = [0.31, 0.52, 0.47, 0.12, 0.66, 0.40]
    mean, lo, hi, _ = group_summary(xs)
    s_lo, s_hi = DescrStatsW(xs).zconfint_mean(alpha=0.05)   # z = 1.95996…, same σ/√n
    assert mean == pytest.approx((s_lo + s_hi) / 2)
    assert (hi - lo) == pytest.approx(s_hi - s_lo, rel=1e-4)


def test_group_missing_values_and_small_n():
    assert group_summary([None, float("nan")]) == (None, None, None, 0)
    assert group_summary([0.4, None]) == (0.4, None, None, 1)
    mean, lo, hi, n = group_summary([0.2, None, 0.4])
    assert n == 2 and mean == pytest.approx(0.3)
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.02) / math.sqrt(2))
