"""Text blocks the NCP-Bench prompts are filled with (one renderer per kind of input).

Every role gets its inputs in the same shapes, so a test can check that a request carries
e.g. the text of every trajectory node. The full reference trajectory R is rendered as the
"trajectory progress" ledger (each node with its status, description, trigger and key delta:
the paper includes the full R in the prompts, App. C.3).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.schemas import FactDiff
from wse_platform.ncp.spec import NarrativeSpec, TrajectoryNode


@dataclass(frozen=True)
class Exchange:
    """One visible turn: the player's input (None for the opening, turn 0) and the narration."""

    turn: int
    player: str | None
    narrator: str


def facts(ledger: FactLedger) -> str:
    """Active facts, one `- f_N: text` line each (rendered once per state of the ledger)."""
    return ledger.memo(facts, _facts)


def _facts(ledger: FactLedger) -> str:
    return "\n".join(f"- {f.id}: {f.content}" for f in ledger.active()) or "(none)"


def commitments(spec: NarrativeSpec, statuses: Mapping[str, Mapping[str, Any]], violation: bool = True) -> str:
    """Every commitment with type, tracked status, description and conditions."""
    out = []
    for c in spec.commitments:
        lines = [f"- {c.id} [{c.type}, {statuses[c.id]['status'].lower()}]: {c.description}",
                 f"  satisfied when: {c.satisfaction_condition}"]
        if violation:
            lines.append(f"  violated when: {c.violation_condition}")
        out.append("\n".join(lines))
    return "\n".join(out) or "(none)"


def trajectory(spec: NarrativeSpec, node_idx: int, detail: bool = True) -> str:
    """The full reference trajectory with each node's status (occurred / current / pending)."""
    out = []
    for i, n in enumerate(spec.trajectory):
        status = "occurred" if i < node_idx else ("current" if i == node_idx else "pending")
        line = f"- {n.id} [{status}]: {n.description}"
        if detail:
            line += f"\n  trigger: {n.trigger_event}\n  key delta: {n.key_delta}"
        out.append(line)
    return "\n".join(out) or "(none)"


def current_node(spec: NarrativeSpec, node_idx: int) -> str:
    """The node that governs this turn; once every node occurred, the last one (as the reference)."""
    if not spec.trajectory:
        return "(none)"
    node: TrajectoryNode = spec.trajectory[min(node_idx, len(spec.trajectory) - 1)]
    done = " (every node has already occurred)" if node_idx >= len(spec.trajectory) else ""
    return f"{node.id}{done}: {node.description}\n  trigger: {node.trigger_event}\n  key delta: {node.key_delta}"


def node_trigger_delta(spec: NarrativeSpec, node_idx: int) -> str:
    """The node check's view of the current node: its id, trigger and key delta (no description, as the
    reference's trajectory check)."""
    if node_idx >= len(spec.trajectory):
        return "(none)"
    n = spec.trajectory[node_idx]
    return f"{n.id}\n  trigger: {n.trigger_event}\n  key delta: {n.key_delta}"


def narrator_trajectory(spec: NarrativeSpec, node_idx: int, mode: str) -> str:
    """The narrators' optional view of the whole trajectory: nothing with `current_node` (the reference
    narrators see only the current node), the full R with `full` (`ncp.narrator_trajectory`)."""
    if mode != "full":
        return ""
    return "\n\nFull reference trajectory (status of each node):\n" + trajectory(spec, node_idx)


def system_history(history: Sequence[Exchange]) -> str:
    """Only the narrator's earlier responses (the auditors' and narrator's continuity record)."""
    out = [f"{'Opening' if ex.player is None else f'Turn {ex.turn}'} narration:\n{ex.narrator}" for ex in history]
    return "\n".join(out) or "(no earlier narration)"


def interaction_history(history: Sequence[Exchange]) -> str:
    """The visible transcript: opening, then each turn's player input and narration."""
    out = []
    for ex in history:
        if ex.player is None:
            out.append(f"Opening:\n{ex.narrator}")
        else:
            out.append(f"Turn {ex.turn}:\n- Player: {ex.player}\n- Narrator: {ex.narrator}")
    return "\n".join(out) or "(the story has not started yet)"


def fact_diff(diff: FactDiff | None, ledger: FactLedger) -> str:
    """Candidate (or pending) fact updates: facts to add and facts to negate (with their text)."""
    if diff is None:
        diff = FactDiff.empty()
    add = "\n".join(f"- {a}" for a in diff.add_facts) or "(none)"
    neg = "\n".join(f"- {i}: {ledger.get(i).content}" if i in ledger else f"- {i}"
                    for i in diff.negate_facts) or "(none)"
    return f"facts to add:\n{add}\nfacts to negate:\n{neg}"
