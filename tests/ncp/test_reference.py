"""`ncp.reference`: the authors' prompt files read from a checkout, filled as their runner fills them,
answers parsed with their field names and leniency. The checkout here is a fixture with the
reference's file names and placeholders and sentences of our own (tests/ncp/fixtures/ref_checkout)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.ncp._ncp_helpers import Recorder, Script, diff, make_spec
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp import reference
from wse_platform.ncp.episode import (ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK,
                                      ROLE_FACT_UPDATE, ROLE_NARRATOR, ROLE_NODE_UPDATE, ROLE_OPENING, Architecture,
                                      AuditorSetup, EpisodeSetup, run_episodes)

FIXTURE = Path(__file__).parent / "fixtures" / "ref_checkout"
PROMPTS = FIXTURE / "src" / "ncpbench" / "prompts"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def ref_conflicts(*items, **extra) -> str:
    """A conflict report in the reference's field names, with keys the reference does not read."""
    counts = {f"{k}_conflict_count": sum(t == k for t, _, _ in items) for k in ("fact", "commitment", "player_input")}
    return json.dumps({**counts, "total_conflict_count": len(items), "notes": "ignored",
                       "conflicts": [{"type": t, "id": i, "reason": r, "severity": "high"} for t, i, r in items],
                       **extra})


def ref_node(trigger: bool, delta: bool) -> str:
    return json.dumps({"trigger": {"occurred": trigger, "reason": "t", "quote": "x"},
                       "delta": {"occurred": delta, "reason": "d"}, "extra": 1})


def ref_statuses(satisfied=(), ids=("c_0", "c_1"), case=str.lower) -> str:
    return json.dumps({"statuses": [{"id": c, "status": case("SATISFIED" if c in satisfied else "PENDING"),
                                     "reason": "see f_0", "evidence": []} for c in ids]})


