"""Per-episode result files in the reference's layout (`runs/<spec>.json` of NLP2CT/NCP-Bench).

`episode_result` turns one stored episode (its `ncp_episodes` row, its `ncp_turns` rows and the
spec) into the reference's result mapping: `episode`, `termination` (conflict / all_resolved /
max_turns), `turns` (the player turns, numbered from 0, each with its fact update, conflict
decision, trajectory and commitment assessments), `final_state` (facts, commitments, trajectory,
history with the opening at turn -1). `episode_row_from_result` reads such a file back into an
`ncp_episodes` row and `ref_turns.turn_rows_from_result` into its `ncp_turns` rows, so results
produced with the reference code get our tables, survival curves, scorecard, `wse view` pages and
re-audit (`wse ncp import-runs DIR`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wse_platform.ncp.spec import NarrativeSpec
from wse_platform.ncp.state import play_session

TERMINATION_TO_REF = {"CONFLICT": "conflict", "SUCCESS": "all_resolved", "SURVIVAL": "max_turns"}
TERMINATION_FROM_REF = {v: k for k, v in TERMINATION_TO_REF.items()}
KINDS = ("fact", "commitment", "player_input")


class ResultFileError(ValueError):
    pass


def _j(text: str | None) -> Any:
    return json.loads(text) if text else None


def _conflict(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """The decision the reference records: the review's standing conflicts when there was a review."""
    if report is None:
        standing: list[Mapping[str, Any]] = []
        double_checked, reason = False, None
    elif report.get("double_checked"):
        standing, double_checked, reason = report.get("kept") or [], True, report.get("review_reason")
    else:
        standing, double_checked, reason = report.get("conflicts") or [], False, None
    counts = {k: sum(c.get("kind") == k for c in standing) for k in KINDS}
    return {"has_conflict": bool(standing), "fact_count": counts["fact"], "commitment_count": counts["commitment"],
            "player_input_count": counts["player_input"], "total_count": len(standing),
            "conflicts": [{"kind": c.get("kind"), "target_id": c.get("target_id"), "reason": c.get("reason")}
                          for c in standing],
            "double_checked": double_checked, "review_reason": reason}


def _node_reason(node: Mapping[str, Any]) -> str | None:
    """One reason for a node assessment: ours has one per field, an imported one (`ref_turns.py`) only one."""
    if isinstance(node.get("trigger"), dict) and isinstance(node.get("delta"), dict):
        return f"trigger: {node['trigger'].get('reason')} | delta: {node['delta'].get('reason')}"
    return node.get("reason")


