"""The tables added for the paper's remaining analyses, each against values computed by hand
(on the small dataset of test_tables.py where possible)."""
import json
import math

import numpy as np
import polars as pl
import pytest

from tests.wse.test_tables import CJ, H, RJ, R70, upstream
from wse_platform.wse import tables as T


def _two_models():
    a, b = upstream("m1"), upstream("m2")
    return {k: pl.concat([a[k], b[k]]) for k in a}


GROUPS = T.TableParams(bootstrap_draws=50, bootstrap_seed=3, consistency_judge_id=CJ, richness_judge_id=RJ,
                       model_groups={"g1": ["m1"], "g2": ["m2"]})


def _frame(up, params=GROUPS):
    return T.trajectory_frame(up["wse_trajectories"], up["wse_trajectory_consistency"],
                              up["wse_richness_verdicts"], params)


def _one(df, **where):
    sub = df.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in where.items()))
    assert sub.height == 1, (where, sub)
    return sub.row(0, named=True)


# ---- Richness weighted by observed steps (App. B.6) ------------------------------------------------
def test_cell_richness_weighted_by_observed_steps():
    frame, info = _frame(upstream())
    b1 = _one(T.cell_metrics(frame, info), arch="B1")
    # judge medians: s1 [100, 100, 0] -> 100 (L 3); s2 R70 (L 3); s3 two valid judges rating 1 -> 0 (L 1); s4 100 (L 1)
    assert b1["R_unweighted"] == pytest.approx((100 + R70 + 0 + 100) / 4)
    # R is the paper's step-weighted cell Richness, the one Pareto, contrasts and heatmaps use
    assert b1["R"] == pytest.approx((3 * 100 + 3 * R70 + 1 * 0 + 1 * 100) / 8)


# ---- Table 6 cross-tab and panel rows ----------------------------------------------------------------
def test_category_by_source_cross_tab_and_group_rows():
    up = _two_models()
    frame, info = _frame(up)
    fv = T.first_violations(frame, up["wse_consistency_steps"], info, GROUPS)
    x = fv.filter((pl.col("table_kind") == "category_x_source") & (pl.col("scope") == "all"))
    got = {(r["label"], r["source"]): (r["n"], r["pct"]) for r in x.iter_rows(named=True)}
    assert got == {("temporal", "opening"): (2, pytest.approx(100 / 3)),
                   ("temporal", "unresolved"): (2, pytest.approx(100 / 3)),
                   ("no_majority_category", "initial_world"): (2, pytest.approx(100 / 3))}
    g1 = _one(fv, table_kind="category", scope="group", model_group="g1", label="temporal")
    assert (g1["n"], g1["pct"], g1["median_step"]) == (2, pytest.approx(200 / 3), 2.5)


def test_horizon_failures_and_pareto_have_panel_rows():
    up = _two_models()
    frame, info = _frame(up)
    hs = T.horizon_sensitivity(frame, info, GROUPS)
    g = _one(hs, scope="group", model_group="g1", h=H)
    m = _one(hs, scope="model", model="m1", h=H)
    assert g["C_obs_h"] == pytest.approx(m["C_obs_h"]) and g["n_first_contradictions"] == 3
    assert g["share_by_step10"] == 1.0
    gf = T.generation_failures(up["wse_trajectories"], GROUPS)
    row = _one(gf, scope="group", model_group="g2", component="story_agent")
    assert (row["n_enabled"], row["n_failures"]) == (12, 2)
    cells = T.cell_metrics(frame, info)
    par = T.pareto_table(cells, GROUPS)
    assert set(par["panel"].unique().to_list()) == {"pooled", "g1", "g2"}
    assert par.filter(pl.col("panel") == "g1")["model"].unique().to_list() == ["m1"]


