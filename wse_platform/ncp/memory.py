"""HiAgent working memory for the `memory` narrator architecture (paper §5.5).

HiAgent (Hu et al., 2025) lets the acting agent manage its own hierarchical working memory:
it proposes a subgoal, acts under it, and when it proposes the next subgoal the finished one
is summarised (by the agent's own model) into one line that replaces its detailed trajectory
in the working memory. If a compressed trajectory matters again, the agent asks to retrieve
it and sees it in full for the rest of the current subgoal. Subgoals are the narrator's own
milestones: the auditor's node boundaries play no part (they are hidden evaluation state).

This module holds the memory state and its rendering; the LLM calls (control step and
summaries) are made by the episode loop through the one client.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wse_platform.ncp.render import Exchange, interaction_history

MAX_RETRIEVE_DEPTH = 4  # re-asks per turn after `retrieve` (the reference method's max_retrieve_depth)
SUMMARY_MAX_CHARS = 220  # a subgoal summary is cut to this length (the reference method's summary_max_chars)
MEMORY_CHUNKS = 100      # the working memory shows at most the last 100 chunks (the reference's memory_size)
MEMORY_TOKENS = 12_000   # ... and is cut from the oldest chunk while longer (the reference's max_input_tokens;
#                          estimated here at 4 characters per token, the reference counts with tiktoken)


def cap_summary(text: str) -> str:
    """One line of at most SUMMARY_MAX_CHARS characters, cut with '...' as the reference summarizer does."""
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX_CHARS else text[:SUMMARY_MAX_CHARS - 3].rstrip() + "..."


@dataclass
class Subgoal:
    number: int                      # 1-based, what `retrieve` refers to
    text: str
    first_turn: int
    exchanges: list[Exchange] = field(default_factory=list)
    summary: str | None = None       # set once the subgoal is finished and summarised

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "text": self.text, "first_turn": self.first_turn,
                "turns": [ex.turn for ex in self.exchanges], "summary": self.summary}


@dataclass
class HiAgentMemory:
    before: list[Exchange] = field(default_factory=list)   # opening and turns before the first subgoal
    subgoals: list[Subgoal] = field(default_factory=list)
    retrieved: set[int] = field(default_factory=set)        # expanded for the current subgoal
    ignored: list[int] = field(default_factory=list)        # this turn's retrieve ids that name no finished subgoal

    @property
    def current(self) -> Subgoal | None:
        return self.subgoals[-1] if self.subgoals else None

    def propose(self, text: str, turn: int) -> None:
        """A new subgoal: the previous one is finished; retrieved expansions are dropped."""
        self.subgoals.append(Subgoal(len(self.subgoals) + 1, text.strip(), turn))
        self.retrieved = set()

    def retrieve(self, numbers: list[int]) -> list[int]:
        """Mark summarised subgoals to show in detail; returns the numbers that do not exist (the loop
        ignores them, as the reference method does)."""
        finished = {s.number for s in self.subgoals[:-1]}
        unknown = [n for n in numbers if n not in finished]
        self.retrieved |= {n for n in numbers if n in finished}
        self.ignored += [n for n in unknown if n not in self.ignored]
        return unknown

    def record(self, exchange: Exchange) -> None:
        (self.current.exchanges if self.current is not None else self.before).append(exchange)

    def unsummarised(self) -> list[Subgoal]:
        """Finished subgoals still waiting for their one-line summary."""
        return [s for s in self.subgoals[:-1] if s.summary is None]

    def chunks(self) -> list[str]:
        """The working memory as chunks, oldest first: each exchange, each subgoal line, each summary."""
        out = [interaction_history([ex]) for ex in self.before]
        for s in self.subgoals[:-1]:
            if s.summary is not None and s.number not in self.retrieved:
                out.append(f"Subgoal {s.number} (finished, summarised): {s.text}\n  Summary: {s.summary}")
            else:
                out.append(f"Subgoal {s.number} (finished, in detail): {s.text}")
                out += [interaction_history([ex]) for ex in s.exchanges]
        cur = self.current
        if cur is not None:
            out.append(f"Current subgoal {cur.number}: {cur.text}")
            out += [interaction_history([ex]) for ex in cur.exchanges]
        else:
            out.append("No subgoal has been set yet.")
        return out

    def render(self) -> str:
        """The working memory the narrator sees next to its earlier narration: the last MEMORY_CHUNKS
        chunks, cut from the oldest while longer than MEMORY_TOKENS (estimated)."""
        parts = self.chunks()[-MEMORY_CHUNKS:]
        while len(parts) > 1 and sum(len(p) for p in parts) / 4 > MEMORY_TOKENS:
            parts = parts[1:]
        if self.ignored:  # the re-ask differs from the ask, so a cached answer is not simply replayed
            parts.append(f"(Retrieve ignored for {self.ignored}: no finished subgoal has that number.)")
        return "\n\n".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"before": [ex.turn for ex in self.before], "subgoals": [s.as_dict() for s in self.subgoals],
                "retrieved": sorted(self.retrieved)}
