"""Judge aggregation (2-of-3 majority, uncertain votes, censoring, T_inc), blinding, and cell runners."""
from __future__ import annotations

import json
import re

import polars as pl
import pytest
from pydantic import ValidationError

from tests.wse._wse_sim_helpers import make_client, make_seed, make_settings, prompt_text, seed_tag
from wse_platform.warehouse import Warehouse
from wse_platform.wse.judges import (
    JudgedTrajectory,
    NarratedStep,
    aggregate_step,
    blinded_view,
    consistency_request,
    consistency_tables_from_verdicts,
    first_contradiction,
    judge_consistency,
    judge_richness,
    judged_trajectories,
    richness_request,
)
from wse_platform.wse.schemas import ConsistencyVerdict, consistency_verdict_model, richness_verdict_model

C, I, U = "consistent", "inconsistent", "uncertain"


def vote(verdict: str, category: str = "character-state", source: str = "narrative", prior_step: int | None = 1):
    if verdict != I:
        return ConsistencyVerdict(verdict=verdict)
    return ConsistencyVerdict(verdict=I, prior_fact="Nora is well", prior_source=source,
                              prior_step=prior_step if source == "narrative" else None,
                              conflicting_claim="Nora is dead", exclusion_reason="dead vs well",
                              missing_transition="no death is narrated", category=category)


# ---- hand-made aggregation cases ---------------------------------------------------------
@pytest.mark.parametrize("votes, majority, counts", [
    ([C, C, C], C, (3, 3, 0, 0)),
    ([C, C, I], C, (3, 2, 1, 0)),
    ([I, I, C], I, (3, 1, 2, 0)),
    ([C, C, U], C, (3, 2, 0, 1)),          # uncertain kept, majority still 2 of 3
    ([C, I, U], None, (3, 1, 1, 1)),       # split: no valid majority
    ([C, U, U], None, (3, 1, 0, 2)),       # uncertain never forms a majority
    ([C, None, I], None, (2, 1, 1, 0)),    # a failed judge
    ([I, I, None], None, (2, 0, 2, 0)),    # a missing judge: no binary verdict (paper §5.1), even 2 agreeing
    ([None, None, None], None, (0, 0, 0, 0)),
])
def test_aggregate_step_two_of_three(votes, majority, counts):
    agg = aggregate_step([vote(v) if v else None for v in votes], judge_count=3, step=2)
    assert agg["majority"] == majority
    assert (agg["n_valid_votes"], agg["n_consistent"], agg["n_inconsistent"], agg["n_uncertain"]) == counts


def test_category_and_source_need_two_agreeing_inconsistent_votes():
    agg = aggregate_step([vote(I, "temporal", "opening"), vote(I, "temporal", "narrative", 3), vote(C)], 3, step=3)
    assert agg["category_majority"] == "temporal" and agg["prior_source_majority"] is None
    agg = aggregate_step([vote(I, "temporal", "narrative", 1), vote(I, "identity", "narrative", 2), vote(I)], 3, 3)
    assert agg["majority"] == I and agg["category_majority"] is None          # 1 temporal, 1 identity, 1 char-state
    assert agg["prior_source_majority"] == "earlier_narrative"                # steps 1, 2, 1 < 3
    agg = aggregate_step([vote(I, prior_step=3), vote(I, prior_step=3), vote(C)], 3, step=3)
    assert agg["prior_source_majority"] == "current_narrative"
    agg = aggregate_step([vote(C), vote(C), vote(I, "temporal")], 3, step=3)
    assert agg["category_majority"] is None                                   # no inconsistent majority


@pytest.mark.parametrize("majorities, length, expected", [
    ([C, C, C], 3, (None, None, None)),
    ([C, I], 3, (2, None, None)),
    ([I], 4, (1, None, None)),
    ([C, C, None], 5, (None, 2, "no_majority")),
    ([None], 2, (None, 0, "no_majority")),
    ([], 0, (None, None, None)),
])
def test_first_contradiction_and_censoring(majorities, length, expected):
    r = first_contradiction(majorities, length)
    assert (r["first_contradiction"], r["censored_at"], r["censor_reason"]) == expected and r["length"] == length


