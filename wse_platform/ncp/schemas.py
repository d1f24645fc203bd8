"""Pydantic models of every LLM output an NCP-Bench episode consumes.

Validity is what the paper validates: the JSON structure of each output (required fields,
types, the closed sets of kinds and statuses, counts that agree with the listed conflicts,
one status per commitment). Word limits (150 words per narration, 50 per player input) are
instructions in the prompts and reported as statistics (`word_count`), never a reason to
reject an output. Rules that need episode state (does fact `f_7` exist?) are checked by the
episode code and recorded, never silently dropped.

List caps appear only as JSON-schema hints (`json_schema_extra`) so grammar-constrained
decoding of a tiny model must close its lists; pydantic does not enforce them.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

PLAYER_MAX_WORDS = 50      # prompt instruction (reported as a statistic)
NARRATOR_MAX_WORDS = 150   # prompt instruction (reported as a statistic)

ConflictKind = Literal["fact", "commitment", "player_input"]
CONFLICT_KINDS: tuple[str, ...] = ("fact", "commitment", "player_input")
COUNT_FIELDS = {"fact": "fact_conflict_count", "commitment": "commitment_conflict_count",
                "player_input": "player_input_conflict_count"}
_LIST_HINT = {"maxItems": 16}   # grammar hint only


def word_count(text: str | None) -> int:
    return len(text.split()) if text else 0


def _text(v: str, what: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError(f"{what} is empty")
    return v


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlayerTurn(_Out):
    """The player's next input. The player answers in plain text (as in the paper); the loop
    wraps the non-empty text in this model."""

    text: str

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "player input")


class NarratorResponse(_Out):
    """The narrator's second-person response (also the opening narration)."""

    text: str

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "narrator response")


class FactDiff(_Out):
    """The minimal ledger change a narration implies: new facts, ids of facts it ended, and why."""

    add_facts: list[str] = Field(json_schema_extra=_LIST_HINT)
    negate_facts: list[str] = Field(json_schema_extra=_LIST_HINT)
    reason: str

    @field_validator("add_facts", "negate_facts")
    @classmethod
    def _non_empty_items(cls, v: list[str]) -> list[str]:
        out = [s.strip() for s in v]
        if any(not s for s in out):
            raise ValueError("list items must be non-empty strings")
        return out

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _text(v, "reason")

    @classmethod
    def empty(cls) -> "FactDiff":
        return cls(add_facts=[], negate_facts=[], reason="(no pending updates)")


class Conflict(_Out):
    kind: ConflictKind
    target_id: str = Field(description="violated fact id (f_N), commitment id (c_N), 'input' for a "
                                       "player-input conflict, or 'response_internal'")
    reason: str

    @field_validator("target_id", "reason")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "conflict field")

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.target_id)


class ConflictReport(_Out):
    """Conflict check: counts per kind, the total and the typed list; the counts must agree."""

    fact_conflict_count: int = Field(ge=0)
    commitment_conflict_count: int = Field(ge=0)
    player_input_conflict_count: int = Field(ge=0)
    total_conflict_count: int = Field(ge=0)
    conflicts: list[Conflict] = Field(json_schema_extra=_LIST_HINT)

    @model_validator(mode="after")
    def _counts_agree(self):
        if self.total_conflict_count != len(self.conflicts):
            raise ValueError("total_conflict_count must equal the number of listed conflicts")
        for kind, field in COUNT_FIELDS.items():
            if getattr(self, field) != sum(c.kind == kind for c in self.conflicts):
                raise ValueError(f"{field} does not match the listed conflicts")
        return self

    def counts(self) -> dict[str, int]:
        return {k: sum(c.kind == k for c in self.conflicts) for k in CONFLICT_KINDS}


class ConflictReview(ConflictReport):
    """Double-check: one review of the whole initial report. `conflicts` is the minimal supported
    set that stands (possibly narrowed or relabelled); `confirmed` says whether any stands."""

    confirmed: bool
    review_reason: str

    @model_validator(mode="after")
    def _confirmed_matches_list(self):
        if self.confirmed != bool(self.conflicts):
            raise ValueError("confirmed must be true exactly when at least one conflict is kept")
        _text(self.review_reason, "review_reason")
        return self

    @property
    def standing(self) -> list[Conflict]:
        """The conflicts this review keeps (`confirmed` agrees with the list here)."""
        return list(self.conflicts)


