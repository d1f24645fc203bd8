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
from wse_platform.ncp.memory import MEMORY_CHUNKS, MEMORY_TOKENS, OWN_TEXTS, HiAgentMemory, SummaryJob

T1 = "You search the hall; the butler drops a silver key at your feet."
T2 = "You face the iron vault door."
T3 = "You remember the key's weight in your palm."
T4 = "The vault swings open."
T5 = "You step out into the rain."
T6 = "A carriage waits at the gate."


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


def test_subgoals_summaries_regenerated_for_each_prompt_and_retrieval(settings):
    script = Script(ncp__memory_hiagent=[hi(subgoal="Find the vault key", text=T1),
                                         hi(subgoal="Open the vault", text=T2), hi(retrieve=[1]), hi(text=T3),
                                         hi(text=T4), hi(subgoal="Leave the manor", text=T5), hi(text=T6)],
                    ncp__memory_summary=['{"summary": "Lane got the silver key from the butler."}'],
                    ncp__node_update=[NODE_YES])  # the auditor's node boundary plays no part in memory
    result, rec = run(settings, script, t_max=6)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 6
    hia = rec.of(ROLE_HIAGENT)
    assert [c.tags["turn"] for c in hia] == ["1", "2", "3", "3", "4", "5", "6"]  # turn 3: retrieve, then narrate
    assert not rec.of(ROLE_NARRATOR)
    # turn 1: the initial observation only; turn 2: one subgoal, the memory as it is (no numbers)
    assert memory_of(hia[0]).strip() == "Observation: The story has begun."
    assert memory_of(hia[1]).strip() == ("Observation: The story has begun.\nSubgoal: Find the vault key\n"
                                         f"Action: {T1}\nObservation: The player says: I try move number 2.")
    # turn 3: two subgoals, the finished one only as its summary, numbered within the window
    assert memory_of(hia[2]).strip() == (
        "Observation: The story has begun.\n1 Subgoal: Find the vault key\n"
        "Observation: Lane got the silver key from the butler.\n2 Subgoal: Open the vault\n"
        f"Action: {T2}\nObservation: The player says: I try move number 3.")
    # ... until retrieved: then its detailed turn is back, and stays until the next subgoal
    assert T1 in memory_of(hia[3]) and T1 in memory_of(hia[4]) and "1 Subgoal" not in memory_of(hia[3])
    # the subgoal proposed at turn 5 drops the retrieval: at turn 6 both finished subgoals are summaries
    assert T1 not in memory_of(hia[6]) and T2 not in memory_of(hia[6])
    assert "1 Subgoal: Find the vault key" in memory_of(hia[6]) and "3 Subgoal: Leave the manor" in memory_of(hia[6])
    # a summary is requested for every prompt that shows it (regenerated), with the narrator's model
    summ = rec.of(ROLE_MEMORY)
    assert [c.tags["turn"] for c in summ] == ["3", "6", "6"] and {c.model for c in summ} == {"narr"}
    assert "Find the vault key" in text_of(summ[0]) and T1 in text_of(summ[0])
    assert summ[0].messages == summ[1].messages  # the same request again: answered by the cache
    # next to the memory, the whole baseline history (as the reference method: baseline prompt plus memory)
    first = text_of(hia[2])
    assert T1 in first.split("Your working memory:")[0]
    # the HiAgent narrator gets the narrator's inputs (current node, commitments, facts, player input)
    spec = make_spec()
    for needle in [c.violation_condition for c in spec.commitments] + \
                  ["The vault door is locked.", "I try move number 3."]:
        assert needle in first
    assert sum(n.key_delta in first for n in spec.trajectory) == 1  # the current node only (as the reference)
    mem = json.loads(result.turn_rows()[3]["memory_json"])
    assert [st["retrieve"] for st in mem["steps"]] == [[1], None] and mem["retrieve_ids"] == [1]
    assert mem["steps"][0]["summaries"] == {"Find the vault key": "Lane got the silver key from the butler."}
    assert mem["steps"][0]["tokenizer"].startswith(("tiktoken:", "estimate"))
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


def test_memory_layout_numbers_subgoals_within_the_window_and_an_unknown_id_matches_nothing():
    texts = OWN_TEXTS
    mem = HiAgentMemory()
    mem.observe("first move", texts)  # no narration yet: only the initial observation
    mem.propose("A")
    mem.act("You see a door.")
    mem.observe("I open it.", texts)
    mem.propose("B")
    mem.act("The door creaks.")
    window = mem.window(texts)
    (job,) = mem.summary_jobs(window, texts)
    assert job == SummaryJob("A", "Action: You see a door.\nObservation: The player says: I open it.")
    text = mem.render(window, texts, {job: "Saw a door."})
    assert text == ("Observation: The story has begun.\n1 Subgoal: A\nObservation: Saw a door.\n2 Subgoal: B")
    assert mem.ends_with_subgoal(window)
    mem.retrieve([2, 7])  # the current subgoal and an id naming nothing: ignored, A stays summarised
    assert mem.summary_jobs(window, texts) == [job]
    mem.retrieve([1])
    assert mem.summary_jobs(window, texts) == [] and "You see a door." in mem.render(window, texts, {})
    mem.propose("C")  # a new subgoal drops the retrievals
    assert mem.subgoal_idx == [] and len(mem.summary_jobs(mem.window(texts), texts)) == 2
    # numbering is within the window: without the initial chunk and subgoal A, B is subgoal 1
    later = mem.window(texts, drop=3)
    assert mem.render(later, texts, {SummaryJob("B", ""): "Heard it."}).startswith("1 Subgoal: B\nObservation: Heard")