def episode_result(spec: NarrativeSpec, episode: Mapping[str, Any], turns: Sequence[Mapping[str, Any]]) -> dict:
    """The reference's result mapping of one episode with a result."""
    term = episode["termination"]
    if term not in TERMINATION_TO_REF:
        raise ResultFileError(f"{spec.spec_id}: termination {term!r} has no reference result file")
    rows = sorted(turns, key=lambda r: r["turn"])
    opening = next((r for r in rows if r["turn"] == 0), None)
    history = [{"turn_id": -1, "player_input": None, "narrator_response": opening["narrator_text"]}] if opening else []
    out_turns, statuses = [], {c.id: "pending" for c in spec.commitments}
    facts: list[dict[str, Any]] = [{"id": f.id, "text": f.content, "active": not f.negated}
                                   for f in spec.initial_facts]
    for r in rows:
        if r["turn"] == 0:
            continue
        diff = (_j(r["fact_diff_json"]) or {}).get("proposed") or {}
        node = _j(r["node_assessment_json"])
        status = _j(r["commitment_status_json"])
        new_status = {cid: s["status"].lower() for cid, s in (status or {}).get("statuses", {}).items()}
        out_turns.append({
            "turn_id": r["turn"] - 1, "player_input": r["player_input"], "narrator_response": r["narrator_text"],
            "evaluation": {"fact_update": {"add_facts": list(diff.get("add_facts", [])),
                                           "negate_fact_ids": list(diff.get("negate_facts", [])),
                                           "reason": diff.get("reason")},
                           "conflict": _conflict(_j(r["conflict_report_json"]))},
            "trajectory_assessments": ([{"target_node_id": node["node_id"], "occurred": bool(node["advanced"]),
                                         "reason": _node_reason(node)}] if node else []),
            "commitment_assessments": [{"commitment_id": c.id, "status": new_status[c.id],
                                        "reason": status["statuses"][c.id]["reason"]}
                                       for c in spec.commitments if c.id in new_status],
            "newly_occurred_node_ids": [node["node_id"]] if node and node["advanced"] else [],
            "new_satisfaction_ids": [cid for cid, s in new_status.items()
                                     if s == "satisfied" and statuses.get(cid) != "satisfied"],
        })
        if r["outcome"] == "CONFLICT":
            break  # the reference keeps the state before a conflict turn
        statuses.update(new_status)
        history.append({"turn_id": r["turn"] - 1, "player_input": r["player_input"],
                        "narrator_response": r["narrator_text"]})
        snap = _j(r["ledger_snapshot_json"])
        if snap:
            facts = [{"id": f["id"], "text": f["content"], "active": bool(f["active"])} for f in snap]
    done = int(episode["nodes_completed"] or 0)
    return {
        "episode": {"id": spec.spec_id, "player_role": spec.meta.player_role},
        "termination": TERMINATION_TO_REF[term],
        "turns": out_turns,
        "final_state": {
            "facts": facts,
            "commitments": [{"id": c.id, "kind": c.type, "description": c.description,
                             "satisfaction_condition": c.satisfaction_condition,
                             "violation_condition": c.violation_condition, "status": statuses[c.id]}
                            for c in spec.commitments],
            "trajectory": [{"id": n.id, "description": n.description, "trigger_event": n.trigger_event,
                            "key_delta": n.key_delta, "occurred": i < done} for i, n in enumerate(spec.trajectory)],
            "history": history,
        },
    }