def test_inconsistent_verdict_schema_rules():
    with pytest.raises(ValidationError, match="must give"):
        ConsistencyVerdict(verdict=I, prior_fact="x", prior_source="opening", conflicting_claim="y",
                           exclusion_reason="z", missing_transition="w")                    # no category
    m3 = consistency_verdict_model(3)
    ok = dict(verdict=I, prior_fact="x", prior_source="narrative", prior_step=2, conflicting_claim="y",
              exclusion_reason="z", missing_transition="w", category="temporal")
    assert m3(**ok).prior_step == 2
    with pytest.raises(ValidationError):
        m3(**{**ok, "prior_step": 4})                          # after the judged step
    with pytest.raises(ValidationError, match="needs prior_step"):
        m3(**{**ok, "prior_step": None})
    with pytest.raises(ValidationError, match="only for prior_source"):
        m3(**{**ok, "prior_source": "initial_world"})
    with pytest.raises(ValidationError):
        m3(**{**ok, "category": "vibes"})
    assert m3(verdict=C).verdict == C and m3(verdict=U).verdict == U   # details optional otherwise


def test_richness_units_must_cite_narrated_steps():
    m = richness_verdict_model(2)
    base = {"rating_event_diversity": 3, "rating_character_change": 2, "rating_world_expansion": 1}
    unit = {"step": 2, "kind": "event", "repetitive": False, "evidence": "q", "description": "d"}
    assert len(m(units=[unit], **base).units) == 1
    with pytest.raises(ValidationError):
        m(units=[{**unit, "step": 3}], **base)
    with pytest.raises(ValidationError):
        m(units=[], **{**base, "rating_world_expansion": 6})


# ---- blinded view ------------------------------------------------------------------------
SECRET_MODEL = "secret-model-xyz"
SECRET_ARCH = "B3+WMEM+WMOD"


def trajectory(tag: str, n: int, family: str = "smallville", model: str = SECRET_MODEL) -> JudgedTrajectory:
    seed = make_seed(tag, family=family)
    steps = tuple(NarratedStep(step=k, player_action=f"ACTION {tag} {k}", narrative=f"NARR {tag} {k}")
                  for k in range(1, n + 1))
    return JudgedTrajectory(model=model, arch=SECRET_ARCH, seed=seed, steps=steps, generation_version="gv-123")


def test_blinded_view_reveals_no_condition(tmp_path):
    settings = make_settings(tmp_path)
    judge = settings.wse.consistency_judge
    forbidden = [SECRET_MODEL, "B3", "WMEM", "WMOD", "smallville", "dracor", "itp", "seed-A", "world-A", "gv-123",
                 "selection", "source_ref", "memory", "failure"]
    for family in ("smallville", "dracor", "itp"):
        t = trajectory("A", 3, family=family)
        view = blinded_view(t.seed, t.steps)
        assert set(view) == {"language", "initial_world", "opening", "steps"}
        texts = [json.dumps(view)]
        texts += [prompt_text(consistency_request(settings, judge, t, k, j)) for k in (1, 3) for j in range(3)]
        texts += [prompt_text(richness_request(settings, settings.wse.richness_judge, t, 0))]
        for text in texts:
            for word in forbidden:
                assert not re.search(rf"\b{re.escape(word)}\b", text, re.I), (family, word)
        assert "NARR A 3" in texts[-1] and "ACTION A 1" in texts[-1]


def test_consistency_request_shows_only_steps_up_to_the_judged_one(tmp_path):
    settings = make_settings(tmp_path)
    t = trajectory("A", 3)
    text = prompt_text(consistency_request(settings, settings.wse.consistency_judge, t, 2, 0))
    assert "NARR A 1" in text and "CURRENT step 2" in text and "NARR A 2" in text and "NARR A 3" not in text
    seeds = {consistency_request(settings, settings.wse.consistency_judge, t, 2, j).sampling.seed for j in range(3)}
    assert len(seeds) == 3   # distinct sampling seeds per judge index


# ---- cell runners through the real client ------------------------------------------------
def consistency_script(plan: dict[tuple[str, int], list[str]]):
    """Answer judge j on (seed tag, step) with plan[(tag, step)][j]; 'bad' = invalid output."""
    def answer(call) -> str:
        text = prompt_text(call)
        step = int(re.search(r"CURRENT step (\d+):", text).group(1))
        j = call.sampling.seed // 1000 - 1
        label = plan[(seed_tag(text), step)][j]
        if label == "bad":
            return "{not json"
        if label == I:
            return vote(I, prior_step=step).model_dump_json()
        return json.dumps({"verdict": label})
    return answer