def test_the_window_is_the_last_100_chunks():
    mem = HiAgentMemory()
    mem.propose("Keep going")
    for t in range(1, 151):
        mem.act(f"short narration {t}.")
        mem.observe(f"move {t}", OWN_TEXTS)
    window = mem.window(OWN_TEXTS)
    assert MEMORY_CHUNKS == 100 and len(window) == 100 and len(mem.chunks) == 151
    text = mem.render(window, OWN_TEXTS, {})
    assert "short narration 150." in text and "short narration 51." in text and "short narration 50." not in text


def test_hiagent_with_the_natural_player_is_an_accepted_architecture():
    from wse_platform.config import settings_from_dict
    s = settings_from_dict({"ncp": {"architectures": ["memory+natural"]}})
    assert s.ncp.architectures == ["memory+natural"]


def test_the_prompt_is_cut_to_12k_tokens_from_the_oldest_chunk_counted_with_tiktoken(settings):
    from wse_platform.ncp import tokens
    count = tokens.counter()
    assert count.name == "tiktoken:o200k_base"  # the reference's gpt-4o-mini encoding, offline (litellm's copy)
    long = " ".join(f"Corridor {i} bends left past a portrait of a grey heron." for i in range(140))
    script = Script(ncp__memory_hiagent=[hi(subgoal="Walk the corridors", text=long), hi(text=long)])
    result, rec = run(settings, script, t_max=4)
    steps = [json.loads(r["memory_json"])["steps"][0] for r in result.turn_rows()[1:]]
    hia = rec.of(ROLE_HIAGENT)
    assert [s["prompt_tokens"] for s in steps] == [count(text_of(c)) for c in hia]
    assert all(s["tokenizer"] == "tiktoken:o200k_base" for s in steps)
    # turn 4: init, subgoal and 3 narrations would pass 12k tokens; cut from the oldest chunk until within
    assert [s["window_chunks"] for s in steps] == [1, 3, 4, 2]
    assert steps[3]["prompt_tokens"] <= MEMORY_TOKENS < steps[3]["prompt_tokens"] + count(long)
    assert memory_of(hia[3]).strip().startswith(f"Action: {long}") and "Walk the corridors" not in memory_of(hia[3])


def test_without_tiktoken_the_budget_is_estimated_and_the_fallback_recorded(monkeypatch, caplog):
    import sys

    from wse_platform.ncp import tokens
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import fails
    with caplog.at_level("WARNING"):
        est = tokens._load("gpt-4o-mini")
    assert est.name.startswith("estimate-4-chars: tiktoken is not installed") and est("x" * 40) == 10
    assert "tiktoken unavailable" in caplog.text


def test_the_token_counter_is_loaded_while_the_openings_are_in_flight(settings, monkeypatch):
    """A memory cell starts loading HiAgent's tiktoken counter (~0.6 s of CPU) when its episodes start, in
    the background: the opening request finds it loaded (held up to 20 s), instead of the first
    HiAgent step of every episode waiting for it after the openings and players have answered."""
    import time

    from wse_platform.ncp import tokens

    monkeypatch.setattr(tokens, "_COUNTERS", {})
    monkeypatch.setattr(tokens, "_WARMING", set(), raising=False)
    seen = []
    script = Script()

    def answer(call):
        if call.role == "ncp.narrator_opening" and not seen:
            deadline = time.monotonic() + 20
            while "gpt-4o-mini" not in tokens._COUNTERS and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append("gpt-4o-mini" in tokens._COUNTERS)
        return script(call)

    res, _ = run(settings, answer, t_max=1)
    assert seen == [True], "the counter was not loaded before the first HiAgent step needed it"
    assert res.episode_rows()[0]["turns"] == 1


@pytest.mark.parametrize("arch, per_turn", [("memory+adversarial", 7), ("baseline+adversarial", 6)])
def test_the_limiter_hint_counts_the_server_requests_to_the_episode_end(settings, arch, per_turn):
    """The hint (`limiter.expect`, the endpoint limiter's priority) is the server requests the episode still
    expects: HiAgent's counts its one new summary per turn (it sends ~172 at t_max 25, the baseline ~151),
    and not the summaries the cache answers. Before, every architecture started at 2 + 6 x t_max and the
    cached summaries used it up: HiAgent's last turns went out with hint 0, last of all in the order."""
    script = Script(ncp__memory_hiagent=[hi(subgoal=f"Goal {k}", text=f"Scene {k}.") for k in range(1, 7)])
    backend = ScriptedBackend(script)
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse(arch), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=6)
    (ep,) = run_episodes(client, [make_spec()], setup).episode_rows()
    assert ep["turns"] == 6
    hints = [c.priority for c in backend.calls]
    assert hints[0] == 2 + per_turn * 6
    assert min(hints) >= 1 and hints[-1] == 1   # the episode's last request: the last it expected
    players = [c.priority for c in backend.calls if c.role.startswith("ncp.player")]
    assert players == [per_turn * (6 - t + 1) for t in range(1, 7)]   # each turn starts from its count
    if per_turn == 7:   # turns 3-6 ask for 1-4 summaries, 1 of them new: 6 + 4 x 1 server requests in those turns
        assert sum(c.role == ROLE_MEMORY for c in backend.calls) == 4