# ---- Table 9 per model, within base ------------------------------------------------------------------
def test_per_model_module_effects_within_base():
    cells = [("m1", a) for a in ("B1", "B1+WMEM", "B2", "B2+WMEM", "B2+WMOD", "B2+WMEM+WMOD")]
    specs, cm = T.contrast_specs(cells, T.TableParams())
    idx = [i for i, s in enumerate(specs) if s.scope == "model_base_conditional" and s.base_level == "B2"
           and s.contrast == "WMEM on-off"]
    assert len(idx) == 1 and specs[idx[0]].model == "m1" and specs[idx[0]].n_pairs == 2
    w = dict(zip(cells, cm[:, idx[0]]))
    assert w[("m1", "B2+WMEM")] == 0.5 and w[("m1", "B2")] == -0.5 and w[("m1", "B2+WMEM+WMOD")] == 0.5
    assert w[("m1", "B1+WMEM")] == 0.0


# ---- Table 4: C_obs from the per-model pooled KM ---------------------------------------------------
def test_pooled_consistency_per_model_by_hand():
    frame, info = _frame(upstream())
    pooled = T.model_pooled_consistency(frame, info)
    # 12 trajectories pooled: Y = [12, 8, 6], D = [1, 1, 1] -> S = [11/12, 77/96, 385/576]
    assert pooled["C_obs_pooled"][0] == pytest.approx(100 / 3 * (11 / 12 + 77 / 96 + 385 / 576))
    params = T.TableParams(model_params={f"m{i}": (2.0 ** i, "fam") for i in range(3)})
    cells = pl.DataFrame({"model": ["m0", "m1", "m2"], "G": [1.0, 2.0, 3.0], "C_obs": [5.0, 6.0, 7.0],
                          "R": [1.0, 1.0, 2.0]})
    pooled3 = pl.DataFrame({"model": ["m0", "m1", "m2"], "C_obs_pooled": [10.0, 20.0, 30.0]})
    fit, _ = T.scaling_fit(cells, params, pooled3)
    row = _one(fit, metric="C_obs_pooled", fit="all")
    assert row["beta"] == pytest.approx(10.0) and row["alpha"] == pytest.approx(10.0)


# ---- Table 7 / Fig. 5 as the paper computes it ---------------------------------------------------------
def test_source_family_pooled_per_model():
    up = upstream()
    frame, info = _frame(up, T.TableParams(bootstrap_draws=40, consistency_judge_id=CJ, richness_judge_id=RJ))
    steps = pl.DataFrame({"model": ["m1"] * 3, "arch": ["B1"] * 3, "seed_id": ["s2"] * 3, "step": [1, 2, 3],
                          "new_day": [True, False, True]})
    sf = T.source_family_pooled(frame, info, T.TableParams(bootstrap_draws=40), steps)
    itp = _one(sf, row_kind="model_family", source_family="itp", model="m1")
    # itp seed s3: B1 L=1, B2 L=3 with T=3, B1+WMEM L=3: Y = [3, 2, 2], D = [0, 0, 1] -> S = [1, 1, .5]
    assert itp["C_obs"] == pytest.approx(100 / 3 * 2.5) and itp["mean_first_contradiction_step"] == 3.0
    assert itp["C_obs_lo"] <= itp["C_obs"] <= itp["C_obs_hi"]
    dr = _one(sf, row_kind="model_family", source_family="dracor", model="m1")
    # relative day counted from 1 (Table 7's ≈ 1.1): the B1 s2 contradiction at step 2 falls on day 2
    # (new_day at step 1); B1+WMEM s2 at step 1 has no steps -> null
    assert dr["relative_day_at_contradiction"] == 2.0 and dr["mean_first_contradiction_step"] == 1.5
    fam = _one(sf, row_kind="family_pooled", source_family="itp")
    assert fam["C_obs"] == pytest.approx(itp["C_obs"])       # one model: the equal-model mean is its value


