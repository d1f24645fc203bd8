"""`ncp.reference` with the `memory` narrator: the reference HiAgent's texts and settings are read
from the checkout's modules (fixture: own sentences, the reference's file names, names and fields),
the control and summary requests are exactly what the reference method sends, and answers are read
in its `Subgoal:` / `Action:` line format."""
from __future__ import annotations

import json
import shutil

from tests.ncp._ncp_helpers import Recorder, Script, make_spec
from tests.ncp.test_reference import COMMIT, FIXTURE, REF_DEFAULTS, checkout, settings  # noqa: F401 (fixtures)
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp import hiagent_ref, reference
from wse_platform.ncp.episode import (ROLE_HIAGENT, ROLE_MEMORY, Architecture, AuditorSetup, EpisodeSetup,
                                      run_episodes)

MODULE = "reference-methods/hiagent/src/ncpbench_reference_hiagent"
T1 = "The butler drops a silver key."
T2 = "The vault door looms."
T3 = "FIXTURE skip me: the clock strikes."
T4 = "The gate is shut.\nRain falls."
T5 = "A carriage waits."
LONG = "Lane took the silver key from the butler after a long chase through the cellar and the kitchen."
LONG_CUT = "Lane took the silver key from the butler after a long chase through the cella..."  # 80 characters
OPEN_SUM = "Lane reached the vault door."


def run(settings, ref, t_max, control, summaries=(LONG, OPEN_SUM)):
    backend = ScriptedBackend(Script(**{**REF_DEFAULTS, "ncp__memory_hiagent": list(control),
                                        "ncp__memory_summary": list(summaries)}))
    client = Recorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("memory+adversarial"), player_model="player",
                         auditor=AuditorSetup("aud", reference.load(ref).version), t_max=t_max, reference=str(ref))
    return run_episodes(client, [make_spec()], setup), client


def user(call) -> str:
    (system, user_msg) = call.messages
    assert system == {"role": "system", "content": "FIXTURE system turn of the control step."}
    return user_msg["content"]


def test_the_control_and_summary_requests_are_the_checkout_texts_filled_as_the_reference_method_fills_them(
        settings, checkout):
    control = ["Subgoal: Find the key\nAction: " + T1, "Subgoal: Open the vault\nAction: " + T2,
               "Action: retrieve(s_1)", "Action: " + T3, "Subgoal: Leave the manor\nAction: retrieve(9)",
               "Action: " + T4, "Action: " + T5]
    result, client = run(settings, checkout, 5, control)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 5
    hia = client.of(ROLE_HIAGENT)
    assert [c.tags["turn"] for c in hia] == ["1", "2", "3", "3", "4", "4", "5"]
    spec = make_spec()
    s0 = spec.trajectory[0]
    node = f"- node_id: s_0\n | description: {s0.description}\n | trigger: {s0.trigger_event}\n | delta: {s0.key_delta}"
    promises = "\n".join(f"- {c.id}: type={c.type} | status=pending\n  description: {c.description}\n"
                         f"  satisfaction_condition: {c.satisfaction_condition}\n"
                         f"  violation_condition: {c.violation_condition}" for c in spec.commitments)
    history = ("Opening System Response:\nYou stand in the hall of the manor.\n"
               f"Turn 0: System Response:\n{T1}\nTurn 1: System Response:\n{T2}")  # the reference's labels
    memory = ("Observation: FIXTURE the tale opens.\n1 Subgoal: Find the key\n"
              f"Observation: {LONG_CUT}\n2 Subgoal: Open the vault\nAction: {T2}\n"
              "Observation: FIXTURE heard: I try move number 3.")
    expected = ("FIXTURE control rules: keep one milestone at a time and answer in Action lines.\n\n"
                "FIXTURE hiagent narrator for Detective Lane.\n"
                f"Milestone: {node}\nPromises: {promises}\n"
                "Facts: - f_0: The vault door is locked.\n- f_1: The butler hides a silver key in his coat.\n"
                "Not yet applied: add_facts:\n(none)\nnegate_facts:\n(none)\n"
                f"Before: {history}\nPlayer: I try move number 3.\n\n"
                "## How to answer (FIXTURE control)\nEither `Action: <reply>`, or `Subgoal: <milestone>` and then "
                "`Action: <reply>`, or `Action: retrieve(n)`.\n\n## How long\nFifty words at most.\n\n" + memory)
    assert user(hia[2]) == expected  # turn 3, first ask
    assert hia[2].prompt_version == f"ncp.memory_hiagent@ref-{COMMIT[:12]}"
    # turn 1: the initial observation only; turn 2: one subgoal, the memory as is (no numbering)
    assert user(hia[0]).endswith("Fifty words at most.\n\nObservation: FIXTURE the tale opens.")
    assert user(hia[1]).endswith(f"Observation: FIXTURE the tale opens.\nSubgoal: Find the key\nAction: {T1}\n"
                                 "Observation: FIXTURE heard: I try move number 2.")
    # the summary request, as the checkout's summary builder makes it (its own system turn)
    summ = client.of(ROLE_MEMORY)
    assert summ[0].messages == [
        {"role": "system", "content": "FIXTURE summariser system turn."},
        {"role": "user", "content": "FIXTURE squeeze these steps into one line.\nSteps:\n"
                                    f"Action: {T1}\nObservation: FIXTURE heard: I try move number 2.\n"
                                    "Milestone: Find the key\nLine:"}]
    # retrieve(s_1): subgoal 1 in full (unnumbered) for the re-ask, a fresh sample (its own seed)
    assert user(hia[3]).endswith(f"Observation: FIXTURE the tale opens.\nSubgoal: Find the key\nAction: {T1}\n"
                                 "Observation: FIXTURE heard: I try move number 2.\n2 Subgoal: Open the vault\n"
                                 f"Action: {T2}\nObservation: FIXTURE heard: I try move number 3.")
    assert hia[3].sampling.seed != hia[2].sampling.seed
    # turn 4: the retrieval holds until a new subgoal; the new one with an unknown id (ignored): the
    # re-ask shows the last 6 chunks (the checkout's memory_size), both summaries, and ends in "Action: "
    assert "1 Subgoal" not in user(hia[4]) and T1 in user(hia[4])
    assert user(hia[5]).endswith(f"Fifty words at most.\n\n1 Subgoal: Find the key\nObservation: {LONG_CUT}\n"
                                 f"2 Subgoal: Open the vault\nObservation: {OPEN_SUM}\n3 Subgoal: Leave the manor"
                                 "\nAction: ")
    # the marked action is left out of the summarised trajectory (the checkout's skip marker)
    open_req = [c for c in summ if "Milestone: Open the vault" in c.messages[1]["content"]][0].messages[1]["content"]
    assert f"Action: {T2}\nObservation: FIXTURE heard: I try move number 3.\nMilestone" in open_req
    assert T3 not in open_req
    # summaries are requested for every prompt that shows them (identical requests: the cache answers)
    assert [c.tags["turn"] for c in summ] == ["3", "4", "4", "5"]
    # turn 5: the window of 6 starts inside subgoal 1's turns, so numbering starts at "Open the vault"
    assert user(hia[6]).endswith(f"Fifty words at most.\n\nAction: {T1}\nObservation: FIXTURE heard: I try move "
                                 f"number 2.\n1 Subgoal: Open the vault\nObservation: {OPEN_SUM}\n"
                                 f"2 Subgoal: Leave the manor\nAction: {T4}\nObservation: FIXTURE heard: I try move "
                                 "number 5.")
    rows = result.turn_rows()
    assert rows[4]["narrator_text"] == T4  # the action's further lines belong to it
    mem = json.loads(rows[4]["memory_json"])
    assert [s["retrieve"] for s in mem["steps"]] == [[9], None] and mem["retrieve_ids"] == [9]


