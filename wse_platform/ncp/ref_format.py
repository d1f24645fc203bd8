"""Placeholder values in the shapes the reference runner fills them (`ncp.reference` mode).

Each function renders one input from the platform's episode state the way the reference's
evaluator, checkers, narrators and player conditions render it: the same line layouts, the same
empty-value texts (which differ per role), commitment statuses in lower case, and the reference's
turn numbering (the opening is turn -1, the first player turn is turn 0: our turn t is its t-1).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.schemas import FactDiff
from wse_platform.ncp.spec import NarrativeSpec


def role(spec: NarrativeSpec, fallback: str) -> str:
    """The player role, or the role-specific fallback the reference uses when it is empty."""
    return (spec.meta.player_role or "").strip() or fallback


def ref_turn(ex: Exchange) -> int:
    return -1 if ex.player is None else ex.turn - 1


def facts(ledger: FactLedger, empty: str = "(none)") -> str:
    return ledger.memo((facts, empty), lambda lg: "\n".join(f"- {f.id}: {f.content}" for f in lg.active()) or empty)


def checker_facts(ledger: FactLedger) -> str:
    return ledger.memo(checker_facts, _checker_facts)


def _checker_facts(ledger: FactLedger) -> str:
    lines = [f"- {f.id.strip() or 'f_?'}: {f.content.strip() or '(empty)'}" for f in ledger.active()]
    return "\n".join(lines) or "(No explicit fact data available)"


def commitments(spec: NarrativeSpec, statuses: Mapping[str, Mapping[str, Any]], empty: str,
                violation: bool = True) -> str:
    out = []
    for c in spec.commitments:
        out += [f"- {c.id}: type={c.type} | status={str(statuses[c.id]['status']).lower()}",
                f"  description: {c.description}",
                f"  satisfaction_condition: {c.satisfaction_condition}"]
        if violation:
            out.append(f"  violation_condition: {c.violation_condition}")
    return "\n".join(out) or empty


def node_block(spec: NarrativeSpec, index: int) -> str:
    """`- node_id:` block with description, trigger and delta (opening, narrator, conflict check)."""
    if not spec.trajectory:
        return "(None)"
    n = spec.trajectory[min(index, len(spec.trajectory) - 1)]
    return "\n".join((f"- node_id: {n.id}", f" | description: {n.description}", f" | trigger: {n.trigger_event}",
                      f" | delta: {n.key_delta}"))


def trajectory(spec: NarrativeSpec, node_idx: int) -> str:
    """Trajectory progress of the conflict checks: every node with status, description, trigger, delta."""
    out = []
    for i, n in enumerate(spec.trajectory):
        out += [f"- {n.id}: status={'occurred' if i < node_idx else 'pending'}", f" | description: {n.description}",
                f" | trigger: {n.trigger_event}", f" | delta: {n.key_delta}"]
    return "\n".join(out) or "(No trajectory progress available)"


def checker_trajectory(spec: NarrativeSpec, node_idx: int) -> str:
    """Trajectory progress of the status check: status and description only."""
    out = []
    for i, n in enumerate(spec.trajectory):
        out += [f"- {n.id.strip() or 's_?'}: status={'occurred' if i < node_idx else 'pending'}",
                f" | description: {n.description.strip() or '(No description)'}"]
    return "\n".join(out) or "(No trajectory progress available)"


def checker_node(spec: NarrativeSpec, node_idx: int) -> str:
    """The node check's current node: its trigger and delta, never its description."""
    if node_idx >= len(spec.trajectory):
        return "(None)"
    n = spec.trajectory[node_idx]
    lines = [f"- {n.id.strip() or 's_?'}:", f" | trigger: {n.trigger_event.strip() or '(No trigger event)'}"]
    if n.key_delta.strip():
        lines.append(f" | delta: {n.key_delta.strip()}")
    return "\n".join(lines)