def test_source_family_contrasts_lopo_and_exposure_use_the_per_model_pooled_method():
    """Table 7 / Fig. 15: the DraCor contrasts and leave-one-play-out rows come from the per-model
    pooled KM family means; exposure rows are equal-model means."""
    up = _two_models()
    frame, info = _frame(up, T.TableParams(bootstrap_draws=40, consistency_judge_id=CJ, richness_judge_id=RJ))
    # model m2's trajectories are all one step shorter where possible: the two models now differ
    frame = frame.with_columns(length=pl.when(pl.col("model") == "m2").then(pl.max_horizontal(pl.col("length") - 1, 0))
                               .otherwise(pl.col("length")))
    sf = T.source_family_pooled(frame, info, T.TableParams(bootstrap_draws=40))
    fam = {f: _one(sf, row_kind="family_pooled", source_family=f) for f in ("dracor", "itp", "smallville")}
    for o in ("itp", "smallville"):
        c = _one(sf, row_kind="contrast_pooled", contrast=f"dracor-{o}")
        assert c["C_obs"] == pytest.approx(fam["dracor"]["C_obs"] - fam[o]["C_obs"])
        assert c["C_obs_lo"] <= c["C_obs"] + 1e-9 <= c["C_obs_hi"] + 2e-9
    d = frame.filter(pl.col("source_family") == "dracor")
    per_model = d.group_by("model").agg(pl.col("length").mean().alias("l"),
                                        (100 * (pl.col("length") == 3).mean()).alias("f"))
    assert fam["dracor"]["mean_length"] == pytest.approx(per_model["l"].mean())          # equal-model mean
    assert fam["dracor"]["full_horizon_pct"] == pytest.approx(per_model["f"].mean())
    lopo = sf.filter(pl.col("row_kind") == "leave_one_play_out_pooled")
    assert sorted(set(lopo["dropped_world"].to_list())) == ["w1", "w1b"]
    assert set(lopo["contrast"].drop_nulls().to_list()) == {"dracor-itp", "dracor-smallville"}
    for w in ("w1", "w1b"):
        fam_w = _one(lopo, dropped_world=w, source_family="dracor")
        con_w = _one(lopo, dropped_world=w, contrast="dracor-itp")
        assert con_w["C_obs"] == pytest.approx(fam_w["C_obs"] - fam["itp"]["C_obs"])


# ---- App. C.3 and Fig. 11 --------------------------------------------------------------------------
def test_full_horizon_paired_contrasts_by_hand():
    frame, info = _frame(upstream())
    fh = T.full_horizon_contrasts(frame, info, T.TableParams())
    wmem = _one(fh, scope="model", contrast="WMEM on-off")
    # only seed s2 has both B1 and B1+WMEM at L = H: C 0 (T=1) vs 100/3 (T=2); R 100 vs R70
    assert wmem["n_pairs"] == 1 and wmem["delta_C"] == pytest.approx(-100 / 3)
    assert wmem["delta_R"] == pytest.approx(100 - R70)
    b21 = _one(fh, scope="model", contrast="B2-B1")
    assert (b21["n_pairs"], b21["delta_C"], b21["delta_R"]) == (1, 0.0, 0.0)
    assert _one(fh, scope="group", contrast="WMEM on-off")["delta_C"] == pytest.approx(-100 / 3)


def test_cost_contrasts_from_llm_calls_by_hand():
    frame, info = _frame(upstream())
    cells = T.cell_metrics(frame, info)
    calls = pl.DataFrame({
        "role": ["wse.story_agent", "wse.story_agent", "wse.story_agent", "wse.story_agent", "wse.consistency_judge"],
        "partition_key": ["B1|m1", "B1|m1", "B1|m1", "B2|m1", "B2|m1"],
        "request_key": ["r1", "r2", "r1", "r3", "r4"], "attempt": [1, 1, 1, 1, 1],
        "tokens_in": [100, 100, 100, 600, 9999], "tokens_out": [50, 50, 50, 200, 9999],
        "cost_usd": [None] * 5})
    cc = T.cost_contrasts(calls, cells, T.TableParams())
    b1 = _one(cc, row_kind="cell", arch="B1")
    assert b1["n_calls"] == 2 and b1["tokens_per_trajectory"] == pytest.approx(300 / 4)   # r1 replay counted once
    assert b1["tokens_per_step"] == pytest.approx(300 / 8)
    b2 = _one(cc, row_kind="cell", arch="B2")
    assert b2["tokens_per_trajectory"] == pytest.approx(800 / 4)                           # judge call excluded
    con = _one(cc, row_kind="contrast", scope="model", contrast="B2-B1")
    assert con["delta_tokens_per_trajectory"] == pytest.approx(125.0)
    assert con["delta_G"] == pytest.approx(100 * 11 / 12 - 200 / 3)
    # Fig. 11 bars: within-model percentage changes, 100·(B2 − B1)/B1
    assert con["pct_tokens_per_trajectory"] == pytest.approx(100 * 125.0 / 75.0)
    assert con["pct_G"] == pytest.approx(100 * (100 * 11 / 12 - 200 / 3) / (200 / 3))