def write_results(out_dir: str | Path, results: Sequence[dict]) -> list[Path]:
    """One `<spec>.json` per episode (written whole, then renamed into place)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for res in results:
        path = out / f"{res['episode']['id']}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(res, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        paths.append(path)
    return paths


def _need(value: Any, what: str, file: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind):
        raise ResultFileError(f"{file}: {what} must be a {getattr(kind, '__name__', kind)} (a reference result "
                              "file has episode, termination, turns and final_state)")
    return value


def episode_row_from_result(result: Any, file: str, model: str, arch: str, auditor_id: str,
                            eval_order: int | None = None) -> dict[str, Any]:
    """An `ncp_episodes` row from one reference result file (the metrics the reference computes from it)."""
    _need(result, "the document", file, dict)
    episode = _need(result.get("episode"), "episode", file, dict)
    spec_id = _need(episode.get("id"), "episode.id", file, str)
    term = result.get("termination")
    if term not in TERMINATION_FROM_REF:
        raise ResultFileError(f"{file}: termination {term!r} is not one of {sorted(TERMINATION_FROM_REF)}")
    turns = _need(result.get("turns"), "turns", file, list)
    final = _need(result.get("final_state"), "final_state", file, dict)
    trajectory = _need(final.get("trajectory"), "final_state.trajectory", file, list)
    commitments = _need(final.get("commitments"), "final_state.commitments", file, list)
    kinds: list[str] = []
    if term == "conflict" and turns:
        last = ((turns[-1] or {}).get("evaluation") or {}).get("conflict") or {}
        kinds = [k for k in KINDS if isinstance(last.get(f"{k}_count"), int) and last[f"{k}_count"] > 0]
    reached = sum(1 for n in trajectory if isinstance(n, dict) and n.get("occurred") is True)
    satisfied = sum(1 for c in commitments if isinstance(c, dict) and c.get("status") == "satisfied")
    n_nodes, n_comm = len(trajectory), len(commitments)
    return {"model": model, "arch": arch, "spec_id": spec_id, "eval_order": eval_order, "auditor_id": auditor_id,
            "turns": len(turns), "termination": TERMINATION_FROM_REF[term], "conflict_kinds": kinds,
            "nodes_completed": reached, "nodes_total": n_nodes,
            "trajectory_progress": reached / n_nodes if n_nodes else 0.0,
            "commitments_satisfied": satisfied, "commitments_total": n_comm,
            "commitments_satisfied_share": satisfied / n_comm if n_comm else 0.0,
            "invalid_role": None, "invalid_message": None,
            "narrator_responses": None, "narrator_words_mean": None, "narrator_over_limit": None,
            "player_inputs": None, "player_words_mean": None, "player_over_limit": None,
            "generation_version": "reference-import"}


def read_results(run_dir: str | Path) -> list[tuple[str, Any]]:
    """(file, parsed JSON) of every `*.json` result file in a folder (checkpoints left out)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResultFileError(f"{run_dir}: not a folder of reference result files (runs/<spec>.json)")
    out = []
    for path in sorted(run_dir.glob("*.json")):
        if path.name.endswith(".checkpoint.json"):
            continue
        try:
            out.append((str(path), json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as err:
            raise ResultFileError(f"{path}: cannot read a reference result file: {err}") from None
    return out


def import_runs(warehouse: Any, run_dir: str | Path, model: str, arch: str, auditor_id: str) -> int:
    """Load a folder of reference result files as the `ncp_episodes` rows of (model, arch, auditor_id) and
    their turns as its `ncp_turns` rows (as far as the files hold them: `ref_turns.py`)."""
    from wse_platform.ncp.episode import episode_frame, turn_frame
    from wse_platform.ncp.ref_turns import turn_rows_from_result
    from wse_platform.ncp.state import word_stats

    try:
        orders = {r["spec_id"]: r["eval_order"] for r in
                  warehouse.query("SELECT spec_id, eval_order FROM ncp_specs").to_dicts()}
    except Exception:  # noqa: BLE001 - no specs table yet: evaluation order unknown
        orders = {}
    rows, turns = [], []
    for file, res in read_results(run_dir):
        row = episode_row_from_result(res, file, model, arch, auditor_id, orders.get((res.get("episode") or {})
                                                                                     .get("id")))
        its_turns = turn_rows_from_result(res, model, arch, auditor_id, row["termination"])
        rows.append({**row, **word_stats(its_turns)})
        turns.extend(its_turns)
    key = {"model": model, "arch": arch, "auditor_id": auditor_id}
    n = warehouse.replace_partition("ncp_episodes", episode_frame(rows), key)
    warehouse.replace_partition("ncp_turns", turn_frame(turns), key)
    return n


def export_runs(warehouse: Any, specs: Mapping[str, NarrativeSpec], out_dir: str | Path, model: str,
                arch: str, auditor_id: str | None = None) -> list[Path]:
    """Write every stored episode of (model, arch[, auditor]) with a result as `<out_dir>/<spec>.json`."""
    eps = warehouse.query("SELECT * FROM ncp_episodes WHERE model = ? AND arch = ? AND (? IS NULL OR auditor_id = ?) "
                          "ORDER BY spec_id", [model, arch, auditor_id, auditor_id]).to_dicts()
    turns = warehouse.query("SELECT * FROM ncp_turns WHERE model = ? AND arch = ? ORDER BY spec_id, turn",
                            [model, arch]).to_dicts()
    by_spec: dict[tuple[str, str, str | None], list[dict]] = {}
    for t in turns:
        by_spec.setdefault((t["spec_id"], t["auditor_id"], t.get("session")), []).append(t)
    results = [episode_result(specs[e["spec_id"]], e,
                              by_spec.get((e["spec_id"], e["auditor_id"], play_session(e["generation_version"])), []))
               for e in eps if e["termination"] in TERMINATION_TO_REF]
    return write_results(out_dir, results)