class Occurrence(_Out):
    occurred: bool
    reason: str

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _text(v, "reason")


class NodeAssessment(_Out):
    """Have the current node's trigger event and key delta occurred by the end of the turn?"""

    trigger: Occurrence
    delta: Occurrence

    @property
    def advances(self) -> bool:
        """Both must have occurred; an ambiguous field is answered false (prompt rule)."""
        return self.trigger.occurred and self.delta.occurred


class CommitmentStatus(_Out):
    commitment_id: str
    status: Literal["SATISFIED", "PENDING"]
    reason: str = Field(description="evidence, citing fact ids (f_N) and node ids (s_N)")

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _text(v, "reason")


class CommitmentStatusUpdate(_Out):
    """One status for every commitment of the spec (the whole set is re-assessed each turn)."""

    statuses: list[CommitmentStatus] = Field(json_schema_extra={"maxItems": 40})


@lru_cache(maxsize=4096)
def status_update_model(commitment_ids: tuple[str, ...]) -> type[CommitmentStatusUpdate]:
    """CommitmentStatusUpdate that requires exactly one entry per id in `commitment_ids`
    (no unknown, duplicate or missing id): the structure the reference implementation validates.
    The ids (an enum) and the list length also go into the JSON schema, so grammar-constrained
    decoding can only produce well-formed lists."""
    expected = set(commitment_ids)
    n = len(commitment_ids)
    item = create_model(  # type: ignore[call-overload]
        "CommitmentStatus", __base__=CommitmentStatus,
        commitment_id=(Literal[commitment_ids], ...),  # type: ignore[valid-type]
    )

    def _one_per_commitment(self: CommitmentStatusUpdate) -> CommitmentStatusUpdate:
        ids = [s.commitment_id for s in self.statuses]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        missing = sorted(expected - set(ids))
        if dup or missing:
            raise ValueError(f"statuses: duplicate {dup}, missing {missing}")
        return self

    return create_model(  # type: ignore[call-overload]
        "CommitmentStatusUpdate", __base__=CommitmentStatusUpdate, __doc__=CommitmentStatusUpdate.__doc__,
        statuses=(list[item], Field(json_schema_extra={"minItems": n, "maxItems": n})),  # type: ignore[valid-type]
        __validators__={"_one_per_commitment": model_validator(mode="after")(_one_per_commitment)},
    )


# ---- HiAgent (memory architecture) ---------------------------------------------------------------

class HiAgentStep(_Out):
    """One HiAgent control output: optionally a new subgoal, then either the narration shown to
    the player (`text`) or a request to expand summarised subgoals (`retrieve`, 1-based ids)."""

    subgoal: str | None = None
    text: str | None = None
    retrieve: list[int] = Field(default_factory=list, json_schema_extra={"maxItems": 8})

    @model_validator(mode="after")
    def _one_action(self):
        has_text = bool(self.text and self.text.strip())
        if has_text == bool(self.retrieve):
            raise ValueError("give exactly one action: a non-empty 'text' or a non-empty 'retrieve' list")
        if self.subgoal is not None and not self.subgoal.strip():
            raise ValueError("subgoal, when given, must be non-empty")
        if any(i < 1 for i in self.retrieve):
            raise ValueError("retrieve ids are 1-based subgoal numbers")
        return self

    def decision(self) -> tuple[str | None, str | None, list[int] | None]:
        """(subgoal, narration, retrieve ids): exactly one of narration / ids is set."""
        return self.subgoal, (self.text.strip() if self.text else None), (list(self.retrieve) or None)


class SubgoalSummary(_Out):
    """One-line summary of a finished subgoal's trajectory (HiAgent's working-memory entry)."""

    summary: str

    @field_validator("summary")
    @classmethod
    def _one_line(cls, v: str) -> str:
        return " ".join(_text(v, "summary").split())