def test_cost_contrasts_read_only_the_cost_columns_of_llm_calls():
    """The asset selects `T.COST_COLUMNS` of `llm_calls` (not `*`: ~0.3 s of CPU at horizon 20 in the tables' run
    after the fleet's last answer): they exist in the table's DDL and give the same table as every column."""
    from assets.helpers import ddl_column_schemas

    assert set(T.COST_COLUMNS) <= {c.name for c in ddl_column_schemas()["llm_calls"].columns}
    frame, info = _frame(upstream())
    cells = T.cell_metrics(frame, info)
    calls = pl.DataFrame({
        "call_id": ["c1", "c2", "c3", "c4"], "role": ["wse.story_agent"] * 4,
        "partition_key": ["B1|m1", "B1|m1", "B1|m1", "B2|m1"], "request_key": ["r1", "r2", "r1", "r3"],
        "attempt": [1, 1, 1, 1], "tokens_in": [100, 100, 100, 600], "tokens_out": [50, 50, 50, 200],
        "cost_usd": [0.5, 0.25, 0.0, 1.0], "cache_hit": [False, False, True, False], "latency_s": [1.0, 2.0, 0.0, 3.0]})
    full = T.cost_contrasts(calls, cells, T.TableParams())
    assert T.cost_contrasts(calls.select(T.COST_COLUMNS), cells, T.TableParams()).equals(full)


# ---- failures by role and kind -------------------------------------------------------------------------
def test_failure_kinds_report_truncation_per_role():
    steps = pl.DataFrame({"model": ["m1", "m1"], "failure_component": ["story_agent", "world_memory_agent"],
                          "failure_json": [json.dumps({"error_kind": "schema_violation"}),
                                           json.dumps({"error_kind": "truncated"})]})
    votes = pl.DataFrame({"model": ["m1", "m1"], "failure_json": [json.dumps({"error_kind": "truncated"}), None]})
    rich = pl.DataFrame({"model": ["m1"], "failure_json": [None]})
    calls = pl.DataFrame({"role": ["wse.story_agent"] * 4, "model": ["m1"] * 4, "valid": [False, False, False, True],
                          "error_kind": ["truncated", "truncated", "invalid_json", None],
                          "finish_reason": ["length", "length", "stop", "stop"]})
    fk = T.failure_kinds(steps, votes, rich, calls)
    out = fk.filter((pl.col("source") == "outputs") & (pl.col("scope") == "all"))
    assert {(r["role"], r["error_kind"]): r["n"] for r in out.iter_rows(named=True)} == {
        ("wse.story_agent", "schema_violation"): 1, ("wse.world_memory_agent", "truncated"): 1,
        ("wse.consistency_judge", "truncated"): 1}
    att = _one(fk, source="attempts", scope="all", role="wse.story_agent", error_kind="truncated")
    assert (att["n"], att["n_length_cut"]) == (2, 2)
    assert _one(fk, source="attempts", scope="all", error_kind="invalid_json")["n_length_cut"] == 0


