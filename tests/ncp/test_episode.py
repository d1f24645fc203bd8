"""Loop semantics of NCP-Bench episodes on scripted transcripts, through the real LLM client.

Each test scripts the outputs per role (a queue per role; the last entry repeats) and
checks what the loop did with them: termination, ledger, node, rows and which roles
were called how often.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.episode import (ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK, ROLE_CONFLICT_CONFIRM,
                                      ROLE_FACT_UPDATE, ROLE_MEMORY, ROLE_NARRATOR, ROLE_NODE_UPDATE, Architecture,
                                      AuditorSetup, EpisodeSetup, run_episodes)
from wse_platform.ncp.spec import NarrativeSpec

PLAYER = "ncp.player_adversarial"
NONE_DIFF = '{"add": [], "negate": []}'
NO_CONFLICT = '{"conflicts": []}'
NODE_NO = '{"trigger_occurred": false, "key_delta_occurred": false, "ambiguous": false, "evidence": "-"}'
NODE_YES = '{"trigger_occurred": true, "key_delta_occurred": true, "ambiguous": false, "evidence": "key dropped"}'
NO_STATUS = '{"statuses": []}'


def make_spec(spec_id: str = "m0", genre: str = "Mystery") -> NarrativeSpec:
    return NarrativeSpec.model_validate({
        "meta": {"id": spec_id, "title": "The Manor", "genres": [genre, "Drama"], "player_role": "Detective Lane"},
        "synopsis": "A detective opens a vault in an old manor.",
        "initial_facts": [
            {"id": "f_0", "content": "The vault door is locked.", "negated": False},
            {"id": "f_1", "content": "The butler hides a silver key in his coat.", "negated": False},
            {"id": "f_2", "content": "The garden gate stands open.", "negated": True},
        ],
        "commitments": [
            {"id": "c_0", "type": "achievement", "description": "Lane must open the vault by s_1.",
             "satisfaction_condition": "The vault is open at s_1.", "violation_condition": "The vault is destroyed."},
            {"id": "c_1", "type": "ordering", "description": "The key is found at s_0 before the vault opens at s_1.",
             "satisfaction_condition": "s_0 precedes s_1.", "violation_condition": "The vault opens before s_0."},
        ],
        "trajectory": [
            {"id": "s_0", "description": "Lane searches the manor hall.", "trigger_event": "The butler drops a key.",
             "key_delta": "Lane holds the silver key."},
            {"id": "s_1", "description": "Lane opens the vault with the key.", "trigger_event": "Lane turns the key.",
             "key_delta": "The vault stands open."},
        ],
    })


class Script:
    """Per-role output queues (the last entry repeats); players get fresh inputs by default."""

    def __init__(self, **queues: list[str]):
        self.queues = {k.replace("__", "."): list(v) for k, v in queues.items()}
        self.n_player = 0

    def __call__(self, call) -> list[str]:
        return [self.one(call) for _ in range(call.n)]

    def one(self, call) -> str:
        q = self.queues.get(call.role)
        if q is None:
            if call.role.startswith("ncp.player"):
                self.n_player += 1
                return json.dumps({"text": f"I try move number {self.n_player}."})
            return {ROLE_NARRATOR: '{"text": "You stand in the hall."}', ROLE_FACT_UPDATE: NONE_DIFF,
                    ROLE_CONFLICT_CHECK: NO_CONFLICT,
                    ROLE_CONFLICT_CONFIRM: '{"confirmed": false, "reason": "fine"}',
                    ROLE_NODE_UPDATE: NODE_NO, ROLE_COMMITMENT_STATUS: NO_STATUS,
                    ROLE_MEMORY: '{"summary": "Lane searched the hall and found the key."}'}[call.role]
        return q.pop(0) if len(q) > 1 else q[0]


class BatchRecorder:
    """Wraps the client to record each complete_many batch (roles, size)."""

    def __init__(self, client):
        self.client = client
        self.batches: list[tuple[tuple[str, ...], int]] = []

    def complete_many(self, reqs):
        self.batches.append((tuple(sorted({r.role for r in reqs})), len(reqs)))
        return self.client.complete_many(reqs)


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "wh.duckdb")})


def run(settings, script: Script, t_max: int = 3, arch: str = "baseline+adversarial", specs=None, count: int = 1):
    backend = ScriptedBackend(script)
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False)
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse(arch), player_model="player",
                         auditor=AuditorSetup("aud", "v1", count), t_max=t_max)
    result = run_episodes(client, specs or [make_spec()], setup)
    return result, backend


def roles(backend) -> Counter:
    return Counter(c.role for c in backend.calls)


def test_confirmed_conflict_ends_episode_before_updates_and_discards_them(settings):
    script = Script(ncp__fact_update=['{"add": ["The vault is open."], "negate": ["f_0"]}'],
                    ncp__conflict_check=['{"conflicts": [{"kind": "fact", "target_id": "f_0", '
                                         '"reason": "the locked vault is described as open"}]}'],
                    ncp__conflict_confirm=['{"confirmed": true, "reason": "f_0 says locked"}'])
    result, backend = run(settings, script, t_max=5)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["turns"] == 1 and ep["conflict_kinds"] == ["fact"]
    run_ = result.runs[0]
    # the candidate diff was not applied: f_0 still active, no new fact
    assert run_.ledger.get("f_0").active and [f.id for f in run_.ledger.all()] == ["f_0", "f_1", "f_2"]
    row = result.turn_rows()[-1]
    assert row["outcome"] == "CONFLICT"
    diff = json.loads(row["fact_diff_json"])
    assert diff["discarded"] is True and diff["applied"] is None
    report = json.loads(row["conflict_report_json"])
    assert report["double_checked"] is True and report["counts"] == {"fact": 1, "commitment": 0, "player_input": 0}
    assert report["conflicts"][0]["confirmed"] is True and report["review_reason"] == "f_0 says locked"
    # nothing after the conflict: no node/commitment stage, no further turns
    r = roles(backend)
    assert r[ROLE_NODE_UPDATE] == 0 and r[ROLE_COMMITMENT_STATUS] == 0 and r[PLAYER] == 1
    assert row["llm_call_ids"] and len(row["llm_call_ids"]) == 5  # player, narrator, diff, check, confirm


def test_double_check_demotes_an_unconfirmed_conflict_and_the_turn_is_applied(settings):
    script = Script(ncp__fact_update=['{"add": ["Lane holds a lamp."], "negate": ["f_0"]}', NONE_DIFF],
                    ncp__conflict_check=['{"conflicts": [{"kind": "player_input", "target_id": "player_input", '
                                         '"reason": "ignored"}]}', NO_CONFLICT],
                    ncp__conflict_confirm=['{"confirmed": false, "reason": "the world blocked it with a reason"}'])
    result, backend = run(settings, script, t_max=2)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 2 and ep["conflict_kinds"] == []
    ledger = result.runs[0].ledger
    assert not ledger.get("f_0").active and ledger.get("f_0").negated_turn == 1  # negated, kept
    assert ledger.get("f_3").content == "Lane holds a lamp." and ledger.get("f_3").added_turn == 1
    row1 = result.turn_rows()[1]
    report = json.loads(row1["conflict_report_json"])
    assert report["double_checked"] and report["conflicts"][0]["confirmed"] is False
    assert report["confirmed_counts"]["player_input"] == 0
    assert json.loads(row1["fact_diff_json"])["applied"]["added"] == ["f_3"]
    assert roles(backend)[ROLE_CONFLICT_CONFIRM] == 1


def test_node_advances_only_on_trigger_and_key_delta_and_never_on_ambiguity(settings):
    trigger_only = '{"trigger_occurred": true, "key_delta_occurred": false, "ambiguous": false, "evidence": "x"}'
    both_ambiguous = '{"trigger_occurred": true, "key_delta_occurred": true, "ambiguous": true, "evidence": "x"}'
    script = Script(ncp__node_update=[trigger_only, both_ambiguous, NODE_YES, NODE_NO])
    result, _ = run(settings, script, t_max=4)
    rows = result.turn_rows()
    assert [(r["node_before"], r["node_after"]) for r in rows[1:]] == [
        ("s_0", "s_0"), ("s_0", "s_0"), ("s_0", "s_1"), ("s_1", "s_1")]
    (ep,) = result.episode_rows()
    assert ep["nodes_completed"] == 1 and ep["trajectory_progress"] == pytest.approx(0.5)


def test_success_when_all_achievements_satisfied_with_valid_evidence(settings):
    bogus = '{"statuses": [{"commitment_id": "c_0", "status": "SATISFIED", "evidence": ["f_99"]}]}'
    good = '{"statuses": [{"commitment_id": "c_0", "status": "SATISFIED", "evidence": ["f_3", "s_0"]}]}'
    script = Script(ncp__fact_update=[NONE_DIFF, '{"add": ["The vault stands open."], "negate": []}'],
                    ncp__node_update=[NODE_YES, NODE_NO], ncp__commitment_status=[bogus, good])
    result, backend = run(settings, script, t_max=6)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SUCCESS" and ep["turns"] == 2
    assert ep["commitments_satisfied_share"] == pytest.approx(0.5)  # c_0 of {c_0, c_1}
    rows = result.turn_rows()
    turn1 = json.loads(rows[1]["commitment_status_json"])
    assert turn1["rejected"][0]["commitment_id"] == "c_0" and turn1["statuses"]["c_0"]["status"] == "PENDING"
    turn2 = json.loads(rows[2]["commitment_status_json"])
    assert turn2["statuses"]["c_0"] == {"status": "SATISFIED", "evidence": ["f_3", "s_0"], "turn": 2}
    assert rows[2]["outcome"] == "SUCCESS" and roles(backend)[PLAYER] == 2


def test_survival_at_t_max(settings):
    result, backend = run(settings, Script(), t_max=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "SURVIVAL" and ep["turns"] == 3 and ep["invalid_role"] is None
    assert [r["turn"] for r in result.turn_rows()] == [0, 1, 2, 3]
    assert roles(backend)[ROLE_NARRATOR] == 4  # opening + 3 turns


def test_invalid_after_three_bad_outputs_is_recorded_not_a_conflict(settings):
    script = Script(ncp__narrator=['{"text": "You wake up in the hall."}', "not json at all"])
    result, backend = run(settings, script, t_max=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "INVALID" and ep["invalid_role"] == ROLE_NARRATOR
    assert ep["turns"] == 0 and ep["conflict_kinds"] == [] and "invalid_json" in ep["invalid_message"]
    assert roles(backend)[ROLE_NARRATOR] == 1 + 3  # opening, then three attempts at turn 1
    assert result.turn_rows()[-1]["outcome"] == "INVALID"


def test_narrator_over_150_words_is_invalid(settings):
    long = json.dumps({"text": " ".join(["word"] * 151)})
    script = Script(ncp__narrator=['{"text": "You wake up."}', long])
    result, _ = run(settings, script, t_max=2)
    assert result.episode_rows()[0]["termination"] == "INVALID"


def test_player_repeating_its_last_input_is_retried(settings):
    script = Script(ncp__player_adversarial=['{"text": "I accuse the butler!"}', '{"text": "I accuse the butler!"}',
                                             '{"text": "I demand the vault key now."}'])
    result, backend = run(settings, script, t_max=2)
    inputs = [r["player_input"] for r in result.turn_rows()[1:]]
    assert inputs == ["I accuse the butler!", "I demand the vault key now."]
    assert roles(backend)[PLAYER] == 3  # turn 2 needed a second attempt


def test_player_sees_only_the_visible_transcript(settings):
    spec = make_spec()
    secret = [f.content for f in spec.initial_facts] + [c.description for c in spec.commitments] + \
             [x for n in spec.trajectory for x in (n.description, n.trigger_event, n.key_delta)]
    _, backend = run(settings, Script(ncp__narrator=['{"text": "You stand in a dusty hall."}']), t_max=2)
    player_calls = [c for c in backend.calls if c.role == PLAYER]
    assert len(player_calls) == 2
    for call in player_calls:
        text = "\n".join(m["content"] for m in call.messages)
        assert "Detective Lane" in text and "You stand in a dusty hall." in text
        for s in secret:
            assert s not in text
        assert "f_0" not in text and "c_0" not in text and "s_0" not in text
    # whereas the narrator does get them
    narr = next(c for c in backend.calls if c.role == ROLE_NARRATOR)
    assert spec.initial_facts[0].content in "\n".join(m["content"] for m in narr.messages)


def test_episodes_of_a_cell_run_in_lockstep_one_batch_per_stage(settings):
    backend = ScriptedBackend(Script())
    client = BatchRecorder(LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend},
                                     progress=False))
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+natural"), player_model="player",
                         auditor=AuditorSetup("aud"), t_max=2)
    result = run_episodes(client, [make_spec("m0"), make_spec("m1"), make_spec("m2")], setup)
    assert [e["termination"] for e in result.episode_rows()] == ["SURVIVAL"] * 3
    per_turn = [(("ncp.player_natural",), 3), ((ROLE_NARRATOR,), 3), ((ROLE_CONFLICT_CHECK, ROLE_FACT_UPDATE), 6),
                ((ROLE_NODE_UPDATE,), 3), ((ROLE_COMMITMENT_STATUS,), 3)]
    assert client.batches == [((ROLE_NARRATOR,), 3)] + per_turn * 2


def _memory_script() -> Script:
    return Script(ncp__narrator=['{"text": "You enter the manor."}', '{"text": "The butler drops a key; you grab it."}',
                                 '{"text": "You face the vault."}'],
                  ncp__node_update=[NODE_YES, NODE_NO])


def test_memory_narrator_sees_summaries_instead_of_completed_turns(settings):
    result, backend = run(settings, _memory_script(), t_max=3, arch="memory+adversarial")
    assert roles(backend)[ROLE_MEMORY] == 1  # s_0 completed at turn 1
    narr_calls = [c for c in backend.calls if c.role == ROLE_NARRATOR]
    turn2_prompt = "\n".join(m["content"] for m in narr_calls[2].messages)
    assert "Lane searched the hall and found the key." in turn2_prompt
    assert "The butler drops a key; you grab it." not in turn2_prompt  # compressed away
    mem = json.loads(result.turn_rows()[1]["memory_json"])
    assert mem["new_segment"]["node_id"] == "s_0" and mem["new_segment"]["complete"] is True
    assert (mem["new_segment"]["first_turn"], mem["new_segment"]["last_turn"]) == (0, 1)
    # the baseline narrator keeps the verbatim turn and never summarises
    _, base = run(settings, _memory_script(), t_max=3)
    base_turn2 = "\n".join(m["content"] for m in [c for c in base.calls if c.role == ROLE_NARRATOR][2].messages)
    assert "The butler drops a key; you grab it." in base_turn2 and roles(base)[ROLE_MEMORY] == 0


def test_confirmation_majority_with_count_three(settings):
    script = Script(ncp__conflict_check=['{"conflicts": [{"kind": "commitment", "target_id": "c_1", '
                                         '"reason": "vault opened early"}]}'],
                    ncp__conflict_confirm=['{"confirmed": true, "reason": "a"}', '{"confirmed": false, "reason": "b"}',
                                           '{"confirmed": true, "reason": "c"}'])
    result, _ = run(settings, script, t_max=3, count=3)
    (ep,) = result.episode_rows()
    assert ep["termination"] == "CONFLICT" and ep["conflict_kinds"] == ["commitment"]
    assert ep["auditor_id"] == "ncp.auditor:aud:v1:x3"


def test_output_schemas_bound_every_string_within_llama_cpp_grammar_limits():
    """Every free-text field has a maxLength (so constrained decoding closes the JSON) and no cap
    exceeds 1000, the largest repetition llama.cpp grammars accept."""
    from wse_platform.ncp import schemas

    def strings(node, path):
        if isinstance(node, dict):
            if node.get("type") == "string" and "enum" not in node and "pattern" not in node:
                yield path, node.get("maxLength")
            for k, v in node.items():
                yield from strings(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from strings(v, f"{path}[{i}]")

    models = [schemas.PlayerTurn, schemas.NarratorResponse, schemas.FactDiff, schemas.ConflictReport,
              schemas.ConfirmationVerdict, schemas.NodeAssessment, schemas.CommitmentStatusUpdate,
              schemas.MemorySummary]
    found = [(m.__name__ + p, cap) for m in models for p, cap in strings(m.model_json_schema(), "")]
    assert len(found) >= 8
    assert [f for f in found if f[1] is None or f[1] > 1000] == []


@pytest.mark.slow
def test_end_to_end_on_the_embedded_model_through_dagster(tmp_path):
    """1 spec, 2 turns on SmolLM2-135M: episodes, re-audit (in-loop auditor, answered from the
    cache) and every NCP table materialize. Outcomes of a 135M model are poor; we check shape
    and the replay invariants, not quality."""
    pytest.importorskip("llama_cpp")
    import yaml
    from dagster import AssetChecksDefinition, AssetsDefinition, materialize

    from assets.ncp import episodes as ep_assets, specs as spec_assets, tables as table_assets
    from assets.partitions import build_partitions, cell_key
    from resources import LLMResource, SettingsResource, WarehouseResource, settings_for
    from wse_platform.config import REPO_ROOT
    from wse_platform.warehouse import Warehouse

    shipped = yaml.safe_load((REPO_ROOT / "wse.yaml").read_text(encoding="utf-8"))
    cfg = {"profile": "demo", "warehouse_path": str(tmp_path / "wh.duckdb"), "cache_dir": str(tmp_path / "cache"),
           "artifacts_dir": str(tmp_path / "artifacts"), "models": {"smollm2": shipped["models"]["smollm2"]},
           "ncp": {"narrators": ["smollm2"], "architectures": ["baseline+adversarial"], "player_model": "smollm2",
                   "auditor": {"model": "smollm2", "prompt_version": "v1"}, "t_max": 2, "n_specs": 1,
                   "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 256}}}
    path = tmp_path / "wse.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    config = str(path)
    s = settings_for(config)
    parts = build_partitions(s)
    objs = [o for m in (spec_assets, ep_assets, table_assets) for o in m.build(s, parts)]
    resources = {"settings": SettingsResource(config_path=config), "warehouse": WarehouseResource(config_path=config),
                 "llm": LLMResource(config_path=config)}

    def run(names, partition_key=None):
        sel = [o for o in objs if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition)
               and {k.to_user_string() for k in o.keys} <= names]
        result = materialize(sel, partition_key=partition_key, resources=resources)
        assert result.success
        return result

    cell = str(cell_key("smollm2", "baseline+adversarial"))
    run({"ncp_specs"})
    run({"ncp_episodes", "ncp_turns"}, cell)
    replay = run({"ncp_reaudit_episodes", "ncp_reaudit_turns"}, cell)
    run({"ncp_summary", "ncp_survival", "ncp_auditor_sensitivity", "ncp_genre"})

    wh = Warehouse(tmp_path / "wh.duckdb")
    (ep,) = wh.query("SELECT * FROM ncp_episodes").to_dicts()
    assert ep["termination"] in ("CONFLICT", "SUCCESS", "SURVIVAL", "INVALID") and 0 <= ep["turns"] <= 2
    assert (ep["invalid_role"] is not None) == (ep["termination"] == "INVALID")
    turns = wh.query("SELECT * FROM ncp_turns ORDER BY turn").to_dicts()
    assert turns[0]["turn"] == 0 and all(t["llm_call_ids"] for t in turns)
    (re,) = wh.query("SELECT * FROM ncp_reaudit_episodes").to_dicts()
    assert re["turns"] == ep["turns"]  # same auditor, same transcript → same censoring point
    # a failed player/narrator call leaves a shorter transcript, which the replay censors
    generation_failed = ep["termination"] == "INVALID" and ep["invalid_role"] in (
        "ncp.player_adversarial", "ncp.narrator", "ncp.memory_summary")
    assert re["termination"] == ("CENSORED" if generation_failed else ep["termination"])
    fresh = wh.query("SELECT count(*) AS n FROM llm_calls WHERE run_id = ? AND NOT cache_hit", [replay.run_id])
    assert fresh["n"][0] == 0  # the replay was answered entirely from the cache
    assert wh.query("SELECT count(*) AS n FROM ncp_summary")["n"][0] == 1
    assert wh.query("SELECT turn FROM ncp_survival ORDER BY turn")["turn"].to_list() == [0, 1, 2]
    assert wh.query("SELECT count(*) AS n FROM ncp_genre")["n"][0] == 1
    assert wh.query("SELECT row_type FROM ncp_auditor_sensitivity")["row_type"].to_list() == ["auditor"]
    assert (tmp_path / "artifacts" / "ncp" / "survival.png").exists()
