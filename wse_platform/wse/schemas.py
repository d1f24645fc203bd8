"""Pydantic models of everything WSE-bench agents and judges emit, and of what we store.

LLM outputs are validated by the client into these classes; a violation is an
invalid output (retried, then recorded as a failure), so rules that the paper
states as part of an output's definition live here as validators. Where a rule
depends on the episode (which NPC ids exist, the current step), a cached
subclass narrows the field types (`Literal` ids, step bounds) so a
grammar-constrained backend cannot even produce an out-of-range id.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

PLAYER_INTENT_ID = "player"      # source_intent_ids value of the player's attempt P_t
MAX_PLOT_BEATS = 12
MAX_MEMORY_OPS = 16   # a warning threshold only (see MemoryDelta)

EndKind = Literal["death", "permanent_incapacity", "closed_story"]
VerdictLabel = Literal["consistent", "inconsistent", "uncertain"]
ViolationCategory = Literal[
    "temporal", "world-fact", "character-state", "identity", "relationship", "knowledge", "causal", "other",
]
PriorSource = Literal["initial_world", "opening", "narrative"]
UnitKind = Literal["event", "character_or_relationship_change", "story_thread", "world_or_social_element"]

NonEmpty = Annotated[str, Field(min_length=1)]


def _nonblank(value: str | None, what: str) -> None:
    if value is None or not value.strip():
        raise ValueError(f"{what} must be a non-empty text")


class _Out(BaseModel):
    """Base of LLM output models: unknown keys are invalid output, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


# ---- Character Agents --------------------------------------------------------------------
class NPCIntent(_Out):
    character_id: str
    intent: NonEmpty


class CentralizedIntents(_Out):
    """B2: one call proposes one intended action for each of the four NPCs."""

    expected_ids: ClassVar[tuple[str, ...]] = ()
    intents: list[NPCIntent]

    @model_validator(mode="after")
    def _one_per_npc(self) -> "CentralizedIntents":
        for it in self.intents:
            _nonblank(it.intent, f"intent of {it.character_id}")
        if self.expected_ids:
            got = [it.character_id for it in self.intents]
            if sorted(got) != sorted(self.expected_ids):
                raise ValueError(f"need exactly one intent per NPC {list(self.expected_ids)}, got {got}")
        return self


class DistributedIntent(_Out):
    """B3: one isolated call per NPC; the actor is implied by the call."""

    intent: NonEmpty

    @field_validator("intent")
    @classmethod
    def _text(cls, v: str) -> str:
        _nonblank(v, "intent")
        return v


@lru_cache(maxsize=1024)
def centralized_intents_model(npc_ids: tuple[str, ...]) -> type[CentralizedIntents]:
    """CentralizedIntents with exactly one intent per NPC of this seed, in the seed's NPC order.

    The intents are a fixed-length tuple whose i-th item can only name the i-th NPC, so the
    JSON schema itself (and a decoding grammar built from it) forbids duplicates and omissions."""
    item_classes = tuple(
        create_model(f"NPCIntent{i}", __base__=NPCIntent, character_id=(Literal[npc], ...))
        for i, npc in enumerate(npc_ids))
    model = create_model(
        "CentralizedIntents", __base__=CentralizedIntents,
        intents=(tuple[item_classes], ...),  # type: ignore[valid-type]
    )
    model.expected_ids = npc_ids
    return model


# ---- World Model (WMOD) ------------------------------------------------------------------
class PlotBeat(_Out):
    beat_id: NonEmpty
    depends_on: list[str]
    source_intent_ids: list[str]
    content: NonEmpty


class PlotPlan(_Out):
    """At most 12 beats (App. A.2); at least one traces to the player's attempt; dependencies name
    other beats of the plan. A dependency on a LATER beat is allowed (the paper states no order
    rule; the list order is the narration order): `forward_dependencies` counts them."""

    beats: list[PlotBeat] = Field(min_length=1, max_length=MAX_PLOT_BEATS)

    @model_validator(mode="after")
    def _plan_rules(self) -> "PlotPlan":
        ids = [b.beat_id for b in self.beats]
        if len(set(ids)) != len(ids):
            raise ValueError(f"beat ids must be unique, got {ids}")
        for b in self.beats:
            _nonblank(b.content, f"content of beat {b.beat_id}")
            bad = [d for d in b.depends_on if d not in ids or d == b.beat_id]
            if bad:
                raise ValueError(f"beat {b.beat_id} depends on {bad}, which are not other beats of the plan")
        if not any(PLAYER_INTENT_ID in b.source_intent_ids for b in self.beats):
            raise ValueError(f"no beat traces to the player attempt (source_intent_ids must include "
                             f"{PLAYER_INTENT_ID!r} in at least one beat)")
        return self