def test_limits_the_paper_does_not_state_are_counted_warnings_not_failures():
    """Issue 22: > 16 memory operations, a plan beat depending on a later beat and > 80 richness units
    are valid outputs (the trajectory goes on, the verdict counts), each counted in wse_failure_kinds."""
    from wse_platform.wse.schemas import MemoryDelta, forward_dependencies, plot_plan_model, richness_verdict_model
    ops = [{"op": "add_fact", "fact_id": f"f{i}", "text": f"fact {i}"} for i in range(20)]
    assert len(MemoryDelta.model_validate({"operations": ops}).operations) == 20
    beat = {"beat_id": "b1", "depends_on": ["b2"], "source_intent_ids": ["player"], "content": "Pia knocks."}
    plan = plot_plan_model(()).model_validate({"beats": [beat, {**beat, "beat_id": "b2", "depends_on": []}]})
    assert forward_dependencies(plan) == 1
    unit = {"step": 1, "kind": "event", "repetitive": False, "evidence": "e", "description": "d"}
    verdict = richness_verdict_model(2).model_validate({"units": [unit] * 81, "rating_event_diversity": 3,
                                                        "rating_character_change": 3, "rating_world_expansion": 3})
    assert len(verdict.units) == 81
    steps = pl.DataFrame({"model": ["m1", "m1", "m2"], "failure_component": [None, None, None],
                          "failure_json": [None, None, None],
                          "memory_delta_json": [json.dumps({"operations": ops}), json.dumps({"operations": ops[:3]}), None],
                          "plan_json": [None, json.dumps(plan.model_dump()), None]},
                         schema_overrides={"failure_component": pl.String, "failure_json": pl.String})
    rich = pl.DataFrame({"model": ["m2"], "failure_json": [None], "units_json": [json.dumps([unit] * 81)]})
    fk = T.failure_kinds(steps, pl.DataFrame({"model": [], "failure_json": []}, schema={"model": pl.String,
                                                                                    "failure_json": pl.String}),
                         rich.with_columns(pl.col("failure_json").cast(pl.String)))
    warn = fk.filter((pl.col("source") == "warnings") & (pl.col("scope") == "all"))
    assert {(r["role"], r["error_kind"]): r["n"] for r in warn.iter_rows(named=True)} == {
        ("wse.world_memory_agent", "warning:memory_ops_over_16"): 1,
        ("wse.world_model", "warning:plan_forward_dependency"): 1,
        ("wse.richness_judge", "warning:units_over_80"): 1}
    assert fk.filter(pl.col("source") == "outputs").is_empty()          # none of them is a failure


# ---- inter-judge agreement --------------------------------------------------------------------------------
def test_judge_agreement_fleiss_and_pairwise_by_hand():
    votes = {"s1": "CCC", "s2": "CCI", "s3": "III", "s4": "CIU", "s5": "C-C"}   # s5: member b failed
    name = {"C": "consistent", "I": "inconsistent", "U": "uncertain", "-": None}
    rows = [{"judge_config_id": CJ, "model": "m1", "arch": "B1", "seed_id": s, "step": 1, "judge_index": j,
             "judge_member": "abc"[j], "verdict": name[v]} for s, vs in votes.items() for j, v in enumerate(vs)]
    ag = T.judge_agreement(pl.DataFrame(rows), T.TableParams())
    panel = _one(ag, kind="panel")
    # P_i = [1, 1/3, 1, 0] -> P̄ = 7/12; p = [6, 5, 1]/12 -> P_e = 62/144; κ = (84 - 62) / (144 - 62) = 22/82
    assert panel["fleiss_kappa"] == pytest.approx(22 / 82) and panel["unanimous_pct"] == 50.0
    assert (panel["n_steps"], panel["n_steps_incomplete"]) == (4, 1)
    ab = _one(ag, kind="pairwise", member_a="a", member_b="b")
    # a = C C I C, b = C C I I: p_o = .75, p_e = 3/4·2/4 + 1/4·2/4 = .5 -> κ = .5
    assert ab["agreement_pct"] == 75.0 and ab["cohen_kappa"] == pytest.approx(0.5)
    assert T.fleiss_kappa(np.array([[3, 0], [3, 0]])) is None          # no variation: undefined


