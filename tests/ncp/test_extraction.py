"""Three-stage spec extraction through the real client path with a scripted backend."""
from __future__ import annotations

import json

import pytest

from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.ncp.extraction import compare_extracted, extract_spec, extract_specs, extraction_rows
from wse_platform.ncp.spec import NarrativeSpec, SpecMeta

TRAJECTORY = json.dumps({"nodes": [
    {"description": "Ana gets the job offer.", "trigger_event": "A stranger calls Ana.", "key_delta": "Ana has a target."},
    {"description": "Ana breaks into the bank.", "trigger_event": "The guard leaves.", "key_delta": "Ana holds the gold."},
]})
COMMITMENTS = json.dumps({"commitments": [
    {"type": "ordering", "description": "The offer comes before the break-in.",
     "satisfaction_condition": "s_0 happens before s_1.", "violation_condition": "s_1 happens before s_0."},
    {"type": "achievement", "description": "Ana ends with the gold.",
     "satisfaction_condition": "Ana holds the gold.", "violation_condition": "The gold is lost for good."},
]})
FACTS = json.dumps({"facts": [
    {"content": "Ana is at home.", "negated": False},
    {"content": "Ana does not yet know about the bank job.", "negated": False},
    {"content": "Ana owns a getaway car.", "negated": True},
]})
# Names node s_5 of a two-node trajectory: schema-valid JSON, rejected by the stage's validator.
DANGLING = json.dumps({"commitments": [
    {"type": "ordering", "description": "Before s_5.", "satisfaction_condition": "s_0 before s_5.",
     "violation_condition": "s_5 first."}]})

META = SpecMeta(id="movie77", title="Heist——Again", genres=["Crime", "Drama"], player_role="Ana")
SYNOPSIS = "Ana, a retired thief, is offered one last job and robs a bank."


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({
        "cache_dir": str(tmp_path / "cache"), "warehouse_path": str(tmp_path / "w.duckdb"), "use_cache": False,
        "models": {"scripted": {"backend": "embedded", "model_id": "none"}},
    })


def client_with(settings, script) -> tuple[LLMClient, ScriptedBackend]:
    backend = ScriptedBackend(script)
    return LLMClient(settings, backends={"scripted": backend}, use_cache=False, progress=False), backend


def roles(backend: ScriptedBackend) -> list[str]:
    return [c.role for c in backend.calls]


def test_valid_stages_give_a_valid_spec(settings):
    client, backend = client_with(settings, {"ncp.extract_trajectory": TRAJECTORY,
                                             "ncp.extract_commitments": COMMITMENTS, "ncp.extract_facts": FACTS})
    res = extract_spec(client, "scripted", (META, SYNOPSIS))
    assert res.ok and res.failed_stage is None
    spec = res.spec
    assert isinstance(spec, NarrativeSpec)
    assert spec.meta == META and spec.synopsis == SYNOPSIS
    assert [n.id for n in spec.trajectory] == ["s_0", "s_1"]
    assert [(c.id, c.type) for c in spec.commitments] == [("c_0", "ordering"), ("c_1", "achievement")]
    assert [(f.id, f.negated) for f in spec.initial_facts] == [("f_0", False), ("f_1", False), ("f_2", True)]
    assert spec.commitment_links() == {"c_0": ["s_0", "s_1"], "c_1": []}
    assert roles(backend) == ["ncp.extract_trajectory", "ncp.extract_commitments", "ncp.extract_facts"]
    assert len(res.call_ids) == 3
    # Later stages see what the earlier stages produced, with the assigned ids.
    commit_prompt = " ".join(m["content"] for m in backend.calls[1].messages)
    assert "s_1: Ana breaks into the bank." in commit_prompt and "s_0 to s_1" in commit_prompt
    facts_prompt = " ".join(m["content"] for m in backend.calls[2].messages)
    assert "c_0 (ordering)" in facts_prompt and "s_0: Ana gets the job offer." in facts_prompt
    # the paper's facts prompt gets the whole trajectory R (and is told to record only what holds at r_0)
    assert "s_1: Ana breaks into the bank." in facts_prompt and "Starting node:" in facts_prompt
    traj_prompt = " ".join(m["content"] for m in backend.calls[0].messages)
    assert SYNOPSIS in traj_prompt and "Ana" in traj_prompt


def test_invalid_stage_after_retries_is_a_recorded_failure(settings):
    client, backend = client_with(settings, {"ncp.extract_trajectory": TRAJECTORY,
                                             "ncp.extract_commitments": DANGLING, "ncp.extract_facts": FACTS})
    res = extract_spec(client, "scripted", (META, SYNOPSIS))
    assert not res.ok and res.spec is None
    assert res.failed_stage == "commitments"
    assert res.error_kind == "schema_violation"
    assert "s_1" in res.error_message and "3 attempt" in res.error_message
    assert roles(backend).count("ncp.extract_commitments") == 3
    assert "ncp.extract_facts" not in roles(backend)  # no later stage runs on a failed one
    row = extraction_rows([res]).to_dicts()[0]
    assert row["ok"] is False and row["failed_stage"] == "commitments" and row["spec_json"] is None
    assert row["n_facts"] is None


