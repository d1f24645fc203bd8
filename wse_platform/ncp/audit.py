"""The fixed NCP-Bench audit of one turn, in the order of the paper's Algorithm 1.

For a batch of turns (one per still-active episode, so each stage is one `complete_many`):

1. fact update: the candidate diff ΔF_t of the narration against the pre-turn facts;
2. conflict check, given ΔF_t (and the full trajectory, commitments, history...);
3. double-check, only for a turn with a flagged conflict: one review of the whole report,
   which may overturn, narrow or relabel it (`count` > 1: k reviews, a conflict is kept
   when a strict majority of the reviews keeps it). A kept conflict ends the episode as
   CONFLICT and ΔF_t (and any pending opening updates) are discarded;
4. otherwise the turn is committed: pending opening updates, then ΔF_t, applied to the
   ledger, and the exchange appended to the history;
5. node update on the facts after the turn and the whole interaction history;
6. commitment status: every commitment re-assessed; the statuses replace the previous ones
   (as the reference implementation does: a commitment can go back to PENDING);
7. SUCCESS once every achievement commitment is SATISFIED.

The pre-turn facts of turn 1 are F0 plus the updates extracted from the opening narration
(`audit_openings`), so a contradiction of the opening is a detectable fact conflict.
The live loop and the re-audit of stored transcripts share these functions.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wse_platform.llm.types import LLMResult
from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.prompter import Prompter
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.schemas import CONFLICT_KINDS, Conflict, ConflictReport, FactDiff, NodeAssessment

if TYPE_CHECKING:
    from wse_platform.ncp.state import EpisodeRun


def dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def add_calls(row: dict[str, Any], *results: LLMResult) -> None:
    for r in results:
        row["llm_call_ids"].extend(r.call_ids)


@dataclass
class PendingTurn:
    """A turn whose player input and narrator response exist and must now be audited."""

    run: "EpisodeRun"
    turn: int
    player_input: str
    narrator_text: str
    row: dict[str, Any]
    facts: FactLedger | None = None      # pre-turn facts (ledger + pending opening updates)
    diff: FactDiff | None = None


def audit_openings(client: Any, prompter: Prompter, items: list[tuple["EpisodeRun", dict[str, Any]]]) -> None:
    """Extract the facts each opening narration establishes; they stay pending until turn 1
    is committed (and are shown to the narrator and auditors of turn 1)."""
    todo = [(run, row) for run, row in items if not run.done and row.get("narrator_text")]
    if not todo:
        return
    results = client.complete_many([prompter.fact_update(run, 0, run.ledger, row["narrator_text"], stage="opening")
                                    for run, row in todo])
    for (run, row), res in zip(todo, results):
        add_calls(row, res)
        if not res.ok:
            run.fail(res, 0, row)
            continue
        run.pending = res.output
        row["fact_diff_json"] = dump({"proposed": res.output.model_dump(), "applied": None, "pending": True,
                                      "discarded": False})


def _kept_conflicts(reviews: list[Any]) -> list[Conflict]:
    """Conflicts kept by a strict majority of the reviews, keyed by (kind, target id)."""
    k = len(reviews)
    tally = Counter(key for rv in reviews for key in {c.key for c in rv.standing})
    kept: dict[tuple[str, str], Conflict] = {}
    for rv in reviews:
        for c in rv.standing:
            if tally[c.key] * 2 > k and c.key not in kept:
                kept[c.key] = c
    return list(kept.values())


def _c(c: Any) -> dict[str, str]:
    """A conflict in the platform's field names (the reference's `type`/`id` are `kind`/`target_id`)."""
    return {"kind": c.kind, "target_id": c.target_id, "reason": c.reason}


def _review(rv: Any) -> dict[str, Any]:
    return {**rv.model_dump(), "conflicts": [_c(c) for c in rv.conflicts], "standing": [_c(c) for c in rv.standing]}


def _report_json(report: ConflictReport, reviews: list[Any] | None, kept: list[Conflict]) -> str:
    return dump({
        "counts": report.counts(), "conflicts": [_c(c) for c in report.conflicts],
        "double_checked": reviews is not None,
        "reviews": [_review(rv) for rv in reviews] if reviews is not None else None,
        "review_reason": " | ".join(rv.review_reason for rv in reviews) if reviews else None,
        "kept": [_c(c) for c in kept], "confirmed": bool(kept),
        "confirmed_counts": {k: sum(c.kind == k for c in kept) for k in CONFLICT_KINDS},
    })


def _ask(client: Any, items: list, make_request: Callable[[Any], Any],
         pending_of: Callable[[Any], PendingTurn] = lambda x: x) -> list[tuple[Any, Any]]:
    """One role's requests for `items` in one batch: every result's calls go on its turn row, a failed
    request ends its episode; returns (item, result) for the requests that succeeded."""
    results = client.complete_many([make_request(x) for x in items]) if items else []
    answered = []
    for x, r in zip(items, results):
        p = pending_of(x)
        add_calls(p.row, r)
        if r.ok:
            answered.append((x, r))
        else:
            p.run.fail(r, p.turn, p.row)
    return answered


def audit_turns(client: Any, prompter: Prompter, pending: list[PendingTurn]) -> None:
    """Steps 1–7 for a batch of turns (one per episode), mutating each run and its row."""
    for p in pending:
        p.facts = p.run.ledger.copy()
        if p.run.pending is not None:
            p.facts.apply(p.run.pending, 0)

    # 1. fact update (ΔF_t) on the pre-turn facts
    alive: list[PendingTurn] = []
    for p, r in _ask(client, pending, lambda p: prompter.fact_update(p.run, p.turn, p.facts, p.narrator_text)):
        p.diff = r.output
        p.row["fact_diff_json"] = dump({"proposed": r.output.model_dump(), "applied": None, "discarded": False})
        alive.append(p)

    # 2. conflict check, given ΔF_t
    flagged: list[tuple[PendingTurn, ConflictReport]] = []
    clean: list[PendingTurn] = []
    for p, r in _ask(client, alive, lambda p: prompter.conflict_check(p.run, p.turn, p.facts, p.player_input,
                                                                      p.narrator_text, p.diff)):
        report: ConflictReport = r.output
        p.row["conflict_report_json"] = _report_json(report, None, [])
        (flagged.append((p, report)) if report.conflicts else clean.append(p))

    # 3. double-check of the whole report (k reviews when count > 1)
    reviews = _ask(client, flagged, lambda f: prompter.double_check(f[0].run, f[0].turn, f[0].facts, f[0].player_input,
                                                                    f[0].narrator_text, f[0].diff, f[1]),
                   pending_of=lambda f: f[0])
    for (p, report), r in reviews:
        kept = _kept_conflicts(r.outputs)
        p.row["conflict_report_json"] = _report_json(report, r.outputs, kept)
        if kept:
            p.row["fact_diff_json"] = dump({"proposed": p.diff.model_dump(), "applied": None, "discarded": True})
            p.row["ledger_snapshot_json"] = dump(p.run.ledger.snapshot())
            p.row["node_after"] = p.row["node_before"]
            p.row["outcome"] = "CONFLICT"
            p.run.conflict_kinds = sorted({c.kind for c in kept})
            p.run.end("CONFLICT", p.turn)
        else:
            clean.append(p)
    order = {id(p): i for i, p in enumerate(pending)}
    clean.sort(key=lambda p: order[id(p)])

    # 4. commit: pending opening updates, then ΔF_t; the exchange joins the history
    for p in clean:
        run = p.run
        opening_applied = run.ledger.apply(run.pending, 0).as_dict() if run.pending is not None else None
        run.pending = None
        applied = run.ledger.apply(p.diff, p.turn)
        p.row["fact_diff_json"] = dump({"proposed": p.diff.model_dump(), "applied": applied.as_dict(),
                                        "opening_applied": opening_applied, "discarded": False})
        run.history.append(Exchange(p.turn, p.player_input, p.narrator_text))

    # 5. node update (only while a node remains)
    with_node = [p for p in clean if p.run.current_node is not None]
    for p, r in _ask(client, with_node, lambda p: prompter.node_update(p.run, p.turn)):
        a: NodeAssessment = r.output
        p.row["node_assessment_json"] = dump({"node_id": p.run.current_node.id, **a.model_dump(),
                                              "advanced": a.advances})
        if a.advances:
            p.run.node_idx += 1
    clean = [p for p in clean if not p.run.done]

    # 6. commitment status: all commitments, statuses replaced
    asks = [p for p in clean if p.run.spec.commitments]
    for p, r in _ask(client, asks, lambda p: prompter.commitment_status(p.run, p.turn)):
        previous = {cid: s["status"] for cid, s in p.run.statuses.items()}
        p.run.statuses = {s.commitment_id: {"status": s.status, "reason": s.reason, "turn": p.turn}
                          for s in r.output.statuses}
        p.row["commitment_status_json"] = dump({"statuses": p.run.statuses, "previous": previous})
    for p in clean:
        if p.run.done:
            continue
        p.row["ledger_snapshot_json"] = dump(p.run.ledger.snapshot())
        p.row["node_after"] = p.run.current_node.id if p.run.current_node else None
        p.run.last_turn = p.turn
        # 7. termination
        if p.run.achievements_satisfied():
            p.row["outcome"] = "SUCCESS"
            p.run.end("SUCCESS", p.turn)
