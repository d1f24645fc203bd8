"""Inter-judge agreement of the richness panel (`wse_richness_agreement`) against hand-computed values."""
import math

import numpy as np
import polars as pl
import pytest

from wse_platform.wse import tables as T

RJ = "wse.richness_judge:panel:a+b+c:h"
# per trajectory: (member a, b, c) rating (used for all three breadth dimensions); None = member failed
RATINGS = {"t1": (3, 3, 3), "t2": (2, 3, 3), "t3": (5, 4, 2), "t4": (1, 1, 2), "t5": (4, 4, None)}
UNITS = {"t1": (8, 8, 8), "t2": (8, 10, 8), "t3": (10, 10, 8), "t4": (8, 8, 8), "t5": (8, 8, None)}  # 2 steps each


def _verdicts(judge_id=RJ):
    rows = []
    for t, rs in RATINGS.items():
        for j, r in enumerate(rs):
            rows.append({"judge_config_id": judge_id, "model": "m1", "arch": "B1", "seed_id": t, "judge_index": j,
                         "judge_member": f"{j}:{'abc'[j]}", "n_units_non_repetitive": UNITS[t][j],
                         "observed_steps": 2, "rating_event_diversity": r, "rating_character_change": r,
                         "rating_world_expansion": r,
                         "failure_json": '{"error_kind": "truncated"}' if r is None else None})
    return pl.DataFrame(rows)


def _one(df, **where):
    sub = df.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in where.items()))
    assert sub.height == 1, (where, sub)
    return sub.row(0, named=True)


def test_richness_agreement_by_hand():
    v = pl.concat([_verdicts(), _verdicts("other-judge")])
    ra = T.richness_agreement(v, T.TableParams(), [RJ])
    assert set(ra["judge_config_id"]) == {RJ}
    # 5 quantities × (1 panel + 3 pairs)
    assert ra.height == 20 and set(ra["quantity"]) == {"event_diversity", "character_change", "world_expansion",
                                                         "units_per_step", "R"}
    panel = _one(ra, kind="panel", quantity="event_diversity")
    assert (panel["n_members"], panel["n_trajectories"], panel["n_trajectories_incomplete"]) == (3, 4, 1)
    # complete t1..t4: P_i = [1, 1/3, 0, 1/3] -> P̄ = 5/12; categories 1..5 = [2, 3, 5, 1, 1]/12 -> P_e = 40/144
    assert panel["fleiss_kappa"] == pytest.approx(20 / 104)
    assert (panel["unanimous_pct"], panel["within_one_pct"]) == (25.0, 75.0)   # spreads 0, 1, 3, 1
    # ICC(2,1): MSR = 26/9, MSC = 1/12, MSE = 35/36 -> (69/36) / (150/36)
    assert panel["icc"] == pytest.approx(69 / 150)
    ab = _one(ra, kind="pairwise", quantity="event_diversity", member_a="0:a", member_b="1:b")
    # a = 3 2 5 1, b = 3 3 4 1: Σ p_a p_b (i−j)² = 27/8, observed mean (i−j)² = 1/2 -> κ_w = 1 − 4/27
    assert (ab["exact_pct"], ab["within_one_pct"], ab["mae"]) == (50.0, 100.0, 0.5)
    assert ab["qwk"] == pytest.approx(23 / 27)
    assert ab["pearson_r"] == pytest.approx(5.75 / math.sqrt(8.75 * 4.75))
    assert ab["fleiss_kappa"] is None and ab["icc"] is None
    pairs = ra.filter((pl.col("kind") == "pairwise") & (pl.col("quantity") == "event_diversity"))
    assert panel["qwk"] == pytest.approx(float(np.mean(pairs["qwk"].to_numpy())))
    # units per step: a = 4 4 5 4, b = 4 5 5 4
    assert _one(ra, kind="pairwise", quantity="units_per_step", member_a="0:a", member_b="1:b")["mae"] == 0.25
    # R: density ≥ d95 everywhere -> Q = 1, R = 100·√((r − 1)/4) = 50·√(r − 1)
    r_ab = _one(ra, kind="pairwise", quantity="R", member_a="0:a", member_b="1:b")
    assert r_ab["mae"] == pytest.approx((50 * math.sqrt(2) - 50 + 100 - 50 * math.sqrt(3)) / 4)
    assert r_ab["exact_pct"] is None and r_ab["qwk"] is None


def test_richness_agreement_per_model_group_and_member_fallback():
    v = pl.concat([_verdicts(), _verdicts().with_columns(model=pl.lit("m2"))]).drop("judge_member")
    ra = T.richness_agreement(v, T.TableParams(model_groups={"g2": ["m2"]}))
    assert set(ra["model_group"].to_list()) == {None, "g2"}
    assert set(ra["member_a"].drop_nulls()) == {"0", "1"}                    # judge_index when no member name
    g2 = _one(ra, kind="panel", quantity="event_diversity", model_group="g2")
    assert g2["fleiss_kappa"] == pytest.approx(20 / 104) and g2["n_trajectories"] == 4
    assert _one(ra, kind="panel", quantity="R", model_group=None)["n_trajectories"] == 8


def test_icc_edge_cases():
    assert T.icc_2_1(np.array([[1, 1], [3, 3], [5, 5]])) == pytest.approx(1.0)
    assert T.icc_2_1(np.array([[2, 2], [2, 2]])) is None                  # no variance: undefined
    assert T.icc_2_1(np.array([[1, 2, 3]])) is None                       # one subject
