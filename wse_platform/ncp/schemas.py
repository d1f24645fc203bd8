"""Pydantic models of every LLM output an NCP-Bench episode consumes.

The client validates raw outputs into these classes and retries on failure, so every
rule that can be checked without episode state lives in a validator here (word limits,
id shapes, evidence for a SATISFIED status). Rules that need episode state (does fact
`f_7` exist?) are checked by the episode code and recorded, never silently dropped.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

PLAYER_MAX_WORDS = 50
NARRATOR_MAX_WORDS = 150
SUMMARY_MAX_WORDS = 120

FACT_ID = r"^f_[0-9]+$"  # [0-9], not \d: llama.cpp grammars do not support \d
COMMITMENT_ID = r"^c_[0-9]+$"
EVIDENCE_ID = r"^[fs]_[0-9]+$"  # a fact id or a trajectory node id
ConflictKind = Literal["fact", "commitment", "player_input"]
CONFLICT_KINDS: tuple[str, ...] = ("fact", "commitment", "player_input")

# Character caps go into the JSON schema (maxLength / maxItems), so grammar-constrained
# decoding must close every string and list: a small model cannot ramble past max_tokens
# into truncated JSON. They sit above the word limits, which validators enforce. Keep every
# cap <= 1000: llama.cpp refuses larger repetitions in a grammar (and the process crashes).
PLAYER_MAX_CHARS = 450
NARRATOR_MAX_CHARS = 1000   # ~150 words of prose; a longer narration is retried like any invalid one
SUMMARY_MAX_CHARS = 900
SHORT_TEXT_CHARS = 400
MAX_LIST_ITEMS = 12
ShortText = Annotated[str, Field(max_length=SHORT_TEXT_CHARS)]


def word_count(text: str) -> int:
    return len(text.split())


def _bounded_text(text: str, limit: int, what: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError(f"{what} is empty")
    n = word_count(text)
    if n > limit:
        raise ValueError(f"{what} has {n} words; at most {limit} allowed")
    return text


def normalise_utterance(text: str) -> str:
    """Case/spacing/punctuation-insensitive form used to detect a repeated player input."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlayerTurn(_Out):
    """The player's next in-world input, first person, at most 50 words."""

    text: str = Field(max_length=PLAYER_MAX_CHARS)

    @field_validator("text")
    @classmethod
    def _limit(cls, v: str) -> str:
        return _bounded_text(v, PLAYER_MAX_WORDS, "player input")


@lru_cache(maxsize=4096)
def player_turn_model(last_input: str | None) -> type[PlayerTurn]:
    """PlayerTurn that also rejects a repeat of `last_input` (so the client retries it).

    Same class name and fields as PlayerTurn, hence the same JSON schema and cache key shape.
    """
    if not last_input:
        return PlayerTurn
    banned = normalise_utterance(last_input)

    def _not_repeated(self: PlayerTurn) -> PlayerTurn:
        if normalise_utterance(self.text) == banned:
            raise ValueError("player input repeats the previous input verbatim")
        return self

    return create_model(  # type: ignore[call-overload]
        "PlayerTurn", __base__=PlayerTurn, __doc__=PlayerTurn.__doc__,
        __validators__={"_not_repeated": model_validator(mode="after")(_not_repeated)},
    )


class NarratorResponse(_Out):
    """The narrator's second-person response, at most 150 words."""

    text: str = Field(max_length=NARRATOR_MAX_CHARS)

    @field_validator("text")
    @classmethod
    def _limit(cls, v: str) -> str:
        return _bounded_text(v, NARRATOR_MAX_WORDS, "narrator response")


class FactDiff(_Out):
    """Minimal ledger change implied by one turn: new fact statements and ids to negate."""

    add: list[ShortText] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                 description="new durable atomic facts, one sentence each")
    negate: list[Annotated[str, Field(max_length=12)]] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                                                               description="ids of active facts the turn made false")

    @field_validator("add")
    @classmethod
    def _non_empty_facts(cls, v: list[str]) -> list[str]:
        out = [s.strip() for s in v]
        if any(not s for s in out):
            raise ValueError("a fact to add is empty")
        return out

    @field_validator("negate")
    @classmethod
    def _fact_ids(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if not re.match(FACT_ID, x.strip())]
        if bad:
            raise ValueError(f"negate must list fact ids like f_3; got {bad}")
        return [x.strip() for x in v]


class Conflict(_Out):
    kind: ConflictKind
    target_id: str = Field(max_length=40, description="fact id (f_N), commitment id (c_N) or 'player_input'")
    reason: ShortText

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a conflict needs a reason")
        return v.strip()


class ConflictReport(_Out):
    """Candidate conflicts of the narrator's response (empty list = consistent)."""

    conflicts: list[Conflict] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)

    def counts(self) -> dict[str, int]:
        return {k: sum(c.kind == k for c in self.conflicts) for k in CONFLICT_KINDS}


class ConfirmationVerdict(_Out):
    """Second, independent look at one candidate conflict."""

    confirmed: bool
    reason: ShortText


class NodeAssessment(_Out):
    """Did the current trajectory node's trigger event and key delta both happen?"""

    trigger_occurred: bool
    key_delta_occurred: bool
    ambiguous: bool = Field(description="true when the transcript does not clearly show both")
    evidence: ShortText

    @property
    def advances(self) -> bool:
        """Advance only on clear evidence of both; ambiguity never advances."""
        return self.trigger_occurred and self.key_delta_occurred and not self.ambiguous


class CommitmentStatus(_Out):
    commitment_id: str = Field(pattern=COMMITMENT_ID)
    status: Literal["PENDING", "SATISFIED"]
    evidence: list[Annotated[str, Field(max_length=12)]] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="fact ids (f_N) and node ids (s_N)")

    @field_validator("evidence")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if not re.match(EVIDENCE_ID, x.strip())]
        if bad:
            raise ValueError(f"evidence must cite fact or node ids (f_N, s_N); got {bad}")
        return [x.strip() for x in v]

    @model_validator(mode="after")
    def _satisfied_needs_evidence(self) -> "CommitmentStatus":
        if self.status == "SATISFIED" and not self.evidence:
            raise ValueError(f"{self.commitment_id}: SATISFIED needs evidence ids")
        return self


class CommitmentStatusUpdate(_Out):
    """Statuses of the still-pending commitments after the turn."""

    statuses: list[CommitmentStatus] = Field(default_factory=list, max_length=40)


class MemorySummary(_Out):
    """Compressed record of the turns spent on one trajectory node (hierarchical memory)."""

    summary: str = Field(max_length=SUMMARY_MAX_CHARS)

    @field_validator("summary")
    @classmethod
    def _limit(cls, v: str) -> str:
        return _bounded_text(v, SUMMARY_MAX_WORDS, "memory summary")
