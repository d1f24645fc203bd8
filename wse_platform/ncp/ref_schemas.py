"""Auditor outputs as the reference parses them (`ncp.reference` mode).

Field names are the reference's (`type`, `id`, `statuses[].id`); keys the reference does not read
are ignored; statuses are upper-cased before they are checked; numbers and booleans must be JSON
integers / booleans (a string "1" or "true" is invalid there too); the conflict counts must agree
with the list, as the reference requires. A double-check review is read as the reference reads it:
`confirmed: false` clears every conflict whatever the list says, `confirmed: true` keeps the
review's list (an empty list keeps nothing). `standing` gives that list; the platform's own review
model (which requires `confirmed` to agree with its list) has the same property.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, create_model, field_validator, \
    model_validator

from wse_platform.ncp.schemas import CONFLICT_KINDS, COUNT_FIELDS, FactDiff


def _text(v: str, what: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError(f"{what} must be a non-empty string")
    return v


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RefFactUpdate(FactDiff):
    model_config = ConfigDict(extra="ignore")


class RefConflict(_Lenient):
    type: Literal["fact", "commitment", "player_input"]
    id: str
    reason: str

    @field_validator("id", "reason")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "conflict id/reason")

    @property
    def kind(self) -> str:
        return self.type

    @property
    def target_id(self) -> str:
        return self.id

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.id)


class RefConflictReport(_Lenient):
    fact_conflict_count: StrictInt = Field(ge=0)
    commitment_conflict_count: StrictInt = Field(ge=0)
    player_input_conflict_count: StrictInt = Field(ge=0)
    total_conflict_count: StrictInt = Field(ge=0)
    conflicts: list[RefConflict]

    @model_validator(mode="after")
    def _counts_agree(self):
        if self.total_conflict_count != len(self.conflicts):
            raise ValueError("total_conflict_count must equal len(conflicts)")
        if self.total_conflict_count != sum(getattr(self, f) for f in COUNT_FIELDS.values()):
            raise ValueError("conflict category counts must sum to total_conflict_count")
        for kind, field in COUNT_FIELDS.items():
            if getattr(self, field) != sum(c.type == kind for c in self.conflicts):
                raise ValueError(f"{field} does not match conflicts")
        return self

    def counts(self) -> dict[str, int]:
        return {k: sum(c.type == k for c in self.conflicts) for k in CONFLICT_KINDS}


class RefConflictReview(RefConflictReport):
    confirmed: StrictBool
    review_reason: str

    @field_validator("review_reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _text(v, "review_reason")

    @property
    def standing(self) -> list[RefConflict]:
        return list(self.conflicts) if self.confirmed else []


class RefOccurrence(_Lenient):
    occurred: StrictBool
    reason: str

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return _text(v, "reason")


class RefNodeAssessment(_Lenient):
    trigger: RefOccurrence
    delta: RefOccurrence

    @property
    def advances(self) -> bool:
        return self.trigger.occurred and self.delta.occurred


class RefStatus(_Lenient):
    id: str
    status: str
    reason: str

    @field_validator("id", "reason")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "status id/reason")

    @field_validator("status")
    @classmethod
    def _upper(cls, v: str) -> str:
        v = _text(v, "status").upper()
        if v not in ("SATISFIED", "PENDING"):
            raise ValueError("status must be SATISFIED or PENDING")
        return v

    @property
    def commitment_id(self) -> str:
        return self.id


class RefStatusUpdate(_Lenient):
    statuses: list[RefStatus]


@lru_cache(maxsize=4096)
def ref_status_model(commitment_ids: tuple[str, ...]) -> type[RefStatusUpdate]:
    """One status per commitment: no unknown, duplicate or missing id (as the reference checks)."""
    expected = set(commitment_ids)

    def _one_each(self: RefStatusUpdate) -> RefStatusUpdate:
        seen: set[str] = set()
        for s in self.statuses:
            if s.id not in expected:
                raise ValueError(f"statuses: unknown id {s.id!r}")
            if s.id in seen:
                raise ValueError(f"statuses contains duplicate id {s.id!r}")
            seen.add(s.id)
        missing = sorted(expected - seen)
        if missing:
            raise ValueError(f"statuses is missing ids: {', '.join(missing)}")
        return self

    return create_model(  # type: ignore[call-overload]
        "RefStatusUpdate", __base__=RefStatusUpdate,
        __validators__={"_one_each": model_validator(mode="after")(_one_each)})


class RefText(BaseModel):
    """The narrators' output: a JSON object with exactly one non-empty `text` (the reference is strict here)."""

    model_config = ConfigDict(extra="forbid")
    text: str

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        return _text(v, "text")
