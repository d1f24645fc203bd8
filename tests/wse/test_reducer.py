"""The deterministic memory reducer and the actor-centric projection."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.wse._wse_sim_helpers import make_seed
from wse_platform.wse.reducer import (
    DeltaRejected,
    advance_day,
    apply_delta,
    initial_state,
    project_character_memory,
    try_apply_delta,
)
from wse_platform.wse.schemas import MemoryDelta, WorldState


def delta(*ops: dict) -> MemoryDelta:
    return MemoryDelta.model_validate({"operations": list(ops)})


@pytest.fixture
def state() -> WorldState:
    return initial_state(make_seed("A"))


def test_initial_state_mirrors_the_seed(state):
    assert [c.id for c in state.characters] == ["pia", "nora", "olaf", "rune", "sara"]
    assert {(r.a, r.b) for r in state.relationships} == {("nora", "pia"), ("olaf", "rune"), ("pia", "sara")}
    assert [f.id for f in state.facts] == ["f1"] and state.day == 0


def test_all_operations_apply_and_unchanged_entries_persist(state):
    new = apply_delta(state, delta(
        {"op": "set_condition", "character_id": "nora", "condition": "injured"},
        {"op": "set_location", "character_id": "olaf", "location": "river"},
        {"op": "set_relationship", "a": "rune", "b": "olaf", "description": "reconciled"},   # reversed ids
        {"op": "remove_relationship", "a": "sara", "b": "pia"},
        {"op": "add_fact", "fact_id": "f2", "text": "The bridge is down."},
        {"op": "update_fact", "fact_id": "f1", "text": "The river flooded this spring."},
        {"op": "add_supporting_character", "character_id": "vet", "name": "The vet", "description": "a vet",
         "condition": "busy", "location": "town"},
        {"op": "set_relationship", "a": "vet", "b": "nora", "description": "treats her"},  # refers to the new one
    ))
    chars = {c.id: c for c in new.characters}
    assert chars["nora"].condition == "injured" and chars["nora"].location == "farmhouse"
    assert chars["olaf"].location == "river" and chars["olaf"].condition == "well"
    assert chars["vet"].kind == "supporting"
    for cid in ("pia", "rune", "sara"):          # untouched entries are carried over unchanged
        assert chars[cid] == state.character(cid)
    rels = {(r.a, r.b): r.description for r in new.relationships}
    assert rels == {("nora", "pia"): "sisters", ("olaf", "rune"): "reconciled", ("nora", "vet"): "treats her"}
    assert {f.id: f.text for f in new.facts} == {"f1": "The river flooded this spring.", "f2": "The bridge is down."}
    # the input state object is never modified
    assert state.character("nora").condition == "well" and len(state.relationships) == 3


def test_empty_delta_is_identity(state):
    assert apply_delta(state, delta()) == state


@pytest.mark.parametrize("bad_op, reason", [
    ({"op": "set_condition", "character_id": "ghost", "condition": "x"}, "unknown character id 'ghost'"),
    ({"op": "set_relationship", "a": "pia", "b": "pia", "description": "self"}, "with itself"),
    ({"op": "set_relationship", "a": "pia", "b": "ghost", "description": "x"}, "unknown character id"),
    ({"op": "remove_relationship", "a": "nora", "b": "olaf"}, "no relationship"),
    ({"op": "add_fact", "fact_id": "f1", "text": "dup"}, "already exists"),
    ({"op": "update_fact", "fact_id": "f9", "text": "x"}, "unknown fact id"),
    ({"op": "remove_fact", "fact_id": "f9"}, "unknown fact id"),
    ({"op": "add_supporting_character", "character_id": "nora", "name": "N", "description": "d",
      "condition": "c", "location": "l"}, "already exists"),
    ({"op": "set_condition", "character_id": "nora", "condition": "   "}, "blank"),
])
def test_a_bad_operation_rejects_the_whole_delta(state, bad_op, reason):
    before = state.model_dump()
    d = delta({"op": "set_condition", "character_id": "nora", "condition": "injured"},  # valid, comes first
              {"op": "add_fact", "fact_id": "f2", "text": "new"},
              bad_op)
    with pytest.raises(DeltaRejected, match=reason) as exc:
        apply_delta(state, d)
    assert exc.value.op_index == 2
    same, rejection = try_apply_delta(state, d)
    assert same is state and rejection is not None and rejection.op_index == 2
    assert state.model_dump() == before     # nothing of the valid first operations leaked


def test_malformed_operations_are_invalid_output():
    with pytest.raises(ValidationError):
        delta({"op": "teleport", "character_id": "nora"})
    with pytest.raises(ValidationError):
        delta({"op": "set_condition", "character_id": "nora"})        # missing field
    with pytest.raises(ValidationError):
        MemoryDelta.model_validate({"operations": [], "comment": "extra keys are not allowed"})


def test_projection_is_actor_centric_and_deterministic(state):
    state = apply_delta(state, delta({"op": "set_location", "character_id": "olaf", "location": "river"},
                                     {"op": "set_location", "character_id": "rune", "location": "river"}))
    m = project_character_memory(state, "pia")
    assert m.actor_id == "pia" and m.location == "farmhouse"
    assert [r.other_id for r in m.relationships] == ["nora", "sara"]
    # related (nora, sara) or co-located (nora, sara at the farmhouse); olaf/rune are at the river, unrelated
    assert [k.id for k in m.known_characters] == ["nora", "sara"]
    m_olaf = project_character_memory(state, "olaf")
    assert [r.other_id for r in m_olaf.relationships] == ["rune"]
    assert [k.id for k in m_olaf.known_characters] == ["rune"]
    # permuting the state's lists does not change any projection
    shuffled = WorldState(day=state.day, time_label=state.time_label, characters=state.characters[::-1],
                          relationships=state.relationships[::-1], facts=state.facts[::-1])
    for cid in ("pia", "nora", "olaf", "rune", "sara"):
        assert project_character_memory(shuffled, cid) == project_character_memory(state, cid)
    assert project_character_memory(advance_day(state), "pia").day == 1
    with pytest.raises(KeyError, match="ghost"):
        project_character_memory(state, "ghost")