# ---- precursor audit --------------------------------------------------------------------------------------
def test_precursor_audit_by_hand():
    frame = pl.DataFrame({"model": ["m"] * 4, "arch": ["B2"] * 4, "seed_id": ["a", "b", "c", "d"],
                          "first_contradiction": [2, 2, 1, 2], "contradiction_observed": [True] * 4})
    claim = "Nora burned the silver letter beside the river"
    v = pl.DataFrame({"judge_config_id": [CJ] * 6, "model": ["m"] * 6, "arch": ["B2"] * 6,
                      "seed_id": ["a", "a", "b", "c", "d", "d"], "step": [2, 2, 2, 1, 2, 2],
                      "verdict": ["inconsistent"] * 6,
                      "conflicting_claim": [claim, claim, "Olaf sailed toward distant frozen harbours", None,
                                            "Rune stole golden horses yesterday evening",
                                            "Sara painted purple windows carefully"]})
    steps = pl.DataFrame({
        "model": ["m"] * 5, "arch": ["B2"] * 5, "seed_id": ["a", "a", "b", "d", "d"], "step": [1, 2, 1, 1, 2],
        "player_option": ["walk", "wait", "look", "Sara painted purple windows carefully", "x"],
        "intents_json": [json.dumps([{"character_id": "nora", "intent": "burn the silver letter by the river, Nora"}]),
                         json.dumps([{"character_id": "nora", "intent": "Nora burned the silver letter"}]),
                         None, None, None],
        "plan_json": [None, None, None, None, json.dumps({"beats": [{"content": "Rune stole golden horses"}]})],
        "memory_state_json": [None] * 5})
    pa = T.precursor_audit(frame, v, steps, {"consistency_judge_id": CJ})
    traj = {r["seed_id"]: r for r in pa.filter(pl.col("row_kind") == "trajectory").iter_rows(named=True)}
    assert (traj["a"]["origin"], traj["a"]["origin_step"], traj["a"]["persisted"]) == ("character_agent", 1, True)
    assert traj["b"]["origin"] == "none" and traj["c"]["origin"] == "not_localized"
    assert traj["d"]["origin"] == "plurality_tie"             # one vote world_model, one player_intent
    summ = _one(pa, row_kind="summary", scope="all", origin="character_agent")
    assert (summ["n"], summ["pct"], summ["n_persisted"]) == (1, 25.0, 1)
    assert T.precursors.match_score(T.precursors.content_tokens("the cat sat"), "the cat sat") == 0.0


def test_precursor_traces_as_the_paper_counts_them():
    """App. C: "Character-Agent precursors in 89 trajectories, 42 persisting through the World Model;
    27 with only a World-Model precursor" — counted per trajectory, not as a plurality origin."""
    frame = pl.DataFrame({"model": ["m"] * 3, "arch": ["B2+WMOD"] * 3, "seed_id": ["a", "b", "c"],
                          "first_contradiction": [2, 2, 2], "contradiction_observed": [True] * 3})
    claim = "Nora burned the silver letter beside the river"
    v = pl.DataFrame({"judge_config_id": [CJ] * 3, "model": ["m"] * 3, "arch": ["B2+WMOD"] * 3,
                      "seed_id": ["a", "b", "c"], "step": [2, 2, 2], "verdict": ["inconsistent"] * 3,
                      "conflicting_claim": [claim] * 3})
    intent = json.dumps([{"character_id": "nora", "intent": "Nora burned the silver letter by the river"}])
    plan = json.dumps({"beats": [{"content": "Nora burned the silver letter beside the river"}]})
    steps = pl.DataFrame({"model": ["m"] * 4, "arch": ["B2+WMOD"] * 4, "seed_id": ["a", "a", "b", "c"],
                          "step": [1, 2, 1, 1], "player_option": ["walk"] * 4,
                          "intents_json": [intent, None, intent, None],     # a: CA at 1, WM at 2; b: CA only
                          "plan_json": [None, plan, None, plan],            # c: WM only
                          "memory_state_json": [None] * 4})
    pa = T.precursor_audit(frame, v, steps, {"consistency_judge_id": CJ})
    traj = {r["seed_id"]: r for r in pa.filter(pl.col("row_kind") == "trajectory").iter_rows(named=True)}
    assert [(traj[k]["ca_precursor"], traj[k]["ca_through_world_model"], traj[k]["world_model_only"])
            for k in "abc"] == [(True, True, False), (True, False, False), (False, False, True)]
    tr = {r["origin"]: r for r in pa.filter((pl.col("row_kind") == "trace_summary") & (pl.col("scope") == "all"))
          .iter_rows(named=True)}
    assert {k: tr[k]["n"] for k in tr} == {"ca_precursor": 2, "ca_through_world_model": 1, "world_model_only": 1}


