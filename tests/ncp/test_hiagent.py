"""The `memory` narrator is HiAgent: own subgoals, one-line summaries of finished subgoals in
working memory, retrieval of a summarised subgoal's detailed turns (scripted backend)."""
from __future__ import annotations

import json

import pytest

from tests.ncp._ncp_helpers import NODE_YES, Recorder, Script, make_spec, text_of
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.episode import (ROLE_HIAGENT, ROLE_MEMORY, ROLE_NARRATOR, Architecture, AuditorSetup,
                                      EpisodeSetup, run_episodes)
from wse_platform.ncp.memory import HiAgentMemory
from wse_platform.ncp.render import Exchange

T1 = "You search the hall; the butler drops a silver key at your feet."
T2 = "You face the iron vault door."
T3 = "You remember the key's weight in your palm."


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def run(settings, script, t_max=3):
    backend = ScriptedBackend(script)
    client = Recorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("memory+adversarial"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=t_max)
    return run_episodes(client, [make_spec()], setup), client


def hi(**kw) -> str:
    return json.dumps(kw)


def memory_of(call) -> str:
    return text_of(call).split("Your working memory:")[1].split("Player input for this turn:")[0]


def test_subgoals_summaries_and_retrieval(settings):
    script = Script(ncp__memory_hiagent=[hi(subgoal="Find the vault key", text=T1),
                                         hi(subgoal="Open the vault", text=T2), hi(retrieve=[1]), hi(text=T3)],
                    ncp__memory_summary=['{"summary": "Lane got the silver key from the butler."}'],
                    ncp__node_update=[NODE_YES])  # the auditor's node boundary plays no part in memory
    result, rec = run(settings, script)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 3
    hia = rec.of(ROLE_HIAGENT)
    assert [c.tags["turn"] for c in hia] == ["1", "2", "3", "3"]  # turn 3: retrieve, then narrate
    assert not rec.of(ROLE_NARRATOR)
    # turn 2: subgoal 1 is current, its turn in detail
    assert "Current subgoal 1: Find the vault key" in text_of(hia[1]) and T1 in text_of(hia[1])
    # one summary, written after subgoal 2 was proposed (turn 2), with the narrator's model
    (summ,) = rec.of(ROLE_MEMORY)
    assert summ.tags["turn"] == "2" and "Find the vault key" in text_of(summ) and T1 in text_of(summ)
    # turn 3: in the working memory, subgoal 1 only as its summary ...
    first, second = memory_of(hia[2]), memory_of(hia[3])
    assert "Lane got the silver key from the butler." in first and T1 not in first
    assert "Current subgoal 2: Open the vault" in first and T2 in first
    # ... until retrieved: then its detailed turns are back
    assert T1 in second
    # next to the memory, the whole baseline history (as the reference method: baseline prompt plus memory)
    assert T1 in text_of(hia[2]).split("Your working memory:")[0]
    first = text_of(hia[2])
    # the HiAgent narrator gets the narrator's inputs (current node, commitments, facts, player input)
    spec = make_spec()
    for needle in [c.violation_condition for c in spec.commitments] + \
                  ["The vault door is locked.", "I try move number 3."]:
        assert needle in first
    assert sum(n.key_delta in first for n in spec.trajectory) == 1  # the current node only (as the reference)
    mem = json.loads(result.turn_rows()[3]["memory_json"])
    assert [s["summary"] for s in mem["subgoals"]] == ["Lane got the silver key from the butler.", None]
    assert [st.get("retrieve") for st in mem["steps"]] == [[1], []] and mem["retrieved"] == [1]
    assert result.turn_rows()[3]["narrator_text"] == T3


def test_an_unknown_retrieve_id_is_ignored_and_only_endless_retrieving_leaves_no_result(settings):
    script = Script(ncp__memory_hiagent=[hi(subgoal="Find the key", text=T1), hi(retrieve=[7]), hi(text=T2)])
    result, _ = run(settings, script, t_max=2)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and result.turn_rows()[2]["narrator_text"] == T2
    script = Script(ncp__memory_hiagent=[hi(subgoal="Find the key", text=T1), hi(retrieve=[7])])
    result, backend = run(settings, script, t_max=2)
    assert result.episode_rows() == []
    (f,) = result.failed_rows()
    assert (f["role"], f["error_kind"], f["turn"]) == (ROLE_HIAGENT, "invalid_retrieve", 2)
    assert len(backend.of(ROLE_HIAGENT)) == 1 + 5  # turn 1, then 1 + depth 4 at turn 2


def test_a_subgoal_summary_is_cut_to_220_characters_as_the_reference_summarizer_does():
    from wse_platform.ncp.memory import cap_summary
    long = "word " * 100
    assert len(cap_summary(long)) == 220 and cap_summary(long).endswith("...")
    assert cap_summary("  a   short\nline ") == "a short line"


def test_a_step_needs_exactly_one_action():
    from pydantic import ValidationError

    from wse_platform.ncp.schemas import HiAgentStep
    with pytest.raises(ValidationError):
        HiAgentStep.model_validate({"subgoal": "x"})
    with pytest.raises(ValidationError):
        HiAgentStep.model_validate({"text": "y", "retrieve": [1]})
    assert HiAgentStep.model_validate({"retrieve": [2]}).text is None


def test_memory_rendering_keeps_the_opening_and_numbers_subgoals():
    mem = HiAgentMemory()
    mem.record(Exchange(0, None, "Opening scene."))
    mem.propose("A", 1)
    mem.record(Exchange(1, "I look.", "You see a door."))
    mem.propose("B", 2)
    assert [s.number for s in mem.unsummarised()] == [1]
    mem.subgoals[0].summary = "Saw a door."
    text = mem.render()
    assert "Opening scene." in text and "Subgoal 1 (finished, summarised): A" in text
    assert "You see a door." not in text and "Current subgoal 2: B" in text
    assert mem.retrieve([1, 2]) == [2]  # the current subgoal is not a summarised one
    assert "You see a door." in mem.render()


def test_hiagent_with_the_natural_player_is_an_accepted_architecture():
    from wse_platform.config import settings_from_dict
    s = settings_from_dict({"ncp": {"architectures": ["memory+natural"]}})
    assert s.ncp.architectures == ["memory+natural"]


def test_the_working_memory_shows_the_last_100_chunks_within_12k_tokens():
    from wse_platform.ncp.memory import MEMORY_CHUNKS, MEMORY_TOKENS
    mem = HiAgentMemory()
    mem.propose("Keep going", 1)
    for t in range(1, 151):
        mem.record(Exchange(t, f"move {t}", f"short narration {t}."))
    text = mem.render()
    assert "short narration 150." in text and "short narration 51." in text and "short narration 50." not in text
    assert MEMORY_CHUNKS == 100 and len(mem.chunks()) == 151
    big = HiAgentMemory()
    big.propose("Keep going", 1)
    for t in range(1, 30):
        big.record(Exchange(t, "move", "x" * 4000))
    assert len(big.render()) / 4 <= MEMORY_TOKENS + 1000 and len(big.render()) < 29 * 4000
