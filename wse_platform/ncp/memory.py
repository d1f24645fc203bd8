"""Narrator history: the full transcript (baseline) or hierarchical working memory (memory).

Choice (documented for the `memory` architecture): in the spirit of HiAgent, trajectory
nodes are the subgoals. Turns played while a node is current stay verbatim; when the
node is completed (the auditor advances the trajectory), those turns are compressed
into one summary by an LLM call of the *narrator's own model* (role
``ncp.memory_summary``), as HiAgent lets the acting agent summarise a finished subgoal.
So that a node the story is stuck on cannot grow the context without bound, the open
turns are also compressed once they reach ``chunk_size`` (a partial summary of the
same node). The narrator then sees: summaries of earlier stages + the open turns.
A summary call that stays invalid after the client's retries ends the episode as
INVALID (role ``ncp.memory_summary``), like any other call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_CHUNK_SIZE = 8


@dataclass(frozen=True)
class Exchange:
    """One visible turn: the player's input (None for the opening) and the narration."""

    turn: int
    player: str | None
    narrator: str


def render_exchanges(exchanges: list[Exchange]) -> str:
    lines: list[str] = []
    for ex in exchanges:
        if ex.player is None:
            lines.append(f"[Turn {ex.turn}] Narrator: {ex.narrator}")
        else:
            lines.append(f"[Turn {ex.turn}] Player: {ex.player}\n[Turn {ex.turn}] Narrator: {ex.narrator}")
    return "\n".join(lines) or "(nothing yet)"


@dataclass
class Segment:
    node_id: str
    first_turn: int
    last_turn: int
    summary: str
    complete: bool  # False for a partial summary of a node still in progress

    def as_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "first_turn": self.first_turn, "last_turn": self.last_turn,
                "summary": self.summary, "complete": self.complete}


@dataclass
class PendingCompression:
    """The open turns to compress and the node they were played under."""

    node_id: str
    node_description: str
    exchanges: list[Exchange]
    complete: bool


@dataclass
class HierarchicalMemory:
    chunk_size: int = DEFAULT_CHUNK_SIZE
    segments: list[Segment] = field(default_factory=list)
    open: list[Exchange] = field(default_factory=list)

    def add(self, exchange: Exchange) -> None:
        self.open.append(exchange)

    def pending(self, node_id: str, node_description: str, node_completed: bool) -> PendingCompression | None:
        """What to compress after a turn: all open turns when the node was completed, or
        when they reached `chunk_size`; otherwise nothing."""
        if not self.open:
            return None
        if node_completed or len(self.open) >= self.chunk_size:
            return PendingCompression(node_id, node_description, list(self.open), node_completed)
        return None

    def commit(self, pending: PendingCompression, summary: str) -> Segment:
        """Replace the compressed open turns by their summary."""
        seg = Segment(pending.node_id, pending.exchanges[0].turn, pending.exchanges[-1].turn,
                      summary, pending.complete)
        self.segments.append(seg)
        done = {ex.turn for ex in pending.exchanges}
        self.open = [ex for ex in self.open if ex.turn not in done]
        return seg

    def render(self) -> str:
        parts = []
        if self.segments:
            parts.append("Earlier story, summarised by stage:")
            for s in self.segments:
                state = "completed" if s.complete else "in progress"
                parts.append(f"- [{s.node_id}, turns {s.first_turn}-{s.last_turn}, {state}] {s.summary}")
        parts.append("Recent turns (verbatim):")
        parts.append(render_exchanges(self.open))
        return "\n".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"segments": [s.as_dict() for s in self.segments], "open_turns": [ex.turn for ex in self.open]}
