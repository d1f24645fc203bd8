"""The fact ledger of one episode: what the story has established so far.

Negated facts are kept (marked inactive, with the turn that negated them) so a
snapshot shows the full history; new facts get the next sequential id after the
highest existing one (`f_{max+1}`), which is deterministic for a given sequence of
diffs. A diff that names an unknown or already-inactive fact, or repeats an active
fact verbatim, is not applied for that item, and the rejection is returned so the
turn record shows it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from wse_platform.ncp.schemas import FactDiff


@dataclass
class LedgerFact:
    id: str
    content: str
    active: bool = True
    added_turn: int = 0
    negated_turn: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "active": self.active,
                "added_turn": self.added_turn, "negated_turn": self.negated_turn}


@dataclass
class AppliedDiff:
    """What a diff actually changed, and what it asked for but could not change."""

    added: list[str] = field(default_factory=list)          # new fact ids
    negated: list[str] = field(default_factory=list)        # fact ids made inactive
    rejected: list[dict[str, str]] = field(default_factory=list)  # {"item", "reason"}

    def as_dict(self) -> dict[str, Any]:
        return {"added": self.added, "negated": self.negated, "rejected": self.rejected}


_SPACES = re.compile(r"\s+")
_FACT_ID = re.compile(r"^f_(\d+)$")


def _norm(text: str) -> str:
    return _SPACES.sub(" ", text.strip().lower().rstrip("."))


class FactLedger:
    def __init__(self, facts: list[LedgerFact] | None = None):
        self._facts: dict[str, LedgerFact] = {}
        self._norms: dict[str, str] = {}  # fact id -> normalised content (duplicate check)
        self._next = 0
        self._memo: dict[Any, str] = {}   # texts rendered from the facts, until the next `apply`
        for f in facts or []:
            self._facts[f.id] = f
            self._bump(f.id)

    def _bump(self, fact_id: str) -> None:
        m = _FACT_ID.match(fact_id)
        if m:
            self._next = max(self._next, int(m.group(1)) + 1)

    def _norm_of(self, fact: LedgerFact) -> str:
        n = self._norms.get(fact.id)
        if n is None:
            n = self._norms[fact.id] = _norm(fact.content)
        return n

    @classmethod
    def from_initial(cls, initial_facts: list[Any]) -> "FactLedger":
        """F0 from a spec's `initial_facts` (objects with id, content, negated)."""
        return cls([LedgerFact(id=f.id, content=f.content, active=not bool(f.negated), added_turn=0)
                    for f in initial_facts])

    # ---- reads -------------------------------------------------------------------
    def __contains__(self, fact_id: str) -> bool:
        return fact_id in self._facts

    def get(self, fact_id: str) -> LedgerFact:
        return self._facts[fact_id]

    def active(self) -> list[LedgerFact]:
        return [f for f in self._facts.values() if f.active]

    def all(self) -> list[LedgerFact]:
        return list(self._facts.values())

    def next_id(self) -> str:
        return f"f_{self._next}"

    def snapshot(self) -> list[dict[str, Any]]:
        return [f.as_dict() for f in self._facts.values()]

    def memo(self, key: Any, make: Callable[["FactLedger"], str]) -> str:
        """`make(self)`, computed once until the ledger changes (`apply`): the facts rendered into a prompt
        (one turn's narrator and auditor requests show the same ledger several times). Facts change only
        through `apply`."""
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = make(self)
        return got

    def render_active(self) -> str:
        """`f_N: content` lines of the active facts (what auditors and the narrator see)."""
        return "\n".join(f"{f.id}: {f.content}" for f in self.active()) or "(none)"

    def copy(self) -> "FactLedger":
        """An independent ledger with the same facts (new fact objects), next id and duplicate-check cache
        (a fact's content never changes); built directly, not through `__init__` (a copy per audited turn)."""
        out = FactLedger.__new__(FactLedger)
        out._facts = {fid: LedgerFact(f.id, f.content, f.active, f.added_turn, f.negated_turn)
                      for fid, f in self._facts.items()}
        out._norms = dict(self._norms)
        out._next = self._next
        out._memo = dict(self._memo)
        return out

    # ---- writes ------------------------------------------------------------------
    def apply(self, diff: FactDiff, turn: int) -> AppliedDiff:
        """Negate first (ids refer to the pre-turn ledger), then add new facts."""
        self._memo.clear()
        out = AppliedDiff()
        for fid in dict.fromkeys(diff.negate_facts):
            fact = self._facts.get(fid)
            if fact is None:
                out.rejected.append({"item": fid, "reason": "unknown fact id"})
            elif not fact.active:
                out.rejected.append({"item": fid, "reason": "fact already inactive"})
            else:
                fact.active = False
                fact.negated_turn = turn
                out.negated.append(fid)
        active_texts = {self._norm_of(f) for f in self.active()}
        for content in diff.add_facts:
            if _norm(content) in active_texts:
                out.rejected.append({"item": content, "reason": "already an active fact"})
                continue
            fid = self.next_id()
            self._facts[fid] = LedgerFact(id=fid, content=content, active=True, added_turn=turn)
            self._bump(fid)
            active_texts.add(_norm(content))
            out.added.append(fid)
        return out