def forward_dependencies(plan: PlotPlan) -> int:
    """Dependencies of a beat on a later beat of the plan (a counted warning, never a failure)."""
    pos = {b.beat_id: i for i, b in enumerate(plan.beats)}
    return sum(1 for i, b in enumerate(plan.beats) for d in b.depends_on if pos.get(d, -1) > i)


@lru_cache(maxsize=1024)
def plot_plan_model(intent_ids: tuple[str, ...]) -> type[PlotPlan]:
    """PlotPlan whose source_intent_ids may only name the player attempt or this step's NPC intents."""
    allowed = (PLAYER_INTENT_ID, *intent_ids)
    beat_cls = create_model("PlotBeat", __base__=PlotBeat,
                            source_intent_ids=(list[Literal[allowed]], ...))
    return create_model("PlotPlan", __base__=PlotPlan,
                        beats=(list[beat_cls], Field(min_length=1, max_length=MAX_PLOT_BEATS)))


# ---- Story Agent -------------------------------------------------------------------------
class StoryAgentOutput(_Out):
    """The sole narrator: canon narrative N_t, the player's next three options, day/end flags."""

    narrative: NonEmpty
    options: list[NonEmpty] = Field(min_length=3, max_length=3)
    new_day: bool
    # One field for the story-end flag and its kind, so the schema itself (and a decoding
    # grammar built from it) rules out "ended without a kind" and "kind without an end".
    ending: Literal["continues"] | EndKind

    @model_validator(mode="after")
    def _rules(self) -> "StoryAgentOutput":
        _nonblank(self.narrative, "narrative")
        for i, o in enumerate(self.options):
            _nonblank(o, f"option {i + 1}")
        return self

    @property
    def story_end(self) -> bool:
        return self.ending != "continues"

    @property
    def end_kind(self) -> str | None:
        return None if self.ending == "continues" else self.ending


# ---- World Memory Agent (WMEM) -----------------------------------------------------------
class SetCondition(_Out):
    op: Literal["set_condition"]
    character_id: NonEmpty
    condition: NonEmpty


class SetLocation(_Out):
    op: Literal["set_location"]
    character_id: NonEmpty
    location: NonEmpty


class SetRelationship(_Out):
    op: Literal["set_relationship"]
    a: NonEmpty
    b: NonEmpty
    description: NonEmpty


class RemoveRelationship(_Out):
    op: Literal["remove_relationship"]
    a: NonEmpty
    b: NonEmpty


class AddFact(_Out):
    op: Literal["add_fact"]
    fact_id: NonEmpty
    text: NonEmpty


class UpdateFact(_Out):
    op: Literal["update_fact"]
    fact_id: NonEmpty
    text: NonEmpty


class RemoveFact(_Out):
    op: Literal["remove_fact"]
    fact_id: NonEmpty


class AddSupportingCharacter(_Out):
    op: Literal["add_supporting_character"]
    character_id: NonEmpty
    name: NonEmpty
    description: NonEmpty
    condition: NonEmpty
    location: NonEmpty


MemoryOperation = Annotated[
    Union[SetCondition, SetLocation, SetRelationship, RemoveRelationship, AddFact, UpdateFact, RemoveFact,
          AddSupportingCharacter],
    Field(discriminator="op"),
]


class MemoryDelta(_Out):
    """Operations the World Memory Agent derives from N_t; applied all-or-nothing by the reducer.
    No cap on their number (the paper states none); more than MAX_MEMORY_OPS is a counted warning
    (`wse_trajectories.n_memory_ops_over_16`), never a failure."""

    operations: list[MemoryOperation]