def test_judge_consistency_cell(tmp_path):
    settings = make_settings(tmp_path)
    trajs = [trajectory("A", 3), trajectory("B", 3), trajectory("C", 4), trajectory("D", 0)]
    plan = {
        ("A", 1): [C, C, U], ("A", 2): [I, I, C], ("A", 3): [C, C, C],       # T_inc = 2; step 3 never judged
        ("B", 1): [C, C, C], ("B", 2): [C, U, U], ("B", 3): [C, C, C],       # no majority at 2 -> censored at 1
        ("C", 1): [C, C, C], ("C", 2): [C, "bad", C], ("C", 3): [C, I, C], ("C", 4): [C, C, I],
    }                                                                    # C: a missing judge at 2 -> censored at 1
    client, backend = make_client(settings, consistency_script(plan), model="judge")
    out = judge_consistency(client, settings, settings.wse.consistency_judge, trajs)
    tc = {r["seed_id"]: r for r in out.trajectories.iter_rows(named=True)}
    assert (tc["seed-A"]["first_contradiction"], tc["seed-A"]["censored_at"], tc["seed-A"]["judged_steps"]) == (2, None, 2)
    assert (tc["seed-B"]["first_contradiction"], tc["seed-B"]["censored_at"], tc["seed-B"]["censor_reason"]) == \
        (None, 1, "no_majority")
    assert (tc["seed-C"]["first_contradiction"], tc["seed-C"]["censored_at"], tc["seed-C"]["judged_steps"],
            tc["seed-C"]["censor_reason"]) == (None, 1, 2, "missing_judge")
    assert (tc["seed-D"]["length"], tc["seed-D"]["judged_steps"], tc["seed-D"]["first_contradiction"]) == (0, 0, None)
    # one batch of 3 judges per trajectory and step (A, B, C at steps 1-2; none later; each trajectory
    # on its own); the invalid judge of (C, 2) is retried twice more in two extra batches of one call
    assert sorted(len(b) for b in backend.batches) == [1, 1, 3, 3, 3, 3, 3, 3]
    v = out.verdicts
    assert v.height == 3 * (2 + 2 + 2)
    failed = v.filter(pl.col("verdict").is_null())
    assert failed.height == 1 and failed["seed_id"].item() == "seed-C" and failed["step"].item() == 2
    assert json.loads(failed["failure_json"].item())["attempts"] == 3
    assert v.filter(pl.col("verdict") == U).height == 3            # uncertain votes are kept
    bad = v.filter((pl.col("seed_id") == "seed-A") & (pl.col("step") == 2) & (pl.col("verdict") == I))
    assert bad.height == 2 and set(bad["category"]) == {"character-state"} and set(bad["prior_step"]) == {2}
    steps = out.steps.filter(pl.col("seed_id") == "seed-A").sort("step")
    assert steps["majority"].to_list() == [C, I]
    assert steps["category_majority"].to_list() == [None, "character-state"]
    assert steps["prior_source_majority"].to_list() == [None, "current_narrative"]
    assert out.steps.filter(pl.col("seed_id") == "seed-C")["n_valid_votes"].to_list() == [3, 2]
    assert out.steps.filter(pl.col("seed_id") == "seed-C")["no_verdict_reason"].to_list() == [None, "missing_judge"]

    # the derived tables rebuilt from the stored votes equal the judging loop's own aggregation
    stored = pl.DataFrame({"model": [SECRET_MODEL] * 4, "arch": [SECRET_ARCH] * 4,
                           "seed_id": [t.seed.seed_id for t in trajs], "length": [t.length for t in trajs],
                           "generation_version": ["gv-123"] * 4})
    steps2, trajs2 = consistency_tables_from_verdicts(out.verdicts, stored, settings.wse.consistency_judge)
    assert steps2.sort("seed_id", "step").equals(out.steps.sort("seed_id", "step"))
    assert trajs2.sort("seed_id").equals(out.trajectories.sort("seed_id"))
    with pytest.raises(ValueError, match="another generation"):
        consistency_tables_from_verdicts(out.verdicts, stored.with_columns(generation_version=pl.lit("new")),
                                         settings.wse.consistency_judge)
    partial = out.verdicts.filter(~((pl.col("seed_id") == "seed-A") & (pl.col("step") == 2)))
    with pytest.raises(ValueError, match="seed seed-A .* stops at step 1"):
        consistency_tables_from_verdicts(partial, stored, settings.wse.consistency_judge)
    with pytest.raises(ValueError, match="judge indices"):
        consistency_tables_from_verdicts(partial.filter(pl.col("judge_index") != 1), stored,
                                         settings.wse.consistency_judge)

    wh = Warehouse(tmp_path / "wh.duckdb")
    key = {"model": SECRET_MODEL, "arch": SECRET_ARCH, "judge_config_id": "wse.consistency_judge:judge:v1:x3"}
    assert out.verdicts["judge_config_id"][0] == key["judge_config_id"]
    wh.replace_partition("wse_consistency_verdicts", out.verdicts, key)
    wh.replace_partition("wse_consistency_steps", out.steps, key)
    wh.replace_partition("wse_trajectory_consistency", out.trajectories, key)
    assert wh.query("SELECT count(*) AS n FROM wse_consistency_verdicts")["n"].item() == 18


