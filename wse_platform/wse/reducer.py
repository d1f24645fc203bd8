"""Deterministic rule-based reducer M_t + MemoryDelta → M_{t+1}, and actor-centric projections.

The reducer is the only thing that changes structured memory: it applies the
World Memory Agent's explicit operations and nothing else (no inference), and it
is atomic — one bad operation (unknown id, duplicate, self-relationship, blank
text) rejects the whole delta and leaves the state untouched, which the
simulation records as a World Memory Agent failure.
"""
from __future__ import annotations

from wse_platform.wse.schemas import (
    ActorRelationship,
    AddFact,
    AddSupportingCharacter,
    CharacterMemory,
    CharacterState,
    FactState,
    KnownCharacter,
    MemoryDelta,
    RelationshipState,
    RemoveFact,
    RemoveRelationship,
    SetCondition,
    SetLocation,
    SetRelationship,
    UpdateFact,
    WorldState,
)
from wse_platform.wse.world import EpisodeSeed


class DeltaRejected(ValueError):
    """A MemoryDelta that cannot be applied; carries the offending operation index."""

    def __init__(self, op_index: int, op_name: str, reason: str):
        super().__init__(f"operation {op_index} ({op_name}): {reason}")
        self.op_index = op_index
        self.op_name = op_name
        self.reason = reason


def initial_state(seed: EpisodeSeed) -> WorldState:
    """M_0 built from the seed's start world: cast, relationships within the cast, facts, time."""
    return WorldState(
        day=seed.time.day,
        time_label=seed.time.label,
        characters=[CharacterState(id=c.id, name=c.name, description=c.description, condition=c.condition,
                                   location=c.location, kind="cast") for c in seed.cast],
        relationships=[RelationshipState(a=r.a, b=r.b, description=r.description) for r in seed.relationships],
        facts=[FactState(id=f.id, text=f.text) for f in seed.facts],
    )


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def apply_delta(state: WorldState, delta: MemoryDelta) -> WorldState:
    """Return M_{t+1}; raise DeltaRejected (state untouched) if any operation is invalid.

    Operations apply in order on a working copy, so an operation may refer to a
    supporting character or fact added earlier in the same delta.
    """
    chars: dict[str, CharacterState] = {c.id: c for c in state.characters}
    rels: dict[tuple[str, str], RelationshipState] = {(r.a, r.b): r for r in state.relationships}
    facts: dict[str, FactState] = {f.id: f for f in state.facts}

    def need_char(i: int, op: str, cid: str) -> CharacterState:
        if cid not in chars:
            raise DeltaRejected(i, op, f"unknown character id {cid!r} (known: {sorted(chars)})")
        return chars[cid]

    def need_text(i: int, op: str, field: str, value: str) -> None:
        if not value.strip():
            raise DeltaRejected(i, op, f"{field} is blank")

    for i, op in enumerate(delta.operations):
        name = op.op
        if isinstance(op, SetCondition):
            need_text(i, name, "condition", op.condition)
            c = need_char(i, name, op.character_id)
            chars[c.id] = c.model_copy(update={"condition": op.condition})
        elif isinstance(op, SetLocation):
            need_text(i, name, "location", op.location)
            c = need_char(i, name, op.character_id)
            chars[c.id] = c.model_copy(update={"location": op.location})
        elif isinstance(op, SetRelationship):
            need_text(i, name, "description", op.description)
            if op.a == op.b:
                raise DeltaRejected(i, name, f"relationship of {op.a!r} with itself")
            need_char(i, name, op.a)
            need_char(i, name, op.b)
            a, b = _pair(op.a, op.b)
            rels[(a, b)] = RelationshipState(a=a, b=b, description=op.description)
        elif isinstance(op, RemoveRelationship):
            key = _pair(op.a, op.b)
            if key not in rels:
                raise DeltaRejected(i, name, f"no relationship between {op.a!r} and {op.b!r}")
            del rels[key]
        elif isinstance(op, AddFact):
            need_text(i, name, "text", op.text)
            if op.fact_id in facts:
                raise DeltaRejected(i, name, f"fact id {op.fact_id!r} already exists (use update_fact)")
            facts[op.fact_id] = FactState(id=op.fact_id, text=op.text)
        elif isinstance(op, UpdateFact):
            need_text(i, name, "text", op.text)
            if op.fact_id not in facts:
                raise DeltaRejected(i, name, f"unknown fact id {op.fact_id!r} (known: {sorted(facts)})")
            facts[op.fact_id] = FactState(id=op.fact_id, text=op.text)
        elif isinstance(op, RemoveFact):
            if op.fact_id not in facts:
                raise DeltaRejected(i, name, f"unknown fact id {op.fact_id!r} (known: {sorted(facts)})")
            del facts[op.fact_id]
        elif isinstance(op, AddSupportingCharacter):
            for field in ("name", "description", "condition", "location"):
                need_text(i, name, field, getattr(op, field))
            if op.character_id in chars:
                raise DeltaRejected(i, name, f"character id {op.character_id!r} already exists")
            chars[op.character_id] = CharacterState(
                id=op.character_id, name=op.name, description=op.description, condition=op.condition,
                location=op.location, kind="supporting")
        else:  # pragma: no cover - the discriminated union admits nothing else
            raise DeltaRejected(i, str(name), "unknown operation")

    return WorldState(day=state.day, time_label=state.time_label, characters=list(chars.values()),
                      relationships=list(rels.values()), facts=list(facts.values()))


def try_apply_delta(state: WorldState, delta: MemoryDelta) -> tuple[WorldState, DeltaRejected | None]:
    """(new state, None) or (the unchanged state, the rejection)."""
    try:
        return apply_delta(state, delta), None
    except DeltaRejected as rej:
        return state, rej


def advance_day(state: WorldState, days: int = 1) -> WorldState:
    """Time is driven by the Story Agent's new_day flag, not by memory operations."""
    return state.model_copy(update={"day": state.day + days})


def project_character_memory(state: WorldState, actor_id: str) -> CharacterMemory:
    """What one NPC's Character Agent is shown: itself, its relationships, characters it is
    related to or co-located with, and the persistent facts. Sorted, so the projection is a
    pure function of the state."""
    me = state.character(actor_id)
    if me is None:
        raise KeyError(f"actor {actor_id!r} is not in the world state (known: {[c.id for c in state.characters]})")
    names = {c.id: c.name for c in state.characters}
    rels = []
    related: set[str] = set()
    for r in state.relationships:
        if actor_id in (r.a, r.b):
            other = r.b if r.a == actor_id else r.a
            related.add(other)
            rels.append(ActorRelationship(other_id=other, other_name=names.get(other, other),
                                          description=r.description))
    known = [KnownCharacter(id=c.id, name=c.name, condition=c.condition, location=c.location)
             for c in state.characters
             if c.id != actor_id and (c.id in related or c.location == me.location)]
    return CharacterMemory(
        actor_id=me.id, name=me.name, description=me.description, condition=me.condition,
        location=me.location, day=state.day, time_label=state.time_label,
        relationships=sorted(rels, key=lambda r: r.other_id),
        known_characters=sorted(known, key=lambda k: k.id),
        facts=sorted(state.facts, key=lambda f: f.id),
    )
