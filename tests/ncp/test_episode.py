"""Loop semantics of NCP-Bench episodes on scripted outputs, through the real LLM client.

Each test scripts the outputs per role (a queue per role; the last entry repeats) and checks
what the loop did with them and what each role was asked.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.ncp._ncp_helpers import (NO_CONFLICT, NODE_NO, NODE_YES, PLAYER, Recorder, Script, conflicts_json,
                                    diff, make_spec, node, review, statuses, text_of)
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend  # noqa: F401
from wse_platform.ncp.episode import (ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK,
                                      ROLE_FACT_UPDATE, ROLE_NARRATOR, ROLE_NODE_UPDATE, ROLE_OPENING, Architecture,
                                      AuditorSetup, EpisodeSetup, run_episodes)

FACT_CONFLICT = conflicts_json(("fact", "f_0", "the locked vault is described as open"))


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def run(settings, script: Script, t_max: int = 3, arch: str = "baseline+adversarial", specs=None, count: int = 1):
    backend = ScriptedBackend(script)
    client = Recorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse(arch), player_model="player",
                         auditor=AuditorSetup("aud", "v1", count), t_max=t_max)
    result = run_episodes(client, specs or [make_spec()], setup)
    backend.recorder = client  # requests with their tags (backend.calls counts retries too)
    return result, backend


def roles(backend) -> Counter:
    return Counter(c.role for c in backend.calls)


def calls_of(backend, role, turn=None):
    return backend.recorder.of(role, turn)


def test_one_turn_runs_the_roles_in_algorithm_1_order_and_each_gets_its_inputs(settings):
    """The done-test of issue 10: for turn 1, narrator → fact update → conflict check →
    double-check → node update → commitment status, and every role's request carries the
    inputs the paper lists for it."""
    spec = make_spec()
    script = Script(ncp__fact_update=[diff(add=["A portrait hangs above the hall fireplace."]),
                                      diff(add=["Lane holds a brass lamp."], negate=["f_1"])],
                    ncp__conflict_check=[conflicts_json(("player_input", "input", "the lamp request is ignored"))],
                    ncp__conflict_double_check=[review(reason="overturned: the response answers the request")])
    result, backend = run(settings, script, t_max=1)
    order = [r.role for r in backend.recorder.requests if r.tags.get("turn") == "1"]
    assert order == [PLAYER, ROLE_NARRATOR, ROLE_FACT_UPDATE, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK,
                     ROLE_NODE_UPDATE, ROLE_COMMITMENT_STATUS]
    assert [r.role for r in backend.recorder.requests if r.tags.get("turn") == "0"] == [ROLE_OPENING,
                                                                                          ROLE_FACT_UPDATE]

    opening, narration, player_input = "You stand in the hall of the manor.", "You stand in the hall.", \
        "I try move number 1."
    every_node = [x for n in spec.trajectory for x in (n.id, n.description, n.trigger_event, n.key_delta)]
    conditions = [x for c in spec.commitments for x in (c.id, c.type, c.satisfaction_condition, c.violation_condition)]
    f0 = [f.content for f in spec.initial_facts if not f.negated]
    opening_fact, turn_fact = "A portrait hangs above the hall fireplace.", "Lane holds a brass lamp."

    def has(role, *needles, absent=()):
        (call,) = calls_of(backend, role, 1)
        text = text_of(call)
        missing = [n for n in needles if n not in text]
        assert not missing, f"{role} request lacks {missing}"
        assert not [a for a in absent if a in text], f"{role} request must not contain {absent}"

    # the narrator: player role, full R, commitments with conditions, pre-turn facts, pending
    # (opening) fact updates, earlier narration, the input and the staged node-first directive
    current = [spec.trajectory[0].id, spec.trajectory[0].description, spec.trajectory[0].trigger_event,
               spec.trajectory[0].key_delta]
    later = [spec.trajectory[1].description, spec.trajectory[1].trigger_event, spec.trajectory[1].key_delta]
    has(ROLE_NARRATOR, "Detective Lane", *current, *conditions, *f0, opening_fact, opening, player_input,
        "three stages", absent=later)  # the current node only, as the reference narrator
    has(ROLE_FACT_UPDATE, "Detective Lane", *f0, opening_fact, narration)  # pre-turn facts include the opening's
    # the conflict check: candidate ΔF_t, the text of every node, current node, pre-turn facts,
    # commitments with conditions, system history, player input, the response and the player role
    has(ROLE_CONFLICT_CHECK, "Detective Lane", turn_fact, "f_1: The butler hides a silver key in his coat.",
        *every_node, *conditions, *f0, opening_fact, opening, player_input, narration)
    has(ROLE_DOUBLE_CHECK, "Detective Lane", turn_fact, *every_node, *conditions, *f0, opening, player_input,
        narration, "the lamp request is ignored")
    # node update: facts after the turn, the whole history (opening + turn 1), current node
    has(ROLE_NODE_UPDATE, "Detective Lane", turn_fact, opening_fact, opening, player_input, narration,
        "s_0", spec.trajectory[0].trigger_event, spec.trajectory[0].key_delta,
        absent=["The butler hides a silver key in his coat.",  # negated by turn 1
                spec.trajectory[0].description])  # trigger and delta only, as the reference's node check
    has(ROLE_COMMITMENT_STATUS, "Detective Lane", turn_fact, opening, player_input, narration,
        *[n.description for n in spec.trajectory], *[x for c in spec.commitments
                                                      for x in (c.id, c.satisfaction_condition)],
        absent=[c.violation_condition for c in spec.commitments])  # no violation conditions, as the reference
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL"


def test_full_trajectory_for_the_narrator_is_a_named_option_not_the_default(settings):
    spec = make_spec()
    later = spec.trajectory[1].key_delta
    _, backend = run(settings, Script(), t_max=1)
    assert later not in text_of(calls_of(backend, ROLE_NARRATOR, 1)[0])
    backend2 = ScriptedBackend(Script())
    client = Recorder(LLMClient(settings, backends={"narr": backend2, "player": backend2, "aud": backend2},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=1, narrator_trajectory="full")
    run_episodes(client, [spec], setup)
    text = text_of(client.of(ROLE_NARRATOR, 1)[0])
    assert later in text and "Full reference trajectory" in text
    cfg = settings_from_dict({"ncp": {"narrator_trajectory": "full"}})
    assert cfg.ncp.narrator_trajectory == "full" and settings.ncp.narrator_trajectory == "current_node"


def test_confirmed_conflict_ends_the_episode_and_discards_the_updates(settings):
    script = Script(ncp__fact_update=[diff(add=["The study is lit."]), diff(add=["The vault is open."],
                                                                             negate=["f_0"])],
                    ncp__conflict_check=[FACT_CONFLICT],
                    ncp__conflict_double_check=[review(("fact", "f_0", "f_0 says locked"), reason="stands")])
    result, backend = run(settings, script, t_max=5)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["turns"] == 1 and ep["conflict_kinds"] == ["fact"]
    run_ = result.runs[0]
    # neither the turn's diff nor the pending opening updates were applied
    assert run_.ledger.get("f_0").active and [f.id for f in run_.ledger.all()] == ["f_0", "f_1", "f_2"]
    row = result.turn_rows()[-1]
    assert row["outcome"] == "CONFLICT"
    d = json.loads(row["fact_diff_json"])
    assert d["discarded"] is True and d["applied"] is None
    report = json.loads(row["conflict_report_json"])
    assert report["double_checked"] and report["confirmed"] and report["review_reason"] == "stands"
    assert report["counts"] == {"fact": 1, "commitment": 0, "player_input": 0}
    r = roles(backend)
    assert r[ROLE_NODE_UPDATE] == 0 and r[ROLE_COMMITMENT_STATUS] == 0 and r[PLAYER] == 1
    assert len(row["llm_call_ids"]) == 5  # player, narrator, diff, check, double-check


def test_double_check_can_overturn_and_the_turn_is_applied_with_the_opening_updates(settings):
    script = Script(ncp__fact_update=[diff(add=["A portrait hangs in the hall."]),
                                      diff(add=["Lane holds a lamp."], negate=["f_0"])],
                    ncp__conflict_check=[conflicts_json(("player_input", "input", "ignored")), NO_CONFLICT],
                    ncp__conflict_double_check=[review(reason="the world blocked it with a reason")])
    result, backend = run(settings, script, t_max=2)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 2 and ep["conflict_kinds"] == []
    ledger = result.runs[0].ledger
    assert ledger.get("f_3").content == "A portrait hangs in the hall." and ledger.get("f_3").added_turn == 0
    assert ledger.get("f_4").content == "Lane holds a lamp." and ledger.get("f_4").added_turn == 1
    assert not ledger.get("f_0").active and ledger.get("f_0").negated_turn == 1
    row1 = result.turn_rows()[1]
    report = json.loads(row1["conflict_report_json"])
    assert report["double_checked"] and not report["confirmed"] and report["kept"] == []
    assert json.loads(row1["fact_diff_json"])["opening_applied"]["added"] == ["f_3"]
    assert roles(backend)[ROLE_DOUBLE_CHECK] == 1


def test_double_check_reviews_the_whole_report_and_can_narrow_and_relabel_it(settings):
    initial = conflicts_json(("fact", "f_0", "vault open"), ("player_input", "input", "ignored"))
    script = Script(ncp__conflict_check=[initial],
                    ncp__conflict_double_check=[review(("commitment", "c_1", "vault opened before s_0"),
                                                       reason="corrected: an ordering breach, not a fact")])
    result, backend = run(settings, script, t_max=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["conflict_kinds"] == ["commitment"]
    (call,) = calls_of(backend, ROLE_DOUBLE_CHECK)
    assert call.n == 1 and "vault open" in text_of(call) and "ignored" in text_of(call)
    assert "The vault door is locked." in text_of(call)  # the initial report with its resolved targets
    report = json.loads(result.turn_rows()[-1]["conflict_report_json"])
    assert [c["target_id"] for c in report["conflicts"]] == ["f_0", "input"]
    assert [c["target_id"] for c in report["kept"]] == ["c_1"]


def test_count_three_keeps_each_conflict_by_majority_of_reviews(settings):
    initial = conflicts_json(("fact", "f_0", "a"), ("commitment", "c_1", "b"))
    script = Script(ncp__conflict_check=[initial],
                    ncp__conflict_double_check=[review(("fact", "f_0", "x"), ("commitment", "c_1", "y")),
                                                review(("fact", "f_0", "z")), review()])
    result, backend = run(settings, script, t_max=3, count=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["conflict_kinds"] == ["fact"]  # c_1 kept by 1 of 3
    assert ep["auditor_id"] == "ncp.auditor:aud:v1:x3"
    (call,) = calls_of(backend, ROLE_DOUBLE_CHECK)
    assert call.n == 3


def test_no_majority_means_no_conflict(settings):
    script = Script(ncp__conflict_check=[FACT_CONFLICT, NO_CONFLICT],
                    ncp__conflict_double_check=[review(("fact", "f_0", "x")), review(), review()])
    result, _ = run(settings, script, t_max=2, count=3)
    assert result.episode_rows()[0]["termination"] == "SURVIVAL"


def test_node_advances_only_when_trigger_and_delta_occurred(settings):
    script = Script(ncp__node_update=[node(True, False), node(False, True), NODE_YES, NODE_NO])
    result, _ = run(settings, script, t_max=4)
    rows = result.turn_rows()
    assert [(r["node_before"], r["node_after"]) for r in rows[1:]] == [
        ("s_0", "s_0"), ("s_0", "s_0"), ("s_0", "s_1"), ("s_1", "s_1")]
    (ep,) = result.episode_rows()
    assert ep["nodes_completed"] == 1 and ep["trajectory_progress"] == pytest.approx(0.5)


def test_node_update_sees_turns_from_before_the_current_stage(settings):
    """Evidence for node i+1 in the turn that completed node i must be visible."""
    script = Script(ncp__narrator=['{"text": "The butler drops a key; you grab it and turn it in the vault."}',
                                   '{"text": "Dust settles."}'],
                    ncp__node_update=[NODE_YES, NODE_NO])
    _, backend = run(settings, script, t_max=2)
    (turn2,) = calls_of(backend, ROLE_NODE_UPDATE, 2)
    assert "turn it in the vault" in text_of(turn2) and "s_1" in text_of(turn2)


def test_statuses_are_replaced_each_turn_without_evidence_filters(settings):
    script = Script(ncp__commitment_status=[statuses(satisfied=["c_1"]), statuses(),
                                            statuses(satisfied=["c_0", "c_1"])])
    result, backend = run(settings, script, t_max=5)
    rows = result.turn_rows()
    assert json.loads(rows[1]["commitment_status_json"])["statuses"]["c_1"]["status"] == "SATISFIED"
    assert json.loads(rows[2]["commitment_status_json"])["statuses"]["c_1"]["status"] == "PENDING"
    (ep,) = result.episode_rows()
    # the reason cites no node that occurred and no new fact: no filter rejects it
    assert ep["termination"] == "SUCCESS" and ep["turns"] == 3 and ep["commitments_satisfied"] == 2
    for call in calls_of(backend, ROLE_COMMITMENT_STATUS):  # every commitment is re-assessed each turn
        assert "c_0" in text_of(call) and "c_1" in text_of(call)


def test_a_status_list_missing_a_commitment_leaves_the_episode_without_a_result(settings):
    script = Script(ncp__commitment_status=[statuses(ids=("c_0",))])
    result, backend = run(settings, script, t_max=2)
    assert result.episode_rows() == [] and result.turn_rows() == []
    (f,) = result.failed_rows()
    assert f["role"] == ROLE_COMMITMENT_STATUS and f["error_kind"] == "schema_violation" and f["turn"] == 1
    assert "missing ['c_1']" in f["message"] and roles(backend)[ROLE_COMMITMENT_STATUS] == 3


def test_a_contradiction_of_the_opening_is_a_detectable_fact_conflict(settings):
    script = Script(ncp__fact_update=[diff(add=["The hall lamps are out."]), diff()],
                    ncp__conflict_check=[conflicts_json(("fact", "f_3", "the lamps now blaze"))],
                    ncp__conflict_double_check=[review(("fact", "f_3", "opening said the lamps are out"))])
    result, backend = run(settings, script, t_max=2)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["conflict_kinds"] == ["fact"]
    (check,) = calls_of(backend, ROLE_CONFLICT_CHECK, 1)
    assert "f_3: The hall lamps are out." in text_of(check)
    (review_call,) = calls_of(backend, ROLE_DOUBLE_CHECK, 1)
    assert "The hall lamps are out." in text_of(review_call)


def test_word_limits_are_statistics_not_validity(settings):
    long = json.dumps({"text": " ".join(["word"] * 170)})
    script = Script(ncp__narrator=[long])
    result, _ = run(settings, script, t_max=2)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL"
    assert ep["narrator_over_limit"] == 2 and ep["narrator_responses"] == 3 and ep["player_over_limit"] == 0
    assert [r["narrator_words"] for r in result.turn_rows()] == [8, 170, 170]


def test_player_answers_in_plain_text_and_a_repeat_is_not_rejected(settings):
    script = Script(ncp__player_adversarial=["I accuse the butler!"])
    result, backend = run(settings, script, t_max=2)
    assert [r["player_input"] for r in result.turn_rows()[1:]] == ["I accuse the butler!"] * 2
    assert roles(backend)[PLAYER] == 2
    assert all(c.json_schema is None for c in backend.calls if c.role == PLAYER)


def test_survival_at_t_max(settings):
    result, backend = run(settings, Script(), t_max=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 3 and ep["invalid_role"] is None
    assert [r["turn"] for r in result.turn_rows()] == [0, 1, 2, 3]
    assert roles(backend)[ROLE_NARRATOR] == 3 and roles(backend)[ROLE_OPENING] == 1


def test_a_call_failing_after_retries_leaves_no_result_not_an_invalid_episode(settings):
    """As in the reference (its runner writes no result file for such an episode): the episode is in no
    denominator; it is listed with the role and the reason, next to the episodes that have a result."""
    script = Script(ncp__narrator=["not json at all"])
    spec_ok, spec_bad = make_spec("m0"), make_spec("m1")
    result, backend = run(settings, Script(), t_max=2, specs=[spec_ok])
    assert [e["termination"] for e in result.episode_rows()] == ["SURVIVAL"] and result.failed_rows() == []
    result, backend = run(settings, script, t_max=3, specs=[spec_ok, spec_bad])
    assert result.episode_rows() == [] and result.turn_rows() == []
    assert [(f["spec_id"], f["role"], f["error_kind"], f["turn"]) for f in result.failed_rows()] == [
        ("m0", ROLE_NARRATOR, "invalid_json", 1), ("m1", ROLE_NARRATOR, "invalid_json", 1)]
    assert all("INVALID" not in str(r) for r in result.failed_rows())
    assert roles(backend)[ROLE_NARRATOR] == 3  # three attempts (the two identical prompts share each call)


def test_a_player_input_cut_by_the_token_cap_is_kept_as_the_reference_keeps_it(settings):
    """The reference checks a player input only for being non-empty; our stricter `truncated` check
    stays on the JSON roles, where a cut answer is invalid there too."""
    _, backend = run(settings, Script(), t_max=1)
    assert calls_of(backend, PLAYER, 1)[0].allow_truncated is True
    assert calls_of(backend, ROLE_NARRATOR, 1)[0].allow_truncated is False


def test_player_sees_only_the_visible_transcript(settings):
    spec = make_spec()
    secret = [f.content for f in spec.initial_facts] + [c.description for c in spec.commitments] + \
             [x for n in spec.trajectory for x in (n.description, n.trigger_event, n.key_delta)]
    _, backend = run(settings, Script(ncp__narrator=['{"text": "You stand in a dusty hall."}']), t_max=2)
    player_calls = calls_of(backend, PLAYER)
    assert len(player_calls) == 2
    for call in player_calls:
        text = text_of(call)
        assert "Detective Lane" in text and "You stand in the hall of the manor." in text
        assert not [s for s in secret if s in text]
        assert "f_0" not in text and "c_0" not in text and "s_0" not in text
    assert "You stand in a dusty hall." in text_of(player_calls[1])


def test_episodes_of_a_cell_flow_one_batch_per_stage_per_episode(settings):
    backend = ScriptedBackend(Script())
    client = Recorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+natural"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=2)
    result = run_episodes(client, [make_spec("m0"), make_spec("m1"), make_spec("m2")], setup)
    assert [e["termination"] for e in result.episode_rows()] == ["SURVIVAL"] * 3
    per_turn = [(("ncp.player_natural",), 1), ((ROLE_NARRATOR,), 1), ((ROLE_FACT_UPDATE,), 1),
                ((ROLE_CONFLICT_CHECK,), 1), ((ROLE_NODE_UPDATE,), 1), ((ROLE_COMMITMENT_STATUS,), 1)]
    # each episode flows on its own (wse_platform.flow): its stages, one request each, for each of 3 episodes
    assert sorted(client.batches) == sorted(([((ROLE_OPENING,), 1), ((ROLE_FACT_UPDATE,), 1)] + per_turn * 2) * 3)


def test_outputs_are_validated_for_structure_only():
    from pydantic import ValidationError

    from wse_platform.ncp import schemas
    schemas.NarratorResponse(text=" ".join(["w"] * 400))
    schemas.FactDiff(add_facts=["x"] * 30, negate_facts=[], reason="r")
    with pytest.raises(ValidationError, match="total_conflict_count"):
        schemas.ConflictReport.model_validate_json(
            '{"fact_conflict_count": 0, "commitment_conflict_count": 0, "player_input_conflict_count": 0, '
            '"total_conflict_count": 1, "conflicts": []}')
    inconsistent = {**json.loads(review(("fact", "f_0", "x"))), "confirmed": False}
    with pytest.raises(ValidationError, match="confirmed"):
        schemas.ConflictReview.model_validate(inconsistent)