def test_ordering_gate_without_node_id_is_retried(settings):
    no_ids = json.dumps({"commitments": [{"type": "ordering", "description": "The offer comes first.",
                                          "satisfaction_condition": "Offer first.", "violation_condition": "Heist first."}]})
    client, backend = client_with(settings, {"ncp.extract_trajectory": TRAJECTORY,
                                             "ncp.extract_commitments": [no_ids, COMMITMENTS],
                                             "ncp.extract_facts": FACTS})
    res = extract_spec(client, "scripted", (META, SYNOPSIS))
    assert res.ok
    assert roles(backend).count("ncp.extract_commitments") == 2
    assert len(res.call_ids) == 4  # one call id per attempt


def test_batch_keeps_order_and_isolates_failures(settings):
    other = SpecMeta(id="movie78", title="Other", genres=["Drama", "Crime"], player_role="Bo")

    def script(call):
        text = " ".join(m["content"] for m in call.messages)
        if call.role == "ncp.extract_trajectory":
            return "not json" if "Player role: Bo" in text else TRAJECTORY
        return {"ncp.extract_commitments": COMMITMENTS, "ncp.extract_facts": FACTS}[call.role]

    client, backend = client_with(settings, script)
    results = extract_specs(client, "scripted", [(other, "Bo waits."), (META, SYNOPSIS)])
    assert [r.spec_id for r in results] == ["movie78", "movie77"]
    assert (results[0].ok, results[0].failed_stage, results[0].error_kind) == (False, "trajectory", "invalid_json")
    assert results[1].ok
    assert roles(backend).count("ncp.extract_trajectory") == 1 + 3


def _spec(spec_id: str, n_facts: int, types: list[str], n_nodes: int) -> NarrativeSpec:
    return NarrativeSpec(
        meta=SpecMeta(id=spec_id, title="T", genres=["Drama", "War"], player_role="P"), synopsis="S",
        initial_facts=[{"id": f"f_{i}", "content": f"fact {i}", "negated": False} for i in range(n_facts)],
        commitments=[{"id": f"c_{i}", "type": t, "description": "d s_0", "satisfaction_condition": "a",
                      "violation_condition": "b"} for i, t in enumerate(types)],
        trajectory=[{"id": f"s_{i}", "description": "x", "trigger_event": "y", "key_delta": "z"}
                    for i in range(n_nodes)])


def test_comparison_on_a_hand_made_pair():
    released = _spec("movie01", 2, ["invariant", "ordering", "achievement", "ordering"], 3)
    extracted = _spec("movie01", 5, ["ordering", "ordering"], 2)
    df = compare_extracted([("m", "movie01", extracted), ("m2", "movie01", None)], [released])
    got = {(r["extraction_model"], r["quantity"]): (r["released"], r["extracted"], r["diff"],
                                                    r["released_share"], r["extracted_share"])
           for r in df.to_dicts()}
    assert got[("m", "facts")] == (2, 5, 3, None, None)
    assert got[("m", "commitments")] == (4, 2, -2, None, None)
    assert got[("m", "trajectory_nodes")] == (3, 2, -1, None, None)
    assert got[("m", "invariant")] == (1, 0, -1, 0.25, 0.0)
    assert got[("m", "ordering")] == (2, 2, 0, 0.5, 1.0)
    assert got[("m", "achievement")] == (1, 0, -1, 0.25, 0.0)
    assert got[("m2", "facts")] == (2, None, None, None, None)
    assert got[("m2", "ordering")] == (2, None, None, 0.5, None)
    assert df.filter(df["extraction_model"] == "m2")["ok"].to_list() == [False] * 6
    with pytest.raises(KeyError, match="movie09"):
        compare_extracted([("m", "movie09", extracted)], [released])


def test_paper_profile_extraction_budget_fits_the_released_specs():
    """Most released trajectories and commitment sets exceed 1,024 tokens as JSON; the paper profile's
    extraction budget holds the largest of them (estimate: 1 token per 3 characters, generous for
    English JSON)."""
    import json as _json

    from tests.ncp._ncp_helpers import released_specs
    from wse_platform.config import settings_from_dict

    specs = released_specs()
    budget = settings_from_dict({"profile": "paper"}).ncp.extraction_sampling.max_tokens
    demo = settings_from_dict({}).ncp.extraction_sampling.max_tokens

    def tokens(items) -> int:
        return len(_json.dumps([i.model_dump(exclude={"id"}) for i in items], ensure_ascii=False)) // 3

    for part in ("trajectory", "commitments", "initial_facts"):
        sizes = [tokens(getattr(s, part)) for s in specs]
        assert max(sizes) < budget, part
    over = sum(tokens(s.trajectory) > 1024 for s in specs) / len(specs)
    assert over > 0.5 and demo == 1024  # why the default budget is not enough at paper scale