# ---- human validation (App. B.5) ---------------------------------------------------------------------------
def test_agreement_statistics_by_hand():
    from wse_platform.wse.tables import validation as V

    t, p, w = ["inconsistent", "inconsistent", "consistent", "consistent"], \
        ["inconsistent", "consistent", "consistent", "consistent"], [1, 1, 2, 1]
    assert V.weighted_accuracy(t, p, w) == pytest.approx(4 / 5)
    assert V.balanced_accuracy(t, p, w) == pytest.approx((1 / 2 + 1) / 2)
    assert V.mean_absolute_error([10, 20], [13, 16]) == 3.5
    assert V.pearson_r([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert V.quadratic_weighted_kappa([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert V.quadratic_weighted_kappa([1, 5], [5, 1]) == pytest.approx(-1.0)


def test_human_validation_table_by_hand():
    up = upstream()
    frame, info = _frame(up)
    cons = pl.DataFrame({"model": ["m1"] * 4, "arch": ["B1", "B2", "B1+WMEM", "B1"],
                         "seed_id": ["s2", "s3", "s2", "s1"],
                         "step": [2, 3, 1, 1], "label": ["inconsistent", "consistent", "inconsistent", "consistent"],
                         "weight": [1.0, 2.0, 1.0, 1.0]})
    rich = pl.DataFrame({"model": ["m1", "m1"], "arch": ["B1", "B1"], "seed_id": ["s2", "s1"],
                         "n_units_non_repetitive": [12, 0], "rating_event_diversity": [3, 1],
                         "rating_character_change": [3, 1], "rating_world_expansion": [3, 1]})
    hv = T.human_validation(cons, rich, up["wse_consistency_steps"], frame, up["wse_richness_verdicts"], info)
    acc = _one(hv, statistic="accuracy")
    assert acc["value"] == pytest.approx(2 / 4) and (acc["n"], acc["n_unmatched"]) == (3, 1)
    assert _one(hv, statistic="balanced_accuracy")["value"] == pytest.approx(0.5)
    # human R: s2 = R70 (same as the judges), s1 = 0 (no units) vs judges' 100
    assert _one(hv, statistic="mae_R")["value"] == pytest.approx(50.0)
    assert _one(hv, statistic="pearson_r_R")["value"] == pytest.approx(-1.0)
    # event diversity: human (3, 1) vs judge medians (3, 5) -> κ_w = 1 - .5/.375
    assert _one(hv, statistic="qwk_event_diversity")["value"] == pytest.approx(1 - 0.5 / 0.375)
    assert _one(hv, statistic="within_one_pct_event_diversity")["value"] == 50.0


def test_human_validation_per_trajectory_with_intervals_bias_single_judges_and_weights():
    """App. B.5 as the paper reports it: trajectory labels (its 120 trajectories) against the panel's
    trajectory verdict, Fig. 8b's one-vs-rest agreement per inconsistency type, 95 % intervals,
    judge bias, single judge vs panel median, design weights on κ and within-one, and where the
    labels came from."""
    up = upstream()
    frame, info = _frame(up)
    cons = pl.DataFrame({"model": ["m1"] * 5, "arch": ["B1", "B2", "B2", "B2", "B1+WMEM"],
                         "seed_id": ["s2", "s3", "s1", "s2", "s2"], "step": [None] * 5,
                         "label": ["inconsistent", "consistent", "consistent", "inconsistent", "inconsistent"],
                         "category": ["temporal", None, None, "temporal", "identity"],
                         "weight": [1.0, 2.0, 1.0, 1.0, 1.0]}, schema_overrides={"step": pl.Int64})
    rich = pl.DataFrame({"model": ["m1", "m1"], "arch": ["B1", "B1"], "seed_id": ["s2", "s1"],
                         "n_units_non_repetitive": [12, 0], "rating_event_diversity": [3, 1],
                         "rating_character_change": [3, 1], "rating_world_expansion": [3, 1], "weight": [3.0, 1.0]})
    hv = T.human_validation(cons, rich, up["wse_consistency_steps"], frame, up["wse_richness_verdicts"], info,
                            labels="shipped example labels")
    acc = _one(hv, study="consistency_trajectory", statistic="accuracy")
    # B2 s2 was censored (no trajectory verdict): unmatched; the rest: 1 + 0·2 + 1 + 1 of weight 5
    assert (acc["n"], acc["n_unmatched"]) == (4, 1) and acc["value"] == pytest.approx(3 / 5)
    assert acc["value_lo"] is not None and acc["value_lo"] <= acc["value"] <= acc["value_hi"]
    assert _one(hv, statistic="one_vs_rest_temporal")["value"] == pytest.approx(3 / 5)
    assert _one(hv, statistic="one_vs_rest_identity")["value"] == pytest.approx(4 / 5)
    # richness, design-weighted: s2 (weight 3) human = panel = R70; s1 (weight 1) human 0 vs panel 100
    assert _one(hv, statistic="bias_R")["value"] == pytest.approx(100 / 4)
    assert _one(hv, statistic="mae_R")["value"] == pytest.approx(100 / 4)
    # single judges: judge 0 rated s1 5/5/5 (R 100), judge 2 rated it 1/1/1 (R 0) = the human
    assert _one(hv, statistic="mae_R_judge_0")["value"] == pytest.approx(100 / 4)
    assert _one(hv, statistic="mae_R_judge_2")["value"] == pytest.approx(0.0)
    assert _one(hv, statistic="within_one_pct_event_diversity")["value"] == pytest.approx(75.0)   # weighted
    assert set(hv["labels"].to_list()) == {"shipped example labels"}


def test_shipped_example_labels_are_readable():
    from pathlib import Path

    cons, rich = T.read_labels(Path(T.__file__).resolve().parents[1] / "human_labels_example")
    assert set(T.validation.CONSISTENCY_LABEL_COLUMNS) <= set(cons.columns) and cons.height >= 3
    assert set(T.validation.RICHNESS_LABEL_COLUMNS) <= set(rich.columns) and rich.height >= 3
    assert not math.isnan(cons["weight"].sum())


def test_table9_rows_carry_bootstrap_intervals():
    frame, info = _frame(upstream())
    ac = T.architecture_contrasts(frame, info, T.TableParams(bootstrap_draws=60, bootstrap_seed=5,
                                                               consistency_judge_id=CJ, richness_judge_id=RJ))
    per_model = _one(ac, scope="model_base_conditional", model="m1", base_level="B1", contrast="WMEM on-off")
    group = _one(ac, scope="base_conditional", base_level="B1", contrast="WMEM on-off")
    for m in ("G", "C_obs", "R"):     # one model: the model's row equals the group's, draws included
        assert per_model[f"delta_{m}"] == pytest.approx(group[f"delta_{m}"])
        assert per_model[f"delta_{m}_lo"] == pytest.approx(group[f"delta_{m}_lo"])
    # WMEM at B1 by hand: G = 100·(2+3+3+3)/12 − 100·(3+3+1+1)/12 = 25
    assert per_model["delta_G"] == pytest.approx(25.0)
    assert per_model["delta_G_lo"] <= per_model["delta_G"] <= per_model["delta_G_hi"]