def test_retrieve_depth_and_unreadable_retrieve_and_bad_format_leave_no_result(settings, checkout):
    result, client = run(settings, checkout, 2, ["Subgoal: Find the key\nAction: " + T1, "Action: retrieve(1)"])
    (f,) = result.failed_rows()
    assert (f["role"], f["error_kind"], f["turn"]) == (ROLE_HIAGENT, "invalid_retrieve", 2)
    assert len(client.of(ROLE_HIAGENT, 2)) == 1 + 2  # the checkout's max_retrieve_depth is 2
    result, client = run(settings, checkout, 1, ["Action: retrieve(the first one)"])
    (f,) = result.failed_rows()
    assert f["error_kind"] == "invalid_retrieve" and len(client.of(ROLE_HIAGENT)) == 1
    result, _ = run(settings, checkout, 1, ['{"text": "JSON is not the format"}'])
    (f,) = result.failed_rows()
    assert (f["role"], f["error_kind"]) == (ROLE_HIAGENT, "schema_violation")


def test_line_format_is_read_as_the_reference_reads_it():
    from wse_platform.llm.validation import parse_sample, schema_of
    assert schema_of(hiagent_ref.RefHiAgentStep)[0] is None  # no JSON schema is sent for a line format
    parsed = parse_sample("Subgoal: Reach the gate\nAction: You run.", hiagent_ref.RefHiAgentStep, None)
    assert parsed.ok and parsed.value.action == "You run."
    assert parse_sample('{"text": "x"}', hiagent_ref.RefHiAgentStep, None).error_kind == "schema_violation"
    read = hiagent_ref.RefHiAgentStep.from_text
    assert read("Action: You wait.\nThe rain stops.").decision() == (None, "You wait.\nThe rain stops.", None)
    assert read("  Subgoal: Reach the gate\nAction: You run.").decision() == ("Reach the gate", "You run.", None)
    assert read("Action: RETRIEVE(s_2, 3)").decision() == (None, None, [2, 3])
    assert read("Action: retrieve(x)").decision() == (None, None, [])
    for bad in ("You wait.", "Subgoal: A", "Subgoal: A\nNarration: b", "Action:   ", "Subgoal:  \nAction: b"):
        try:
            read(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    assert hiagent_ref.RefSummaryLine.from_text(" One line. ").summary == "One line."
    for bad in ("", "two\nlines"):
        try:
            hiagent_ref.RefSummaryLine.from_text(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_reference_check_names_the_hiagent_modules_and_they_are_part_of_the_prompt_version(tmp_path, checkout):
    plain = tmp_path / "plain"
    shutil.copytree(FIXTURE, plain)
    v1 = reference.load(plain).version
    config = plain / MODULE / "config.py"
    config.write_text(config.read_text().replace("memory_size: int = 6", "memory_size: int = 7"))
    assert reference.load(plain).version != v1  # a changed HiAgent setting makes the cells stale
    assert reference.load(plain).hiagent.texts.memory_size == 7

    (checkout / MODULE / "core.py").unlink()
    prompts = checkout / MODULE / "hiagent_prompts.py"
    prompts.write_text(prompts.read_text().replace("Milestone: {subgoal_text}", "Milestone: {goal}"))
    problems = reference.check(checkout)
    assert any("core.py: missing" in p for p in problems)
    assert any("hiagent_prompts.py" in p and "summary prompt" in p and "'goal'" in p for p in problems)
    from wse_platform.cli import main
    assert main(["ncp", "reference", "check", str(checkout)]) == 1