def visible_history(history: Sequence[Exchange]) -> str:
    """Opening, then `Turn N:` with player and system lines (players, node and status checks)."""
    lines: list[str] = []
    for ex in history:
        if ex.player is None:
            lines += ["Opening:", ex.narrator.strip() if ex.narrator.strip() else "(No opening narrative)"]
        else:
            lines += [f"Turn {ref_turn(ex)}:", f"- Player: {ex.player.strip() or '(None)'}",
                      f"- System: {ex.narrator.strip() or '(None)'}"]
    return "\n".join(lines) or "(The story has just begun)"


def player_history(history: Sequence[Exchange]) -> str:
    """The player conditions' history: like `visible_history`, texts not stripped."""
    lines: list[str] = []
    for ex in history:
        if ex.player is None:
            lines += ["Opening:", ex.narrator or "(No opening narrative)"]
        else:
            lines += [f"Turn {ref_turn(ex)}:", f"- Player: {ex.player or '(None)'}",
                      f"- System: {ex.narrator or '(None)'}"]
    return "\n".join(lines) or "(The story has just begun)"


def system_history(history: Sequence[Exchange]) -> str:
    """The auditors' record of the narrator's earlier responses: `Opening System Response:` /
    `Turn N System Response:`, each followed by the response as written."""
    chunks: list[str] = []
    for ex in history:
        chunks += ["Opening System Response:" if ex.player is None else f"Turn {ref_turn(ex)} System Response:",
                   ex.narrator]
    return "\n".join(chunks) or "(No prior system responses)"


def narrator_system_history(history: Sequence[Exchange]) -> str:
    """The reference narrators' record: the visible transcript re-read line by line, keeping the
    opening's non-empty lines (stripped) and, of each turn, the first line of the system response."""
    text = player_history(history).strip()
    if not text or text == "(The story has just begun)":
        return "(No prior system responses)"
    lines, chunks, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i].strip()
        if line == "Opening:":
            opening, i = [], i + 1
            while i < len(lines) and not lines[i].strip().startswith("Turn "):
                if lines[i].strip():
                    opening.append(lines[i].strip())
                i += 1
            if opening:
                chunks += ["Opening System Response:", *opening]
            continue
        if line.startswith("Turn "):
            label, i = line, i + 1
            while i < len(lines) and not lines[i].strip().startswith("Turn "):
                current = lines[i].strip()
                if current.startswith("- System:"):
                    chunks += [f"{label} System Response:", current[len("- System:"):].strip() or "(None)"]
                    break
                i += 1
            continue
        i += 1
    return "\n".join(chunks) or "(No prior system responses)"


def fact_updates(diff: FactDiff | None, ledger: FactLedger) -> str:
    """`add_facts:` / `negate_facts:` blocks (candidate updates of the checks, pending updates of the narrator)."""
    add = [f"- {a}" for a in (diff.add_facts if diff else []) if a.strip()]
    neg = []
    for i in (diff.negate_facts if diff else []):
        i = i.strip()
        if i:
            neg.append(f"- {i}: {ledger.get(i).content}" if i in ledger and ledger.get(i).active else f"- {i}")
    return f"add_facts:\n{chr(10).join(add) or '(none)'}\nnegate_facts:\n{chr(10).join(neg) or '(none)'}"


def initial_conflicts(conflicts: Sequence[Any], spec: NarrativeSpec, ledger: FactLedger, player_input: str) -> str:
    """The double-check's `initial_conflicts_json`: type, id, reason and the text the id points at."""
    active = {f.id: f.content for f in ledger.active()}
    described = {c.id: c.description for c in spec.commitments}
    items = []
    for c in conflicts:
        kind, cid = c.kind, c.target_id
        content = None
        if cid:
            if "fact" in kind:
                content = active.get(cid)
            elif "commitment" in kind:
                content = described.get(cid)
            elif "player_input" in kind:
                content = player_input
            else:
                content = active.get(cid) or described.get(cid)
        items.append({"type": kind, "id": cid, "reason": c.reason, "content": content})
    return json.dumps(items, ensure_ascii=False, indent=2) or "[]"
