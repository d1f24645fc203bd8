"""NCP metrics on hand-made episode sets with hand-computed expectations (KM, Table 1/2/7)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from lifelines import KaplanMeierFitter
from scipy import stats

from wse_platform.metrics.ncp import (auditor_sensitivity, correlations, genre_table, kaplan_meier, n_active,
                                      raw_share_active, summary_table, survival_table)
from wse_platform.ncp.plots import plot_survival


def episodes(rows: list[tuple]) -> pl.DataFrame:
    cols = ["model", "arch", "spec_id", "auditor_id", "turns", "termination", "conflict_kinds",
            "trajectory_progress", "commitments_satisfied_share"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows],
                        schema={"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "auditor_id": pl.Utf8,
                                "turns": pl.Int64, "termination": pl.Utf8, "conflict_kinds": pl.List(pl.Utf8),
                                "trajectory_progress": pl.Float64, "commitments_satisfied_share": pl.Float64})


def test_kaplan_meier_hand_computed():
    # durations 1,2,2,3,4; events at 1, 2, 3 (one of the 2s and the 4 censored)
    km = kaplan_meier([1, 2, 2, 3, 4], [True, True, False, True, False], [0, 1, 2, 3, 4, 5])
    assert [k["survival"] for k in km] == pytest.approx([1.0, 0.8, 0.6, 0.3, 0.3, 0.3])
    assert [k["at_risk"] for k in km] == [5, 5, 4, 2, 1, 0]
    # exponential Greenwood CI at t=1 by hand: V = [1/(5*4)] / ln(0.8)^2, bounds exp(-exp(ln(-ln S) ± z sqrt V))
    z = 1.959963984540054
    v = (1 / 20) / math.log(0.8) ** 2
    c = math.log(-math.log(0.8))
    assert km[1]["ci_lower"] == pytest.approx(math.exp(-math.exp(c + z * math.sqrt(v))), rel=1e-6)
    assert km[1]["ci_upper"] == pytest.approx(math.exp(-math.exp(c - z * math.sqrt(v))), rel=1e-6)
    assert km[1]["ci_lower"] == pytest.approx(0.2038, abs=1e-4) and km[1]["ci_upper"] == pytest.approx(0.9692, abs=1e-4)


def test_kaplan_meier_equals_lifelines_on_a_random_set():
    rng = np.random.default_rng(7)
    d = rng.integers(1, 40, size=60)
    e = rng.random(60) < 0.6
    times = list(range(0, 45))
    km = kaplan_meier(d.tolist(), e.tolist(), times)
    ref = KaplanMeierFitter().fit(d, event_observed=e)
    expected = ref.survival_function_at_times(times).to_numpy()
    assert [k["survival"] for k in km] == pytest.approx(expected.tolist())
    table = ref.event_table
    for k in km:  # lifelines' at-risk at its event times equals our count of durations >= t
        if k["turn"] in table.index and k["turn"] > 0:
            assert k["at_risk"] == table.loc[k["turn"], "at_risk"]


def test_raw_share_active_uses_the_reference_at_least_t_convention():
    turns = [1, 2, 2, 3, 4]  # an episode whose conflict came at turn t still counts as active at t
    assert [raw_share_active(turns, t) for t in range(6)] == pytest.approx([1.0, 1.0, 0.8, 0.4, 0.2, 0.0])
    assert [n_active(turns, t) for t in range(6)] == [5, 5, 4, 2, 1, 0]


def test_survival_at_20_is_zero_not_null_when_every_episode_ended_before():
    df = episodes([("m", "a", f"s{i}", "A", d, "CONFLICT", ["fact"], 0.0, 0.0) for i, d in enumerate([2, 5, 9])])
    (row,) = summary_table(df).iter_rows(named=True)
    assert row["n_active_at_20"] == 0 and row["share_active_at_20"] == 0.0
    assert row["survival_at_20"] == 0.0 and row["km_survival_at_20"] == 0.0  # KM reached 0: estimable, and 0
    censored = episodes([("m", "a", "s0", "A", 3, "SURVIVAL", [], 0.0, 0.0),
                         ("m", "a", "s1", "A", 2, "CONFLICT", ["fact"], 0.0, 0.0)])
    (row,) = summary_table(censored).iter_rows(named=True)
    assert row["share_active_at_20"] == 0.0 and row["km_survival_at_20"] is None  # KM not estimable past turn 3
    assert row["survival_at_20"] == 0.0  # the headline (reference): no episode has 20 turns


def test_summary_table_hand_computed():
    df = episodes([
        ("m", "baseline+adversarial", "s0", "A", 1, "CONFLICT", ["fact"], 0.5, 0.0),
        ("m", "baseline+adversarial", "s1", "A", 2, "CONFLICT", ["commitment", "player_input"], 0.25, 0.5),
        ("m", "baseline+adversarial", "s2", "A", 3, "SURVIVAL", [], 1.0, 1.0),
        ("m", "baseline+adversarial", "s3", "A", 3, "INVALID", [], 0.0, 0.5),
        ("m", "memory+adversarial", "s0", "A", 5, "CONFLICT", ["fact"], 0.1, 0.1),
        ("m", "memory+adversarial", "s1", "A", 20, "CONFLICT", ["fact"], 0.2, 0.2),
        ("m", "memory+adversarial", "s2", "A", 25, "SUCCESS", [], 1.0, 1.0),
        ("m", "memory+adversarial", "s3", "A", 30, "SURVIVAL", [], 0.3, 0.3),
    ])
    out = {r["arch"]: r for r in summary_table(df).iter_rows(named=True)}
    b = out["baseline+adversarial"]
    assert b["n_episodes"] == 4 and b["avg_turns"] == pytest.approx(2.25)
    assert b["trajectory_pct"] == pytest.approx(43.75) and b["satisfied_pct"] == pytest.approx(50.0)
    assert (b["pct_fact_conflict"], b["pct_commitment_conflict"], b["pct_player_input_conflict"]) == (25.0, 25.0, 25.0)
    assert (b["pct_conflict"], b["pct_survival"], b["pct_invalid"]) == (50.0, 25.0, 25.0)
    assert b["km_survival_at_20"] is None and b["survival_at_20"] == 0.0  # nobody observed through turn 20
    assert (b["n_active_at_20"], b["share_active_at_20"]) == (0, 0.0)
    assert (b["n_conflict"], b["n_survival"], b["n_success"]) == (2, 1, 0)
    m = out["memory+adversarial"]
    assert m["km_survival_at_20"] == pytest.approx(0.75 * (2 / 3))  # events at 5 (4 at risk) and 20 (3 at risk)
    assert m["survival_at_20"] == 0.75  # headline: 3 of 4 episodes have turn count >= 20 (SUCCESS at 5 left)
    assert (m["n_active_at_20"], m["share_active_at_20"]) == (3, 0.75)  # 20, 25, 30 played turn 20
    assert m["pct_success"] == 25.0 and m["n_success"] == 1


def test_survival_table_per_cell_and_turn():
    df = episodes([("m", "a", f"s{i}", "A", d, t, [], 0.0, 0.0) for i, (d, t) in
                   enumerate([(1, "CONFLICT"), (2, "CONFLICT"), (2, "SUCCESS"), (3, "CONFLICT"), (4, "SURVIVAL")])])
    st = survival_table(df, t_max=4)
    assert st["turn"].to_list() == [0, 1, 2, 3, 4]
    assert st["km_survival"].to_list() == pytest.approx([1.0, 0.8, 0.6, 0.3, 0.3])
    # the headline, as the reference's metrics.survival_curve: share with turn count >= t
    assert st["survival"].to_list() == pytest.approx([1.0, 1.0, 0.8, 0.4, 0.2])
    assert st["raw_share_active"].to_list() == st["survival"].to_list()
    assert st["n_active"].to_list() == [5, 5, 4, 2, 1]
    assert st["at_risk"].to_list() == [5, 5, 4, 2, 1]


def test_correlations_hand_computed_and_vs_scipy():
    c = correlations([1, 2, 3], [1, 3, 2])
    assert c["pearson_r"] == pytest.approx(0.5) and c["spearman_rho"] == pytest.approx(0.5)
    x, y = [3, 7, 1, 9, 4, 4], [2, 8, 3, 10, 5, 1]
    c = correlations(x, y)
    assert c["pearson_r"] == pytest.approx(stats.pearsonr(x, y).statistic)
    assert c["spearman_rho"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert c["pearson_p"] == pytest.approx(stats.pearsonr(x, y).pvalue)
    assert correlations([1, 2], [2, 1])["pearson_r"] is None and correlations([1, 1, 1], [1, 2, 3])["spearman_rho"] is None


def test_auditor_sensitivity_matches_environments_across_auditors():
    a = [("m", "x", f"s{i}", "A", t, "CONFLICT", ["fact"], 0.1 * i, 0.5) for i, t in enumerate([3, 7, 1, 9, 4])]
    a.append(("m", "x", "s9", "A", 2, "CONFLICT", ["fact"], 0.0, 0.0))  # not re-audited by B: excluded
    b = [("m", "x", f"s{i}", "B", t, "CENSORED", [], 0.2 * i, 0.5) for i, t in reversed(list(enumerate([2, 8, 3, 10, 5])))]
    out = auditor_sensitivity(episodes(a + b))
    aud = {r["auditor_id"]: r for r in out.filter(pl.col("row_type") == "auditor").iter_rows(named=True)}
    assert aud["A"]["n_episodes"] == 6 and aud["B"]["pct_censored"] == 100.0 and aud["A"]["pct_fact_conflict"] == 100.0
    corr = {r["metric"]: r for r in out.filter(pl.col("row_type") == "correlation").iter_rows(named=True)}
    turns = corr["turns"]
    assert (turns["auditor_id"], turns["auditor_b"], turns["n_environments"]) == ("A", "B", 5)
    assert turns["pearson_r"] == pytest.approx(stats.pearsonr([3, 7, 1, 9, 4], [2, 8, 3, 10, 5]).statistic)
    assert turns["spearman_rho"] == pytest.approx(stats.spearmanr([3, 7, 1, 9, 4], [2, 8, 3, 10, 5]).statistic)
    assert corr["trajectory_progress"]["pearson_r"] == pytest.approx(1.0)
    assert corr["commitments_satisfied_share"]["pearson_r"] is None  # constant: undefined


def test_genre_table_and_unknown_spec():
    df = episodes([("m", "a", "s0", "A", 1, "SURVIVAL", [], 0.5, 0.2),
                   ("m", "a", "s1", "A", 1, "SURVIVAL", [], 0.25, 0.4),
                   ("m", "a", "s2", "A", 1, "SURVIVAL", [], 1.0, 1.0)])
    out = genre_table(df, {"s0": "Drama", "s1": "Drama", "s2": "Action"})
    rows = {r["primary_genre"]: r for r in out.iter_rows(named=True)}
    assert rows["Drama"]["trajectory_pct"] == pytest.approx(37.5) and rows["Drama"]["satisfied_pct"] == pytest.approx(30.0)
    assert rows["Action"]["n_episodes"] == 1
    with pytest.raises(ValueError, match="s2"):
        genre_table(df, {"s0": "Drama", "s1": "Drama"})


def test_survival_plot_is_written(tmp_path):
    df = episodes([("m", "a", f"s{i}", "A", d, "CONFLICT" if i % 2 else "SURVIVAL", [], 0.0, 0.0)
                   for i, d in enumerate([1, 2, 3, 3])])
    path = plot_survival(survival_table(df, t_max=3), tmp_path / "km.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_2_pairwise_auditor_correlations_come_from_the_live_ablation_episodes():
    """The paper's Table 2 pairs auditors by Pearson and Spearman correlation; here per metric, the live
    episodes of the ablation cell matched on spec."""
    from scipy import stats

    from wse_platform.metrics.ncp import auditor_ablation_table
    a_turns, b_turns = [1, 2, 3, 4, 8], [2, 4, 5, 9, 9]
    df = episodes([("m", "x", f"s{i}", a, d, "CONFLICT", ["fact"], 0.1 * d, 0.0)
                   for a, turns in (("A", a_turns), ("B", b_turns)) for i, d in enumerate(turns)])
    rows = auditor_ablation_table(df).to_dicts()
    assert [r["auditor_id"] for r in rows if r["row_type"] == "auditor"] == ["A", "B"]
    (turns,) = [r for r in rows if r["row_type"] == "correlation" and r["metric"] == "turns"]
    assert (turns["auditor_id"], turns["auditor_b"], turns["n_environments"]) == ("A", "B", 5)
    assert turns["pearson_r"] == pytest.approx(stats.pearsonr(a_turns, b_turns).statistic)
    assert turns["spearman_rho"] == pytest.approx(stats.spearmanr(a_turns, b_turns).statistic)
    assert (turns["model"], turns["arch"]) == ("m", "x")


def test_table_5_puts_each_models_episode_next_to_the_human_sessions_on_the_spec_a_human_played():
    from wse_platform.metrics.ncp import human_baseline_table
    df = episodes([("gpt", "baseline+adversarial", "movie52", "A", 2, "CONFLICT", ["fact", "commitment"], 1 / 13, 0.1),
                   ("gpt", "baseline+adversarial", "movie9", "A", 5, "CONFLICT", ["fact"], 0.0, 0.0),
                   ("human", "human+adversarial", "movie52", "A", 19, "SUCCESS", [], 1.0, 0.58),
                   ("human", "human+adversarial", "movie52", "A", 100, "SURVIVAL", [], 5 / 13, 0.08)])
    df = df.with_columns(pl.Series("nodes_completed", [1, 0, 13, 5]), pl.Series("nodes_total", [13, 9, 13, 13]),
                         pl.Series("commitments_satisfied", [1, 0, 7, 1]),
                         pl.Series("commitments_total", [12, 4, 12, 12]),
                         pl.Series("generation_version", ["g", "g", "ncp-play:resolve-all", "ncp-play:max"]))
    rows = human_baseline_table(df).to_dicts()
    assert [(r["model"], r["turns"], r["traj"], r["sati"], r["status"], r["failure_mode"]) for r in rows] == [
        ("gpt", 2, "1/13", "1/12", "FAILURE", "Commitment + fact conflict"),
        ("human", 100, "5/13", "1/12", "SURVIVED", None),
        ("human", 19, "13/13", "7/12", "SUCCESS", None)]
    assert {r["session"] for r in rows if r["model"] == "human"} == {"resolve-all", "max"}
    assert all(r["spec_id"] == "movie52" for r in rows)  # movie9 had no human session


def test_kaplan_meier_and_its_ci_equal_lifelines_on_many_sets():
    """Issue 24: computed with numpy (no lifelines import in the tables' processes); survival, CI and
    at-risk equal lifelines' on random sets with ties, events at 0, all censored, all events."""
    rng = np.random.default_rng(11)
    sets = [([3, 3], [False, False]), ([2, 5, 9], [True, True, True]), ([0, 1, 2], [True, False, True]),
            ([1, 2, 2, 3, 4], [True, True, False, True, False]), ([4], [True]), ([4], [False])]
    for _ in range(40):
        n = int(rng.integers(1, 50))
        sets.append((rng.integers(0, 25, size=n).tolist(), (rng.random(n) < rng.random()).tolist()))
    times = list(range(-1, 30))
    for d, e in sets:
        km = kaplan_meier(d, e, times)
        ref = KaplanMeierFitter(alpha=0.05).fit(np.asarray(d, float), event_observed=np.asarray(e, bool))
        sf, ci = ref.survival_function_.iloc[:, 0], ref.confidence_interval_survival_function_
        for k in km:
            idx = sf.index[sf.index <= k["turn"]]
            want = (1.0, 1.0, 1.0) if len(idx) == 0 else \
                (float(sf.loc[idx[-1]]), float(ci.loc[idx[-1]].iloc[0]), float(ci.loc[idx[-1]].iloc[1]))
            got = (k["survival"], k["ci_lower"], k["ci_upper"])
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (d, e, k)
            assert k["at_risk"] == sum(1 for x in d if x >= k["turn"])


def test_kaplan_meier_does_not_import_lifelines():
    import subprocess
    import sys
    code = ("import sys; from wse_platform.metrics.ncp import kaplan_meier; "
            "kaplan_meier([1, 2, 3], [True, False, True], [0, 1, 2, 3]); "
            "print(sorted(m for m in ('lifelines', 'pandas', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout    # lifelines (pandas, scipy): ~1.6 s of CPU per process