# ---- Structured memory state -------------------------------------------------------------
class _State(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CharacterState(_State):
    id: str
    name: str
    description: str
    condition: str
    location: str
    kind: Literal["cast", "supporting"] = "cast"


class RelationshipState(_State):
    a: str          # ids ordered a < b (undirected)
    b: str
    description: str


class FactState(_State):
    id: str
    text: str


class WorldState(_State):
    """M_t: the structured memory of the world (never canon; canon is the narratives)."""

    day: int
    time_label: str
    characters: list[CharacterState]
    relationships: list[RelationshipState]
    facts: list[FactState]

    def character(self, char_id: str) -> CharacterState | None:
        return next((c for c in self.characters if c.id == char_id), None)


class KnownCharacter(_State):
    id: str
    name: str
    condition: str
    location: str


class ActorRelationship(_State):
    other_id: str
    other_name: str
    description: str


class CharacterMemory(_State):
    """Actor-centric projection of M_t given to one Character Agent (deterministic)."""

    actor_id: str
    name: str
    description: str
    condition: str
    location: str
    day: int
    time_label: str
    relationships: list[ActorRelationship]
    known_characters: list[KnownCharacter]   # related to the actor or at the same location
    facts: list[FactState]


# ---- Stored records ----------------------------------------------------------------------
class StepFailure(_State):
    component: str
    step: int
    error_kind: str
    message: str
    raw_text: str | None = None
    attempts: int = 0
    actor_id: str | None = None   # which NPC's isolated call failed (B3)


class StepRecord(_State):
    """One step of one trajectory, as stored in `wse_trajectory_steps`."""

    step: int
    player_option: str
    player_option_index: int
    intents: list[dict[str, str]] | None = None      # [{character_id, intent}] (B2/B3)
    plan: dict[str, Any] | None = None                # PlotPlan JSON (WMOD)
    narrative: str | None = None                      # NULL when the step failed before narration
    options: list[str] | None = None
    new_day: bool | None = None
    story_end: bool | None = None
    end_kind: str | None = None
    memory_delta: dict[str, Any] | None = None        # WMEM
    memory_state: dict[str, Any] | None = None        # M_{t+1} after the reducer (WMEM)
    failure: StepFailure | None = None
    llm_call_ids: list[str] = Field(default_factory=list)


class TrajectoryRecord(_State):
    """One seed × model × architecture run, with its per-step records."""

    model: str
    arch: str
    seed_id: str
    world_id: str
    source_family: str
    horizon: int
    steps: list[StepRecord]
    failure_component: str | None = None
    failure_step: int | None = None
    end_kind: str | None = None
    end_step: int | None = None
    day_advances: int = 0
    lost_steps_wmem: int = 0
    generation_version: str = ""

    @property
    def length(self) -> int:
        """L_i: number of steps with a valid (canon) narrative."""
        return sum(1 for s in self.steps if s.narrative is not None)


# ---- Judges ------------------------------------------------------------------------------
_DETAIL_FIELDS = ("prior_fact", "prior_source", "conflicting_claim", "exclusion_reason", "missing_transition",
                  "category")


class ConsistencyVerdict(_Out):
    """One judge's verdict on one step. Details are required (only) for an inconsistent verdict."""

    judged_step: ClassVar[int | None] = None
    verdict: VerdictLabel
    prior_fact: str | None = None
    prior_source: PriorSource | None = None
    prior_step: int | None = None
    conflicting_claim: str | None = None
    exclusion_reason: str | None = None
    missing_transition: str | None = None
    category: ViolationCategory | None = None

    @model_validator(mode="after")
    def _details(self) -> "ConsistencyVerdict":
        if self.verdict != "inconsistent":
            return self
        for f in _DETAIL_FIELDS:
            v = getattr(self, f)
            if v is None or (isinstance(v, str) and not v.strip()):
                raise ValueError(f"an inconsistent verdict must give {f}")
        if self.prior_source == "narrative":
            if self.prior_step is None or self.prior_step < 1:
                raise ValueError("prior_source 'narrative' needs prior_step (the step k that established it)")
            if self.judged_step is not None and self.prior_step > self.judged_step:
                raise ValueError(f"prior_step {self.prior_step} is after the judged step {self.judged_step}")
        elif self.prior_step is not None:
            raise ValueError(f"prior_step is only for prior_source 'narrative', not {self.prior_source!r}")
        return self


@lru_cache(maxsize=256)
def consistency_verdict_model(step: int) -> type[ConsistencyVerdict]:
    model = create_model("ConsistencyVerdict", __base__=ConsistencyVerdict,
                         prior_step=(int | None, Field(default=None, ge=1, le=max(step, 1))))
    model.judged_step = step
    return model


class DevelopmentUnit(_Out):
    step: int = Field(ge=1)
    kind: UnitKind
    repetitive: bool
    evidence: NonEmpty          # a short quote from that step's narrative supporting the unit
    description: NonEmpty


Rating = Annotated[int, Field(ge=1, le=5)]


class RichnessVerdict(_Out):
    """One judge's development units and anchored 1–5 ratings for a whole trajectory."""

    observed_steps: ClassVar[int | None] = None
    units: list[DevelopmentUnit]        # no cap: the paper states none (a long list is not a failure)
    rating_event_diversity: Rating
    rating_character_change: Rating
    rating_world_expansion: Rating

    @model_validator(mode="after")
    def _steps_in_range(self) -> "RichnessVerdict":
        if self.observed_steps is not None:
            bad = [u.step for u in self.units if u.step > self.observed_steps]
            if bad:
                raise ValueError(f"units cite steps {bad} beyond the {self.observed_steps} narrated steps")
        return self


@lru_cache(maxsize=256)
def richness_verdict_model(observed_steps: int) -> type[RichnessVerdict]:
    unit_cls = create_model("DevelopmentUnit", __base__=DevelopmentUnit,
                            step=(int, Field(ge=1, le=max(observed_steps, 1))))
    model = create_model("RichnessVerdict", __base__=RichnessVerdict,
                         units=(list[unit_cls], ...))
    model.observed_steps = observed_steps
    return model
