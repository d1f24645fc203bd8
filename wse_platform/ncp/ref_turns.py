"""The per-turn content of a reference result file (`runs/<spec>.json`) as `ncp_turns` rows.

What the reference runner writes per turn — the player input, the narration, the fact update the
auditor proposed, the conflict decision (after the review, when there was one), the trajectory and
commitment assessments, the newly occurred nodes — fills the same columns our loop fills, in our
JSON layouts (turn t = the reference's `turn_id` t − 1; turn 0 = the opening, `history` turn −1).
What the file does not hold stays NULL:

- the opening's fact update (its pending facts are only visible inside `final_state.facts`):
  `fact_diff_json` of turn 0;
- the initial conflict report of a reviewed turn (the file keeps only the decision after the review):
  `conflicts` is NULL in `conflict_report_json` when `double_checked`, `reviews` always;
- the facts after each turn: `ledger_snapshot_json` is `final_state.facts` on the last committed turn
  (and on a conflict turn, whose state is the one before it), NULL elsewhere; `added_turn` /
  `negated_turn` are NULL;
- the trigger / key-delta split of a node assessment (one `reason` is kept), the applied part of a fact
  update, the memory of a method (`memory_json`), and the LLM calls (`llm_call_ids` is empty: none of
  ours were made).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from wse_platform.ncp.schemas import word_count

KINDS = ("fact", "commitment", "player_input")


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list:
    return x if isinstance(x, list) else []


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _fact_diff(update: Any, discarded: bool) -> str | None:
    if not isinstance(update, dict):
        return None
    proposed = {"add_facts": [str(f) for f in _list(update.get("add_facts"))],
                "negate_facts": [str(f) for f in _list(update.get("negate_fact_ids"))],
                "reason": _text(update.get("reason"))}
    return _dump({"proposed": proposed, "applied": None, "discarded": discarded})


def _conflict_report(decision: Any) -> str | None:
    if not isinstance(decision, dict):
        return None
    kept = [{"kind": c.get("kind"), "target_id": c.get("target_id"), "reason": c.get("reason")}
            for c in _list(decision.get("conflicts")) if isinstance(c, dict)]
    counts = {k: decision.get(f"{k}_count") if isinstance(decision.get(f"{k}_count"), int)
              else sum(c["kind"] == k for c in kept) for k in KINDS}
    reviewed = decision.get("double_checked") is True
    confirmed = decision.get("has_conflict") is True or sum(counts.values()) > 0
    return _dump({"counts": counts if not reviewed else None,
                  "conflicts": None if reviewed else kept,  # the initial report of a reviewed turn is not in the file
                  "double_checked": reviewed, "reviews": None, "review_reason": _text(decision.get("review_reason")),
                  "kept": kept, "confirmed": confirmed, "confirmed_counts": counts})


def _node(assessments: Any, current: str | None) -> str | None:
    found = [a for a in _list(assessments) if isinstance(a, dict) and a.get("target_node_id") is not None]
    if not found:
        return None
    a = next((x for x in found if x.get("target_node_id") == current), found[0])
    return _dump({"node_id": a["target_node_id"], "advanced": a.get("occurred") is True,
                  "reason": _text(a.get("reason"))})


def _statuses(assessments: Any, turn: int) -> str | None:
    found = [a for a in _list(assessments) if isinstance(a, dict) and a.get("commitment_id") is not None]
    if not found:
        return None
    return _dump({"statuses": {a["commitment_id"]: {"status": str(a.get("status") or "").upper(),
                                                    "reason": _text(a.get("reason")), "turn": turn} for a in found},
                  "previous": None})


def _snapshot(facts: Any) -> str:
    return _dump([{"id": f.get("id"), "content": f.get("text"), "active": f.get("active") is not False,
                   "added_turn": None, "negated_turn": None} for f in _list(facts) if isinstance(f, dict)])


def turn_rows_from_result(result: Mapping[str, Any], model: str, arch: str, auditor_id: str,
                          outcome: str) -> list[dict[str, Any]]:
    """`ncp_turns` rows of one reference result file (already checked by `episode_row_from_result`);
    `outcome` is our termination of the episode (on its last turn)."""
    spec_id = result["episode"]["id"]
    turns = [_dict(t) for t in _list(result.get("turns"))]
    final = _dict(result.get("final_state"))
    nodes = [n["id"] for n in _list(final.get("trajectory")) if isinstance(n, dict) and n.get("id") is not None]
    occurred: set[str] = set()

    def current() -> str | None:
        return next((n for n in nodes if n not in occurred), None)

    def row(turn: int, player: str | None, narration: str | None, before: str | None, after: str | None
            ) -> dict[str, Any]:
        return {"model": model, "arch": arch, "spec_id": spec_id, "auditor_id": auditor_id, "turn": turn,
                "node_before": before, "node_after": after, "player_input": player, "narrator_text": narration,
                "fact_diff_json": None, "conflict_report_json": None, "node_assessment_json": None,
                "commitment_status_json": None, "ledger_snapshot_json": None, "memory_json": None, "outcome": None,
                "invalid_role": None, "player_words": word_count(player) if player else None,
                "narrator_words": word_count(narration) if narration else None, "llm_call_ids": [],
                "session": None}

    rows = []
    opening = next((h for h in _list(final.get("history")) if isinstance(h, dict) and h.get("turn_id") == -1), None)
    if opening is not None:
        rows.append(row(0, None, _text(opening.get("narrator_response")), current(), current()))
    conflict_at = len(turns) if outcome == "CONFLICT" else None
    for t, item in enumerate(turns, start=1):
        evaluation = _dict(item.get("evaluation"))
        before = current()
        if t != conflict_at:
            occurred.update(str(n) for n in _list(item.get("newly_occurred_node_ids")))
        r = row(t, _text(item.get("player_input")), _text(item.get("narrator_response")), before, current())
        r["fact_diff_json"] = _fact_diff(evaluation.get("fact_update"), discarded=t == conflict_at)
        r["conflict_report_json"] = _conflict_report(evaluation.get("conflict"))
        r["node_assessment_json"] = _node(item.get("trajectory_assessments"), before)
        r["commitment_status_json"] = _statuses(item.get("commitment_assessments"), t)
        rows.append(r)
    if rows:
        rows[-1]["outcome"] = outcome
        last_committed = len(turns) - 1 if conflict_at is not None else len(turns)
        for r in rows:  # the file holds the facts after the last committed turn only
            if r["turn"] in (last_committed, conflict_at):
                r["ledger_snapshot_json"] = _snapshot(final.get("facts"))
    return rows
