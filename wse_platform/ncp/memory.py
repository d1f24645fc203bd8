"""HiAgent working memory for the `memory` narrator architecture (paper §5.5), as the reference
method keeps it.

HiAgent (Hu et al., 2025) lets the acting agent manage its own hierarchical working memory: it
proposes a subgoal, acts under it, and when it proposes the next subgoal the finished one is shown
only as a one-line summary (made by the agent's own model) instead of its detailed trajectory. If a
compressed trajectory matters again, the agent asks to retrieve it and sees it in full until it
proposes the next subgoal. Subgoals are the narrator's own milestones: the auditor's node
boundaries play no part (they are hidden evaluation state).

The memory is the reference method's list of chunks, each a list of (label, text) pairs: first the
initial observation, then per turn the previous narration (`Action`) with the player's new input
(`Observation`), and a `Subgoal` chunk where the narrator proposed one. For each prompt the last
`memory_size` chunks are laid out (cut further from the oldest by the loop while the whole prompt is
over the token budget): with two or more subgoals in the window, every finished subgoal that was not
retrieved becomes `<i> Subgoal: ...` + `Observation: <its summary>` (i counted within the window),
the current one `<n> Subgoal: ...` followed by its turns. Summaries are requested for every prompt
that shows them (`summary_jobs`), as the reference regenerates them; identical requests are answered
by the response cache. This module holds the state and the layout; the LLM calls are made by
`hiagent.py` through the one client.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Pair = tuple[str, str]
Chunk = list[Pair]

SUBGOAL, ACTION, OBSERVATION = "Subgoal", "Action", "Observation"  # the method's line labels


@dataclass(frozen=True)
class MemoryTexts:
    """What the memory writes besides the model's own text, and the method's limits."""

    init_obs: str                        # the first chunk's observation
    observation: str                     # a str.format template with {player_input}
    skip_marker: str | None = None       # an action containing it is left out of a summarised trajectory
    memory_size: int = 100               # chunks shown at most (the reference's memory_size)
    max_input_tokens: int = 12_000       # prompt budget (system + prompt), the reference's max_input_tokens
    summary_max_chars: int = 220         # a summary is cut to this length (the reference's summary_max_chars)
    max_retrieve_depth: int = 4          # re-asks per turn after a retrieve (the reference's max_retrieve_depth)
    tokenizer_model: str = "gpt-4o-mini"  # whose tiktoken encoding counts the budget


OWN_TEXTS = MemoryTexts(init_obs="The story has begun.", observation="The player says: {player_input}")
MAX_RETRIEVE_DEPTH = OWN_TEXTS.max_retrieve_depth
SUMMARY_MAX_CHARS = OWN_TEXTS.summary_max_chars
MEMORY_CHUNKS = OWN_TEXTS.memory_size
MEMORY_TOKENS = OWN_TEXTS.max_input_tokens


def cap_summary(text: str, max_chars: int = SUMMARY_MAX_CHARS) -> str:
    """One line of at most max(64, max_chars) characters, cut with '...' as the reference summarizer does."""
    limit = max(64, int(max_chars))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def serialize(chunks: list[Chunk], skip_empty: bool = False) -> str:
    """`Label: text` lines (a summarised trajectory leaves empty texts out, the memory does not)."""
    return "\n".join(f"{label}: {text}" for chunk in chunks for label, text in chunk
                     if text is not None and (text or not skip_empty))


@dataclass(frozen=True)
class SummaryJob:
    """One summary a prompt shows: the subgoal and its trajectory as `Label: text` lines."""

    subgoal: str
    trajectory: str


@dataclass
class HiAgentMemory:
    chunks: list[Chunk] = field(default_factory=list)
    subgoal_idx: list[int] = field(default_factory=list)  # retrieve ids since the last subgoal (1-based, window)
    pending_action: str | None = None                     # the last narration, stored with the next input

    def start(self, texts: MemoryTexts) -> None:
        if not self.chunks:
            self.chunks = [[(OBSERVATION, texts.init_obs)]]

    def observe(self, player_input: str, texts: MemoryTexts) -> None:
        """A new turn: the previous narration with the player's new input (as the reference's update)."""
        self.start(texts)
        if self.pending_action is not None:
            self.chunks.append([(ACTION, self.pending_action),
                                (OBSERVATION, texts.observation.format(player_input=player_input))])
            self.pending_action = None

    def propose(self, subgoal: str) -> None:
        self.subgoal_idx = []
        self.chunks.append([(SUBGOAL, subgoal)])

    def retrieve(self, ids: list[int]) -> None:
        """Ids that name no finished subgoal of the window are kept and simply match nothing (ignored)."""
        self.subgoal_idx.extend(ids)

    def act(self, narration: str) -> None:
        self.pending_action = narration

    # ---- the layout of one prompt ----------------------------------------------------------
    def window(self, texts: MemoryTexts, drop: int = 0) -> list[Chunk]:
        return self.chunks[-texts.memory_size:][drop:]

    @staticmethod
    def ends_with_subgoal(window: list[Chunk]) -> bool:
        return bool(window and window[-1] and window[-1][0][0] == SUBGOAL)

    def _finished(self, window: list[Chunk], texts: MemoryTexts) -> list[tuple[int, int, int, SummaryJob | None]]:
        """(i, begin, end, job) per finished subgoal of the window; job None when it is shown in full."""
        starts = [i for i, c in enumerate(window) if c and c[0][0] == SUBGOAL]
        if len(starts) <= 1:
            return []
        keep = {v - 1 for v in self.subgoal_idx if v > 0}
        out = []
        for i, (begin, end) in enumerate(zip(starts, starts[1:])):
            if i in keep:
                out.append((i, begin, end, None))
                continue
            trajectory = [c for c in window[begin + 1:end]
                          if not (c and c[0][0] == ACTION and texts.skip_marker and texts.skip_marker in c[0][1])]
            out.append((i, begin, end, SummaryJob(window[begin][0][1], serialize(trajectory, skip_empty=True))))
        return out

    def summary_jobs(self, window: list[Chunk], texts: MemoryTexts) -> list[SummaryJob]:
        return [job for *_, job in self._finished(window, texts) if job is not None]

    def render(self, window: list[Chunk], texts: MemoryTexts, summaries: dict[SummaryJob, str]) -> str:
        finished = self._finished(window, texts)
        if not finished:
            return serialize(window)
        starts = [i for i, c in enumerate(window) if c and c[0][0] == SUBGOAL]
        out: list[Chunk] = list(window[:starts[0]])
        for i, begin, end, job in finished:
            if job is None:
                out.extend(window[begin:end])
            else:
                out.append([(f"{i + 1} {SUBGOAL}", job.subgoal), (OBSERVATION, summaries[job])])
        out.append([(f"{len(starts)} {SUBGOAL}", window[starts[-1]][0][1])])
        out.extend(window[starts[-1] + 1:])
        return serialize(out)

    def as_dict(self) -> dict[str, Any]:
        subgoals = [c[0][1] for c in self.chunks if c and c[0][0] == SUBGOAL]
        return {"chunks": len(self.chunks), "subgoals": subgoals, "retrieve_ids": list(self.subgoal_idx)}