REF_DEFAULTS = dict(ncp__narrator_opening=['{"text": "You stand in the hall of the manor."}'],
                    ncp__narrator=['{"text": "You stand in the hall."}'],
                    ncp__fact_update=[diff()], ncp__conflict_check=[ref_conflicts()],
                    ncp__node_update=[ref_node(False, False)], ncp__commitment_status=[ref_statuses()])


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The fixture checkout as a git checkout whose HEAD is a branch in packed-refs."""
    root = tmp_path / "NCP-Bench"
    shutil.copytree(FIXTURE, root)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{COMMIT} refs/heads/main\n")
    return root


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def run(settings, ref: Path, t_max: int = 1, **queues):
    backend = ScriptedBackend(Script(**{**REF_DEFAULTS, **queues}))
    client = Recorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"), player_model="player",
                         auditor=AuditorSetup("aud", reference.load(ref).version), t_max=t_max, reference=str(ref))
    return run_episodes(client, [make_spec()], setup), client


def test_conflict_check_request_is_the_fixture_prompt_with_its_placeholders_filled(settings, checkout):
    """The done-test of issue 20: the conflict check sends the checkout's prompt file, filled exactly as
    the reference runner fills it (values written out by hand from the reference's formatters)."""
    _, client = run(settings, checkout,
                    ncp__fact_update=[diff(add=["A portrait hangs above the hall fireplace."]),
                                      diff(add=["Lane holds a brass lamp."], negate=["f_1"])])
    (req,) = client.of(ROLE_CONFLICT_CHECK, 1)
    spec = make_spec()
    c0, c1 = spec.commitments
    s0, s1 = spec.trajectory
    values = dict(
        player_role="Detective Lane",
        system_response_history="Opening System Response:\nYou stand in the hall of the manor.",
        user_input="I try move number 1.",
        response_text="You stand in the hall.",
        pre_turn_facts="- f_0: The vault door is locked.\n- f_1: The butler hides a silver key in his coat.\n"
                       "- f_3: A portrait hangs above the hall fireplace.",
        candidate_fact_updates="add_facts:\n- Lane holds a brass lamp.\nnegate_facts:\n"
                               "- f_1: The butler hides a silver key in his coat.",
        narrative_commitments="\n".join(
            f"- {c.id}: type={c.type} | status=pending\n  description: {c.description}\n"
            f"  satisfaction_condition: {c.satisfaction_condition}\n  violation_condition: {c.violation_condition}"
            for c in (c0, c1)),
        trajectory_progress="\n".join(
            f"- {n.id}: status=pending\n | description: {n.description}\n | trigger: {n.trigger_event}\n"
            f" | delta: {n.key_delta}" for n in (s0, s1)),
        current_node=f"- node_id: s_0\n | description: {s0.description}\n | trigger: {s0.trigger_event}\n"
                     f" | delta: {s0.key_delta}",
    )
    expected = (PROMPTS / "conflict_check.txt").read_text(encoding="utf-8").format(**values)
    assert req.messages == [{"role": "user", "content": expected}]
    assert '{"type": "fact", "id": "f_1"' in expected  # the template's literal JSON braces survive
    assert req.prompt_version == f"ncp.conflict_check@ref-{COMMIT[:12]}"


def test_every_role_sends_its_checkout_prompt_and_the_checkers_get_what_the_reference_gives_them(settings,
                                                                                                   checkout):
    _, client = run(settings, checkout, ncp__conflict_check=[ref_conflicts(("fact", "f_0", "vault open"))],
                    ncp__conflict_double_check=[ref_conflicts(confirmed=False, review_reason="not a conflict")])
    heads = {ROLE_OPENING: "FIXTURE opening", "ncp.player_adversarial": "FIXTURE testing player",
             ROLE_NARRATOR: "FIXTURE baseline narrator", ROLE_FACT_UPDATE: "FIXTURE fact update",
             ROLE_CONFLICT_CHECK: "FIXTURE conflict check", ROLE_DOUBLE_CHECK: "FIXTURE review",
             ROLE_NODE_UPDATE: "FIXTURE node check", ROLE_COMMITMENT_STATUS: "FIXTURE status check"}
    for role, head in heads.items():
        reqs = client.of(role)
        assert reqs and all(r.messages[0]["content"].startswith(head) and len(r.messages) == 1 for r in reqs), role
    spec = make_spec()
    node = client.of(ROLE_NODE_UPDATE, 1)[0].messages[0]["content"]
    s0 = spec.trajectory[0]
    assert f"- s_0:\n | trigger: {s0.trigger_event}\n | delta: {s0.key_delta}" in node
    assert s0.description not in node  # the node check gets trigger and delta only
    assert "Turn 0:\n- Player: I try move number 1.\n- System: You stand in the hall." in node  # reference numbering
    status = client.of(ROLE_COMMITMENT_STATUS, 1)[0].messages[0]["content"]
    assert all(c.violation_condition not in status for c in spec.commitments)
    review = client.of(ROLE_DOUBLE_CHECK, 1)[0].messages[0]["content"]
    assert json.dumps([{"type": "fact", "id": "f_0", "reason": "vault open", "content": "The vault door is locked."}],
                      indent=2) in review


def test_answers_are_read_with_the_reference_field_names_and_leniency(settings, checkout):
    """Extra keys ignored, statuses upper-cased, `type`/`id` conflict fields; a review with
    `confirmed: false` clears its listed conflicts (the reference reads `confirmed` first)."""
    result, _ = run(settings, checkout, t_max=2,
                    ncp__conflict_check=[ref_conflicts(("fact", "f_0", "vault open"))],
                    ncp__conflict_double_check=[ref_conflicts(("fact", "f_0", "vault open"), confirmed=False,
                                                              review_reason="the vault was opened on screen")],
                    ncp__node_update=[ref_node(True, True)],
                    ncp__commitment_status=[ref_statuses(), ref_statuses(satisfied=("c_0",), case=str.title)])
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SUCCESS" and ep["turns"] == 2  # the unconfirmed conflict did not end turn 1
    rows = result.turn_rows()
    report = json.loads(rows[1]["conflict_report_json"])
    assert report["conflicts"] == [{"kind": "fact", "target_id": "f_0", "reason": "vault open"}]
    assert report["kept"] == [] and report["confirmed"] is False
    assert json.loads(rows[2]["commitment_status_json"])["statuses"]["c_0"]["status"] == "SATISFIED"


def test_a_confirmed_review_ends_the_episode_and_a_string_count_is_invalid_as_in_the_reference(settings, checkout):
    result, _ = run(settings, checkout, ncp__conflict_check=[ref_conflicts(("commitment", "c_1", "skipped s_0"))],
                    ncp__conflict_double_check=[ref_conflicts(("commitment", "c_1", "skipped s_0"), confirmed=True,
                                                              review_reason="stands")])
    assert result.episode_rows()[0]["termination"] == "CONFLICT"
    assert result.episode_rows()[0]["conflict_kinds"] == ["commitment"]
    bad = json.dumps({"fact_conflict_count": "0", "commitment_conflict_count": 0, "player_input_conflict_count": 0,
                      "total_conflict_count": 0, "conflicts": []})
    result, _ = run(settings, checkout, ncp__conflict_check=[bad])
    assert result.episode_rows() == [] and result.failed_rows()[0]["role"] == ROLE_CONFLICT_CHECK


def test_the_checkout_version_is_its_git_head_else_a_hash_of_its_files_and_is_part_of_the_identities(tmp_path,
                                                                                                       checkout):
    assert reference.load(checkout).version == f"ref-{COMMIT[:12]}"
    plain = tmp_path / "plain"
    shutil.copytree(FIXTURE, plain)
    v1 = reference.load(plain).version
    assert v1.startswith("ref-files-")
    (plain / "src/ncpbench/prompts/fact_update.txt").write_text(
        "FIXTURE changed {player_role} {pre_turn_facts} {response_text}", encoding="utf-8")
    assert reference.load(plain).version != v1

    from wse_platform import versions
    base = {"cache_dir": str(tmp_path / "c"), "warehouse_path": str(tmp_path / "w.duckdb"),
            "models": {"m": {"backend": "litellm", "model_id": "openai/m"}},
            "ncp": {"narrators": ["m"], "player_model": "m", "auditor": {"model": "m"}, "t_max": 2}}
    s_own = settings_from_dict(base)
    s_ref = settings_from_dict({**base, "ncp": {**base["ncp"], "reference": str(checkout)}})
    setup = EpisodeSetup.from_settings(s_ref, "m", "baseline+adversarial")
    assert setup.auditor.prompt_version == f"ref-{COMMIT[:12]}" and f"ref-{COMMIT[:12]}" in setup.auditor.auditor_id
    assert versions.ncp_cell_version(s_ref, "m", "baseline+adversarial") != \
        versions.ncp_cell_version(s_own, "m", "baseline+adversarial")
    before = versions.ncp_auditor_version(s_ref)
    (checkout / ".git" / "packed-refs").write_text(f"{'f' * 40} refs/heads/main\n")
    assert versions.ncp_auditor_version(s_ref) != before


def test_reference_check_names_each_missing_file_and_placeholder_mismatch(tmp_path, checkout, capsys):
    from wse_platform.cli import main
    assert main(["ncp", "reference", "check", str(checkout)]) == 0
    assert f"ref-{COMMIT[:12]}" in capsys.readouterr().out
    (checkout / "src/ncpbench/prompts/status_check.txt").unlink()
    (checkout / "src/ncpbench/prompts/opening.txt").write_text("{player_role} {current_node} {facts}")
    problems = reference.check(checkout)
    assert any("status_check.txt: missing" in p for p in problems)
    assert any("opening.txt" in p and "unexpected ['facts']" in p and "narrative_commitments" in p for p in problems)
    assert main(["ncp", "reference", "check", str(checkout)]) == 1
    with pytest.raises(reference.ReferenceError, match="status_check.txt"):
        reference.load(checkout)
