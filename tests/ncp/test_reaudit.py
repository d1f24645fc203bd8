"""Re-audit: stored transcripts replayed under another auditor, never regenerating turns."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.ncp._ncp_helpers import NO_CONFLICT, NODE_NO, NONE_DIFF, conflicts_json, review
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.episode import (AUDITOR_ROLES, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK, ROLE_FACT_UPDATE,
                                      ROLE_NODE_UPDATE, Architecture, AuditorSetup, EpisodeSetup, run_episodes)
from wse_platform.ncp.reaudit import TranscriptError, reaudit, transcripts_from_rows
from wse_platform.ncp.spec import NarrativeSpec


def make_spec(spec_id: str) -> NarrativeSpec:
    return NarrativeSpec.model_validate({
        "meta": {"id": spec_id, "title": "Harbour", "genres": ["Crime", "Drama"], "player_role": "Inspector Vale"},
        "synopsis": "An inspector tracks a smuggler.",
        "initial_facts": [{"id": "f_0", "content": f"The ship Aurora-{spec_id} is docked.", "negated": False},
                          {"id": "f_1", "content": "The smuggler is unknown.", "negated": False}],
        "commitments": [{"id": "c_0", "type": "achievement", "description": "Vale unmasks the smuggler at s_1.",
                         "satisfaction_condition": "The smuggler is named at s_1.",
                         "violation_condition": "The smuggler escapes for good."}],
        "trajectory": [{"id": "s_0", "description": "Vale boards the Aurora.", "trigger_event": "The gangway drops.",
                        "key_delta": "Vale is aboard."},
                       {"id": "s_1", "description": "Vale names the smuggler.", "trigger_event": "A crate breaks.",
                        "key_delta": "The smuggler is named."}],
    })


def auditor_script(conflict_at_turn: int | None = None, confirm: bool = True):
    """Auditor outputs keyed on the narrator text of the audited turn (which carries its turn number)."""
    def script(call):
        prompt = "\n".join(m["content"] for m in call.messages)
        flagged = conflict_at_turn is not None and f"Response to audit:\nScene {conflict_at_turn}." in prompt
        gone = ("fact", "f_0", "ship gone")
        out = {
            ROLE_FACT_UPDATE: NONE_DIFF,
            ROLE_CONFLICT_CHECK: conflicts_json(gone) if flagged else NO_CONFLICT,
            ROLE_DOUBLE_CHECK: review(gone) if confirm else review(),
            ROLE_NODE_UPDATE: NODE_NO,
            "ncp.commitment_status": json.dumps({"statuses": [{"commitment_id": "c_0", "status": "PENDING",
                                                               "reason": "not yet"}]}),
        }.get(call.role)
        if out is None:
            raise AssertionError(f"re-audit must not call role {call.role}")
        return [out] * call.n
    return script


def stored_rows(spec_ids: list[str], n_turns: dict[str, int], model: str = "narr", arch: str = "baseline+adversarial"):
    rows = []
    for sid in spec_ids:
        rows.append({"model": model, "arch": arch, "spec_id": sid, "turn": 0, "player_input": None,
                     "narrator_text": "Scene 0."})
        for t in range(1, n_turns[sid] + 1):
            rows.append({"model": model, "arch": arch, "spec_id": sid, "turn": t,
                         "player_input": f"I act {t}.", "narrator_text": f"Scene {t}."})
    return rows


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def test_reaudit_replays_without_narrator_or_player_calls_and_first_confirmed_conflict_ends(settings):
    specs = {s: make_spec(s) for s in ("m0", "m1")}
    backend = ScriptedBackend(auditor_script(conflict_at_turn=2))
    client = LLMClient(settings, backends={"aud2": backend}, progress=False)
    transcripts = transcripts_from_rows(stored_rows(["m0", "m1"], {"m0": 4, "m1": 1}))
    res = reaudit(client, specs, transcripts, AuditorSetup("aud2", "v1"), t_max=4)
    eps = {e["spec_id"]: e for e in res.episode_rows()}
    assert (eps["m0"]["termination"], eps["m0"]["turns"], eps["m0"]["conflict_kinds"]) == ("CONFLICT", 2, ["fact"])
    assert (eps["m1"]["termination"], eps["m1"]["turns"]) == ("CENSORED", 1)  # transcript ran out at turn 1
    assert {e["auditor_id"] for e in eps.values()} == {"ncp.auditor:aud2:v1:x1"}
    calls = Counter(c.role for c in backend.calls)
    assert set(calls) <= set(AUDITOR_ROLES)
    # two openings' fact extraction; m0: turns 1, 2 audited (fact+check each), one double-check; m1: turn 1
    assert calls[ROLE_FACT_UPDATE] == 2 + 3 and calls[ROLE_CONFLICT_CHECK] == 3 and calls[ROLE_DOUBLE_CHECK] == 1
    assert calls[ROLE_NODE_UPDATE] == 2  # m0 turn 1, m1 turn 1; not after m0's conflict
    turns_m0 = [r for r in res.turn_rows() if r["spec_id"] == "m0"]
    assert [r["turn"] for r in turns_m0] == [0, 1, 2]  # turns 3-4 never replayed
    assert turns_m0[2]["narrator_text"] == "Scene 2." and turns_m0[2]["outcome"] == "CONFLICT"


def test_transcript_reaching_t_max_is_survival_unconfirmed_conflict_does_not_end(settings):
    specs = {"m0": make_spec("m0")}
    backend = ScriptedBackend(auditor_script(conflict_at_turn=1, confirm=False))
    client = LLMClient(settings, backends={"aud2": backend}, progress=False)
    res = reaudit(client, specs, transcripts_from_rows(stored_rows(["m0"], {"m0": 3})), AuditorSetup("aud2"), t_max=3)
    (ep,) = res.episode_rows()
    assert (ep["termination"], ep["turns"]) == ("SURVIVAL", 3)


def test_replay_stops_at_a_gap_in_the_stored_transcript(settings):
    rows = stored_rows(["m0"], {"m0": 4})
    rows[2]["narrator_text"] = None  # turn 2's narrator call had failed (INVALID episode)
    backend = ScriptedBackend(auditor_script())
    client = LLMClient(settings, backends={"aud2": backend}, progress=False)
    res = reaudit(client, {"m0": make_spec("m0")}, transcripts_from_rows(rows), AuditorSetup("aud2"), t_max=4)
    (ep,) = res.episode_rows()
    assert (ep["termination"], ep["turns"]) == ("CENSORED", 1)


def test_bad_stored_rows_name_the_problem(settings):
    with pytest.raises(TranscriptError, match="missing spec_id"):
        transcripts_from_rows([{"model": "narr", "arch": "a", "turn": 1}])
    rows = stored_rows(["m0"], {"m0": 1}) + stored_rows(["m0"], {"m0": 1})[1:]
    with pytest.raises(TranscriptError, match="duplicate turn"):
        transcripts_from_rows(rows)
    backend = ScriptedBackend(auditor_script())
    client = LLMClient(settings, backends={"aud2": backend}, progress=False)
    with pytest.raises(TranscriptError, match="movie77"):
        reaudit(client, {}, transcripts_from_rows(stored_rows(["movie77"], {"movie77": 1})), AuditorSetup("aud2"))


def test_reaudit_with_the_in_loop_auditor_reproduces_episodes_from_cache(settings):
    """Same auditor, same transcript → identical requests → all cache hits, same outcomes."""
    def live(call):
        if call.role.startswith("ncp.player"):
            return [f"I search deck {len(live.calls) + 1}."] * call.n
        if call.role in ("ncp.narrator", "ncp.narrator_opening"):
            live.calls.append(1)
            return [json.dumps({"text": f"Scene {len(live.calls) - 1}."})] * call.n
        return auditor_script(conflict_at_turn=2)(call)
    live.calls = []
    backend = ScriptedBackend(live, namespace="fixed-live")
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"),
                         player_model="player", auditor=AuditorSetup("aud"), t_max=3)
    original = run_episodes(client, [make_spec("m0")], setup)
    assert original.episode_rows()[0]["termination"] == "CONFLICT"

    replay_backend = ScriptedBackend(auditor_script(), namespace="fixed-live")  # would answer differently
    replay_client = LLMClient(settings, backends={"aud": replay_backend}, progress=False)
    res = reaudit(replay_client, {"m0": make_spec("m0")}, transcripts_from_rows(original.turn_rows()),
                  AuditorSetup("aud"), t_max=3)
    assert replay_backend.n_calls == 0
    assert all(r["cache_hit"] for r in replay_client.call_records())
    keep = ("termination", "turns", "conflict_kinds", "nodes_completed", "auditor_id")
    assert {k: res.episode_rows()[0][k] for k in keep} == {k: original.episode_rows()[0][k] for k in keep}