def test_judge_richness_cell(tmp_path):
    settings = make_settings(tmp_path)
    trajs = [trajectory("A", 2), trajectory("B", 0), trajectory("C", 1)]

    def answer(call) -> str:
        text = prompt_text(call)
        j = call.sampling.seed // 1000 - 1
        if seed_tag(text) == "C" and j == 1:
            return '{"units": [], "rating_event_diversity": 9}'          # invalid rating
        units = [{"step": 1, "kind": "event", "repetitive": False, "evidence": "narr A 1", "description": "x"},
                 {"step": 2, "kind": "story_thread", "repetitive": True, "evidence": "not in text", "description": "y"},
                 {"step": 2, "kind": "world_or_social_element", "repetitive": False, "evidence": "NARR A 2",
                  "description": "z"}]
        return json.dumps({"units": units if seed_tag(text) == "A" else units[:1],
                           "rating_event_diversity": 1 + j, "rating_character_change": 2, "rating_world_expansion": 3})

    client, _ = make_client(settings, answer, model="judge")
    df = judge_richness(client, settings, settings.wse.richness_judge, trajs).sort("seed_id", "judge_index")
    assert df.height == 6 and set(df["seed_id"]) == {"seed-A", "seed-C"}        # L = 0 is not judged
    a = df.filter(pl.col("seed_id") == "seed-A")
    assert a["n_units_non_repetitive"].to_list() == [2, 2, 2]
    assert a["rating_event_diversity"].to_list() == [1, 2, 3] and a["observed_steps"].to_list() == [2, 2, 2]
    assert [u["evidence_found"] for u in json.loads(a["units_json"][0])] == [True, False, True]
    c1 = df.filter((pl.col("seed_id") == "seed-C") & (pl.col("judge_index") == 1))
    assert c1["rating_event_diversity"].item() is None and c1["failure_json"].item() is not None
    Warehouse(tmp_path / "wh.duckdb").replace_partition(
        "wse_richness_verdicts", df.filter(pl.col("seed_id") == "seed-A"),
        {"model": SECRET_MODEL, "arch": SECRET_ARCH, "judge_config_id": df["judge_config_id"][0]})


def test_judged_trajectories_from_stored_rows():
    seeds = {"seed-A": make_seed("A")}
    steps = pl.DataFrame({"seed_id": ["seed-A"] * 3, "step": [2, 1, 3], "player_option": ["p2", "p1", "p3"],
                          "narrative": ["n2", "n1", None]})
    trajs = pl.DataFrame({"model": ["m"], "arch": ["B1"], "seed_id": ["seed-A"], "length": [2],
                          "generation_version": ["g"]})
    (t,) = judged_trajectories(steps, trajs, seeds)
    assert [(s.step, s.player_action, s.narrative) for s in t.steps] == [(1, "p1", "n1"), (2, "p2", "n2")]
    with pytest.raises(ValueError, match="length 3"):
        judged_trajectories(steps, trajs.with_columns(pl.lit(3).alias("length")), seeds)
    with pytest.raises(ValueError, match="not in wse_episode_seeds"):
        judged_trajectories(steps, trajs, {})
