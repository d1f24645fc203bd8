"""NCP-Bench episodes: narrator vs player, audited turn by turn (the paper's Algorithm 1).

Turn 0 is an opening narration that starts at the first trajectory node (not audited:
there is no player input yet). Then for t = 1..T_max:

1. player input (sees only the visible transcript), 2. narrator response,
3. fact update + 4. conflict check by the auditor (both on the pre-turn ledger, sent
together); every candidate conflict gets a second confirmation call, and a confirmed
one ends the episode as CONFLICT with the turn's fact updates discarded; otherwise
5. the diff is applied, the trajectory node is assessed (advance only when trigger AND
key delta clearly occurred; at most one node per turn), then the pending commitments'
statuses. 6. SUCCESS once every achievement commitment is satisfied; SURVIVAL at T_max;
an output still invalid after the client's retries ends the run as INVALID (the role
is recorded; never counted as a conflict).

All episodes of a cell run in lockstep: each stage of a turn is one `complete_many`
batch over every still-active episode. The audit stages (3–6) are shared with the
re-audit (`reaudit.py`), which feeds them stored transcripts instead of live turns.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from wse_platform.llm.types import LLMRequest, LLMResult, Sampling
from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.memory import Exchange, HierarchicalMemory, render_exchanges
from wse_platform.ncp.schemas import (CONFLICT_KINDS, CommitmentStatusUpdate, ConfirmationVerdict, ConflictReport,
                                      FactDiff, MemorySummary, NarratorResponse, NodeAssessment, player_turn_model)
from wse_platform.ncp.spec import NarrativeSpec, TrajectoryNode
from wse_platform.prompts import get_prompt

# Bump when the loop's semantics change (part of every episode row's generation_version).
LOOP_VERSION = "ncp-loop-1"

ROLE_PLAYER = {"adversarial": "ncp.player_adversarial", "natural": "ncp.player_natural"}
ROLE_NARRATOR = "ncp.narrator"
ROLE_MEMORY = "ncp.memory_summary"
ROLE_FACT_UPDATE = "ncp.fact_update"
ROLE_CONFLICT_CHECK = "ncp.conflict_check"
ROLE_CONFLICT_CONFIRM = "ncp.conflict_confirm"
ROLE_NODE_UPDATE = "ncp.node_update"
ROLE_COMMITMENT_STATUS = "ncp.commitment_status"
AUDITOR_ROLES = (ROLE_FACT_UPDATE, ROLE_CONFLICT_CHECK, ROLE_CONFLICT_CONFIRM, ROLE_NODE_UPDATE,
                 ROLE_COMMITMENT_STATUS)
AUDITOR_ID_ROLE = "ncp.auditor"  # JudgeConfig.judge_id(role) of an auditor configuration

Termination = Literal["CONFLICT", "SUCCESS", "SURVIVAL", "INVALID", "CENSORED"]
OPENING_INPUT = "(opening)"


# ---- configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """`<narrator>+<player>`: narrator `baseline` (full history) or `memory`; player mode."""

    key: str
    narrator: Literal["baseline", "memory"]
    player: Literal["adversarial", "natural"]

    @classmethod
    def parse(cls, key: str) -> "Architecture":
        narrator, sep, player = key.partition("+")
        if not sep or narrator not in ("baseline", "memory") or player not in ROLE_PLAYER:
            raise ValueError(f"unknown NCP architecture {key!r}: expected '<baseline|memory>+<adversarial|natural>'")
        return cls(key, narrator, player)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AuditorSetup:
    model: str
    prompt_version: str = "v1"
    count: int = 1  # samples of the confirmation pass; a strict majority confirms

    @property
    def auditor_id(self) -> str:
        return f"{AUDITOR_ID_ROLE}:{self.model}:{self.prompt_version}:x{self.count}"

    @classmethod
    def from_judge(cls, judge: Any) -> "AuditorSetup":
        return cls(judge.model, judge.prompt_version, judge.count)


@dataclass(frozen=True)
class EpisodeSetup:
    narrator_model: str
    arch: Architecture
    player_model: str
    auditor: AuditorSetup
    t_max: int
    sampling: Sampling = field(default_factory=Sampling)
    prompts_dir: str | None = None
    memory_chunk: int = 8
    generation_version: str = LOOP_VERSION

    @classmethod
    def from_settings(cls, settings: Any, narrator_model: str, arch: str,
                      generation_version: str | None = None) -> "EpisodeSetup":
        ncp = settings.ncp
        missing = [k for k, v in (("ncp.player_model", ncp.player_model), ("ncp.auditor", ncp.auditor),
                                  ("ncp.t_max", ncp.t_max)) if v is None]
        if missing:
            raise ValueError(f"NCP episodes need {', '.join(missing)} in the configuration")
        return cls(narrator_model=narrator_model, arch=Architecture.parse(arch), player_model=ncp.player_model,
                   auditor=AuditorSetup.from_judge(ncp.auditor), t_max=int(ncp.t_max), sampling=ncp.sampling,
                   prompts_dir=settings.prompts_dir, generation_version=generation_version or LOOP_VERSION)


# ---- per-episode state -----------------------------------------------------------------------

@dataclass
class EpisodeRun:
    """Mutable state of one episode (live or replayed)."""

    spec: NarrativeSpec
    model: str
    arch: str
    auditor_id: str
    ledger: FactLedger
    statuses: dict[str, dict[str, Any]]
    node_idx: int = 0
    stage_start: int = 0                  # first turn played under the current node
    history: list[Exchange] = field(default_factory=list)
    memory: HierarchicalMemory | None = None
    turn_rows: list[dict[str, Any]] = field(default_factory=list)
    termination: str | None = None
    last_turn: int = 0                    # last completed turn
    conflict_kinds: list[str] = field(default_factory=list)
    invalid_role: str | None = None
    invalid_message: str | None = None

    @classmethod
    def start(cls, spec: NarrativeSpec, model: str, arch: str, auditor_id: str,
              memory: HierarchicalMemory | None = None) -> "EpisodeRun":
        statuses = {c.id: {"status": "PENDING", "evidence": [], "turn": None} for c in spec.commitments}
        return cls(spec, model, arch, auditor_id, FactLedger.from_initial(spec.initial_facts), statuses,
                   memory=memory)

    @property
    def done(self) -> bool:
        return self.termination is not None

    @property
    def current_node(self) -> TrajectoryNode | None:
        return self.spec.trajectory[self.node_idx] if self.node_idx < len(self.spec.trajectory) else None

    @property
    def completed_nodes(self) -> list[str]:
        return [n.id for n in self.spec.trajectory[: self.node_idx]]

    def achievements_satisfied(self) -> bool:
        ach = [c.id for c in self.spec.commitments if c.type == "achievement"]
        return bool(ach) and all(self.statuses[c]["status"] == "SATISFIED" for c in ach)

    def end(self, termination: str, turn: int) -> None:
        self.termination = termination
        self.last_turn = turn

    def fail(self, result: LLMResult, turn: int, row: dict[str, Any] | None,
             last_completed: int | None = None) -> None:
        """INVALID: a call stayed invalid after retries. Censored at the last completed turn
        (turn - 1 unless the failing call came after the turn was fully audited)."""
        assert result.failure is not None
        self.invalid_role = result.failure.role
        self.invalid_message = f"{result.failure.error_kind}: {result.failure.message}"
        if row is not None:
            row["outcome"] = "INVALID"
            row["invalid_role"] = self.invalid_role
        self.end("INVALID", last_completed if last_completed is not None else max(turn - 1, 0))

    def episode_row(self, generation_version: str) -> dict[str, Any]:
        n_nodes = len(self.spec.trajectory)
        n_comm = len(self.spec.commitments)
        satisfied = sum(s["status"] == "SATISFIED" for s in self.statuses.values())
        return {
            "model": self.model, "arch": self.arch, "spec_id": self.spec.spec_id,
            "eval_order": self.spec.eval_order, "auditor_id": self.auditor_id, "turns": self.last_turn,
            "termination": self.termination, "conflict_kinds": list(self.conflict_kinds),
            "nodes_completed": self.node_idx, "nodes_total": n_nodes,
            "trajectory_progress": self.node_idx / n_nodes if n_nodes else 0.0,
            "commitments_satisfied": satisfied, "commitments_total": n_comm,
            "commitments_satisfied_share": satisfied / n_comm if n_comm else 0.0,
            "invalid_role": self.invalid_role, "invalid_message": self.invalid_message,
            "generation_version": generation_version,
        }


def new_turn_row(run: EpisodeRun, turn: int, player_input: str | None, narrator_text: str | None) -> dict[str, Any]:
    return {
        "model": run.model, "arch": run.arch, "spec_id": run.spec.spec_id, "auditor_id": run.auditor_id,
        "turn": turn, "node_before": run.current_node.id if run.current_node else None, "node_after": None,
        "player_input": player_input, "narrator_text": narrator_text, "fact_diff_json": None,
        "conflict_report_json": None, "node_assessment_json": None, "commitment_status_json": None,
        "ledger_snapshot_json": None, "memory_json": None, "outcome": None, "invalid_role": None,
        "llm_call_ids": [],
    }


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


# ---- prompt rendering ------------------------------------------------------------------------

def _node_values(node: TrajectoryNode | None) -> dict[str, str]:
    if node is None:
        return {"node_id": "(none)", "node_description": "every planned stage is complete; continue the story "
                                                         "consistently", "node_trigger": "-", "node_key_delta": "-"}
    return {"node_id": node.id, "node_description": node.description, "node_trigger": node.trigger_event,
            "node_key_delta": node.key_delta}


def render_commitments(run: EpisodeRun, ids: list[str] | None = None, conditions: bool = True) -> str:
    lines = []
    for c in run.spec.commitments:
        if ids is not None and c.id not in ids:
            continue
        status = run.statuses[c.id]["status"].lower()
        line = f"{c.id} ({c.type}, {status}): {c.description}"
        if conditions:
            line += f" | satisfied when: {c.satisfaction_condition} | violated when: {c.violation_condition}"
        lines.append(line)
    return "\n".join(lines) or "(none)"


def _completed(run: EpisodeRun) -> str:
    return ", ".join(run.completed_nodes) or "(none)"


class Prompter:
    """Builds the requests of every role for one episode setup (prompt files + config)."""

    def __init__(self, setup: EpisodeSetup):
        self.setup = setup

    def _req(self, role: str, model: str, version: str, output_model: type[BaseModel], run: EpisodeRun,
             turn: int, n: int = 1, **values: Any) -> LLMRequest:
        prompt = get_prompt(role, version, self.setup.prompts_dir)
        return LLMRequest(role=role, model=model, messages=prompt.render(**values), sampling=self.setup.sampling,
                          n=n, output_model=output_model, prompt_version=prompt.id,
                          tags={"spec_id": run.spec.spec_id, "arch": run.arch, "turn": str(turn)})

    def _aud(self, role: str, output_model: type[BaseModel], run: EpisodeRun, turn: int, n: int = 1,
             **values: Any) -> LLMRequest:
        a = self.setup.auditor
        return self._req(role, a.model, a.prompt_version, output_model, run, turn, n=n, **values)

    # generation roles
    def player(self, run: EpisodeRun, turn: int) -> LLMRequest:
        """Only the visible transcript: never facts, commitments or trajectory nodes."""
        last = next((ex.player for ex in reversed(run.history) if ex.player is not None), None)
        return self._req(ROLE_PLAYER[self.setup.arch.player], self.setup.player_model, "v1",
                         player_turn_model(last), run, turn, player_role=run.spec.meta.player_role,
                         history=render_exchanges(run.history), last_input=last or "(none yet)")

    def narrator(self, run: EpisodeRun, turn: int, player_input: str | None) -> LLMRequest:
        history = run.memory.render() if run.memory is not None else render_exchanges(run.history)
        return self._req(ROLE_NARRATOR, self.setup.narrator_model, "v1", NarratorResponse, run, turn,
                         player_role=run.spec.meta.player_role, commitments=render_commitments(run, conditions=False),
                         facts=run.ledger.render_active(), history=history,
                         player_input=player_input if player_input is not None else OPENING_INPUT,
                         **_node_values(run.current_node))

    def memory_summary(self, run: EpisodeRun, turn: int, node: TrajectoryNode, exchanges: list[Exchange],
                       complete: bool) -> LLMRequest:
        return self._req(ROLE_MEMORY, self.setup.narrator_model, "v1", MemorySummary, run, turn,
                         node_id=node.id, node_description=node.description,
                         stage_state="completed" if complete else "in progress", turns=render_exchanges(exchanges))

    # auditor roles
    def fact_update(self, run: EpisodeRun, turn: int, player_input: str, narrator_text: str) -> LLMRequest:
        return self._aud(ROLE_FACT_UPDATE, FactDiff, run, turn, facts=run.ledger.render_active(),
                         player_input=player_input, narrator_text=narrator_text)

    def conflict_check(self, run: EpisodeRun, turn: int, player_input: str, narrator_text: str) -> LLMRequest:
        return self._aud(ROLE_CONFLICT_CHECK, ConflictReport, run, turn, completed_nodes=_completed(run),
                         commitments=render_commitments(run), facts=run.ledger.render_active(),
                         player_input=player_input, narrator_text=narrator_text, **_node_values(run.current_node))

    def conflict_confirm(self, run: EpisodeRun, turn: int, conflict: dict[str, Any], player_input: str,
                         narrator_text: str) -> LLMRequest:
        return self._aud(ROLE_CONFLICT_CONFIRM, ConfirmationVerdict, run, turn, n=self.setup.auditor.count,
                         kind=conflict["kind"], target_id=conflict["target_id"],
                         target_text=_target_text(run, conflict["target_id"], player_input),
                         reason=conflict["reason"], completed_nodes=_completed(run),
                         facts=run.ledger.render_active(), player_input=player_input, narrator_text=narrator_text,
                         **_node_values(run.current_node))

    def node_update(self, run: EpisodeRun, turn: int) -> LLMRequest:
        stage = [ex for ex in run.history if ex.turn >= run.stage_start]
        return self._aud(ROLE_NODE_UPDATE, NodeAssessment, run, turn, facts=run.ledger.render_active(),
                         stage_turns=render_exchanges(stage), **_node_values(run.current_node))

    def commitment_status(self, run: EpisodeRun, turn: int, pending: list[str], narrator_text: str) -> LLMRequest:
        node = run.current_node
        return self._aud(ROLE_COMMITMENT_STATUS, CommitmentStatusUpdate, run, turn, completed_nodes=_completed(run),
                         node_id=node.id if node else "(all complete)", commitments=render_commitments(run, pending),
                         facts=run.ledger.render_active(), narrator_text=narrator_text)


def _target_text(run: EpisodeRun, target_id: str, player_input: str) -> str:
    if target_id in run.ledger:
        return run.ledger.get(target_id).content
    for c in run.spec.commitments:
        if c.id == target_id:
            return f"{c.description} | violated when: {c.violation_condition}"
    if target_id == "player_input":
        return player_input
    return "(unknown id)"


# ---- the shared audit stages (3–6) -------------------------------------------------------------

@dataclass
class PendingTurn:
    """A turn whose player input and narrator response exist and must now be audited."""

    run: EpisodeRun
    turn: int
    player_input: str
    narrator_text: str
    row: dict[str, Any]


def _calls(row: dict[str, Any], *results: LLMResult) -> None:
    for r in results:
        row["llm_call_ids"].extend(r.call_ids)


def audit_turns(client: Any, prompter: Prompter, pending: list[PendingTurn]) -> None:
    """Run steps 3–6 for a batch of turns (one per episode), mutating each run and its row."""
    # 3 + 4: fact update and conflict check, both against the pre-turn state, in one batch.
    reqs: list[LLMRequest] = []
    for p in pending:
        reqs += [prompter.fact_update(p.run, p.turn, p.player_input, p.narrator_text),
                 prompter.conflict_check(p.run, p.turn, p.player_input, p.narrator_text)]
    results = client.complete_many(reqs)
    diffs: dict[int, FactDiff] = {}
    flagged: list[tuple[PendingTurn, list[dict[str, Any]]]] = []
    alive: list[PendingTurn] = []
    for i, p in enumerate(pending):
        diff_res, check_res = results[2 * i], results[2 * i + 1]
        _calls(p.row, diff_res, check_res)
        bad = next((r for r in (diff_res, check_res) if not r.ok), None)
        if bad is not None:
            p.run.fail(bad, p.turn, p.row)
            continue
        diffs[id(p)] = diff_res.output
        p.row["fact_diff_json"] = _dump({"proposed": diff_res.output.model_dump(), "applied": None,
                                         "discarded": False})
        report: ConflictReport = check_res.output
        conflicts = [dict(c.model_dump(), target_known=_target_text(p.run, c.target_id, "") != "(unknown id)",
                          confirmed=None, review_reason=None) for c in report.conflicts]
        p.row["conflict_report_json"] = _conflict_json(report.counts(), conflicts, double_checked=False)
        (flagged.append((p, conflicts)) if conflicts else alive.append(p))

    # 4b: confirmation pass, one request per candidate conflict.
    confirm_reqs = [prompter.conflict_confirm(p.run, p.turn, c, p.player_input, p.narrator_text)
                    for p, conflicts in flagged for c in conflicts]
    confirm_res = client.complete_many(confirm_reqs) if confirm_reqs else []
    k = 0
    for p, conflicts in flagged:
        res = confirm_res[k:k + len(conflicts)]
        k += len(conflicts)
        _calls(p.row, *res)
        bad = next((r for r in res if not r.ok), None)
        if bad is not None:
            p.run.fail(bad, p.turn, p.row)
            continue
        for c, r in zip(conflicts, res):
            votes = [v.confirmed for v in r.outputs]
            c["confirmed"] = sum(votes) * 2 > len(votes)
            c["review_reason"] = " / ".join(v.reason for v in r.outputs)
        counts = {kind: sum(c["kind"] == kind for c in conflicts) for kind in CONFLICT_KINDS}
        p.row["conflict_report_json"] = _conflict_json(counts, conflicts, double_checked=True)
        confirmed = [c for c in conflicts if c["confirmed"]]
        if confirmed:
            # CONFLICT: the turn's candidate fact updates are discarded, the ledger stays pre-turn.
            p.row["fact_diff_json"] = _dump({"proposed": diffs[id(p)].model_dump(), "applied": None,
                                             "discarded": True})
            p.row["ledger_snapshot_json"] = _dump(p.run.ledger.snapshot())
            p.row["node_after"] = p.row["node_before"]
            p.row["outcome"] = "CONFLICT"
            p.run.conflict_kinds = sorted({c["kind"] for c in confirmed})
            p.run.end("CONFLICT", p.turn)
        else:
            alive.append(p)

    # 5: apply the diff (negated facts stay, inactive), then assess the current node.
    for p in alive:
        applied = p.run.ledger.apply(diffs[id(p)], p.turn)
        p.row["fact_diff_json"] = _dump({"proposed": diffs[id(p)].model_dump(), "applied": applied.as_dict(),
                                         "discarded": False})
        p.run.history.append(Exchange(p.turn, p.player_input, p.narrator_text))
    with_node = [p for p in alive if p.run.current_node is not None]
    node_res = client.complete_many([prompter.node_update(p.run, p.turn) for p in with_node]) if with_node else []
    still: list[PendingTurn] = [p for p in alive if p.run.current_node is None]
    for p, r in zip(with_node, node_res):
        _calls(p.row, r)
        if not r.ok:
            p.run.fail(r, p.turn, p.row)
            continue
        a: NodeAssessment = r.output
        p.row["node_assessment_json"] = _dump({"node_id": p.run.current_node.id, **a.model_dump(),
                                               "advanced": a.advances})
        if a.advances:
            p.run.node_idx += 1
            p.run.stage_start = p.turn + 1
        still.append(p)

    # 5b: commitment statuses of the still-pending commitments.
    asks = [(p, [c for c, s in p.run.statuses.items() if s["status"] == "PENDING"]) for p in still]
    asks_nonempty = [(p, ids) for p, ids in asks if ids]
    status_res = client.complete_many([prompter.commitment_status(p.run, p.turn, ids, p.narrator_text)
                                       for p, ids in asks_nonempty]) if asks_nonempty else []
    by_id = {id(p): r for (p, _), r in zip(asks_nonempty, status_res)}
    for p, ids in asks:
        r = by_id.get(id(p))
        if r is not None:
            _calls(p.row, r)
            if not r.ok:
                p.run.fail(r, p.turn, p.row)
                continue
            updates = apply_status_update(p.run, r.output, ids, p.turn)
        else:
            updates = {"updates": [], "rejected": []}
        p.row["commitment_status_json"] = _dump({**updates, "statuses": p.run.statuses})
        p.row["ledger_snapshot_json"] = _dump(p.run.ledger.snapshot())
        p.row["node_after"] = p.run.current_node.id if p.run.current_node else None
        p.run.last_turn = p.turn
        if p.run.achievements_satisfied():
            p.row["outcome"] = "SUCCESS"
            p.run.end("SUCCESS", p.turn)


def _conflict_json(counts: dict[str, int], conflicts: list[dict[str, Any]], double_checked: bool) -> str:
    reasons = [c["review_reason"] for c in conflicts if c.get("review_reason")]
    return _dump({"counts": counts, "conflicts": conflicts, "double_checked": double_checked,
                  "review_reason": " | ".join(reasons) if reasons else None,
                  "confirmed_counts": {k: sum(bool(c.get("confirmed")) and c["kind"] == k for c in conflicts)
                                       for k in CONFLICT_KINDS}})


def apply_status_update(run: EpisodeRun, update: CommitmentStatusUpdate, asked: list[str], turn: int) -> dict[str, Any]:
    """Apply SATISFIED verdicts that cite at least one real, active fact or completed node.

    Satisfaction is monotone (a satisfied commitment stays satisfied). Verdicts for
    commitments that were not asked, or SATISFIED without valid evidence, are kept in
    `rejected` so the turn record shows what the auditor said and why it did not count.
    """
    completed = set(run.completed_nodes)
    applied, rejected = [], []
    for s in update.statuses:
        if s.commitment_id not in asked:
            rejected.append({**s.model_dump(), "reason": "not a pending commitment of this spec"})
            continue
        if s.status != "SATISFIED":
            applied.append(s.model_dump())
            continue
        valid = [e for e in s.evidence
                 if (e in run.ledger and run.ledger.get(e).active) or e in completed]
        if not valid:
            rejected.append({**s.model_dump(), "reason": "no cited id is an active fact or a completed node"})
            continue
        run.statuses[s.commitment_id] = {"status": "SATISFIED", "evidence": valid, "turn": turn}
        applied.append(s.model_dump())
    return {"updates": applied, "rejected": rejected}


# ---- the live loop -----------------------------------------------------------------------------

@dataclass
class EpisodeBatchResult:
    runs: list[EpisodeRun]
    generation_version: str

    def episode_rows(self) -> list[dict[str, Any]]:
        return [r.episode_row(self.generation_version) for r in self.runs]

    def turn_rows(self) -> list[dict[str, Any]]:
        return [row for r in self.runs for row in r.turn_rows]


ProgressFn = Callable[[int, int], None]


def run_episodes(client: Any, specs: list[NarrativeSpec], setup: EpisodeSetup,
                 progress: ProgressFn | None = None) -> EpisodeBatchResult:
    """Play one cell (narrator model × architecture) on `specs`, all episodes in lockstep."""
    prompter = Prompter(setup)
    memory = setup.arch.narrator == "memory"
    runs = [EpisodeRun.start(s, setup.narrator_model, setup.arch.key, setup.auditor.auditor_id,
                             HierarchicalMemory(setup.memory_chunk) if memory else None) for s in specs]

    # t = 0: the opening narration at the first node.
    rows = [new_turn_row(r, 0, None, None) for r in runs]
    for run, row, res in zip(runs, rows, client.complete_many([prompter.narrator(r, 0, None) for r in runs])):
        run.turn_rows.append(row)
        _calls(row, res)
        if not res.ok:
            run.fail(res, 0, row)
            continue
        row["narrator_text"] = res.output.text
        row["node_after"] = row["node_before"]
        row["ledger_snapshot_json"] = _dump(run.ledger.snapshot())
        opening = Exchange(0, None, res.output.text)
        run.history.append(opening)
        if run.memory is not None:
            run.memory.add(opening)

    for t in range(1, setup.t_max + 1):
        active = [r for r in runs if not r.done]
        if not active:
            break
        # 1. player
        rows = {id(r): new_turn_row(r, t, None, None) for r in active}
        for r in active:
            r.turn_rows.append(rows[id(r)])
        inputs: dict[int, str] = {}
        for r, res in zip(active, client.complete_many([prompter.player(r, t) for r in active])):
            _calls(rows[id(r)], res)
            if not res.ok:
                r.fail(res, t, rows[id(r)])
                continue
            inputs[id(r)] = rows[id(r)]["player_input"] = res.output.text
        # 2. narrator
        active = [r for r in active if not r.done]
        pending: list[PendingTurn] = []
        for r, res in zip(active, client.complete_many([prompter.narrator(r, t, inputs[id(r)]) for r in active])):
            _calls(rows[id(r)], res)
            if not res.ok:
                r.fail(res, t, rows[id(r)])
                continue
            rows[id(r)]["narrator_text"] = res.output.text
            pending.append(PendingTurn(r, t, inputs[id(r)], res.output.text, rows[id(r)]))
        # 3–6. audit
        audit_turns(client, prompter, pending)
        # memory variant: compress finished (or overlong) stages with the narrator's own model.
        _compress_memories(client, prompter, [p for p in pending if not p.run.done and p.run.memory is not None], t)
        for p in pending:
            if not p.run.done and t == setup.t_max:
                p.row["outcome"] = "SURVIVAL"
                p.run.end("SURVIVAL", t)
        if progress is not None:
            progress(t, setup.t_max)
    return EpisodeBatchResult(runs, setup.generation_version)


def _compress_memories(client: Any, prompter: Prompter, pending: list[PendingTurn], turn: int) -> None:
    todo = []
    for p in pending:
        mem = p.run.memory
        assert mem is not None
        mem.add(Exchange(p.turn, p.player_input, p.narrator_text))
        if turn == prompter.setup.t_max:
            continue  # the episode ends now: nothing left to narrate from memory
        advanced = p.row["node_before"] != p.row["node_after"]
        node = p.run.spec.node(p.row["node_before"]) if p.row["node_before"] else None
        if node is None:
            continue
        job = mem.pending(node.id, node.description, node_completed=advanced)
        if job is not None:
            todo.append((p, job))
    if not todo:
        return
    results = client.complete_many([prompter.memory_summary(p.run, p.turn, p.run.spec.node(job.node_id),
                                                            job.exchanges, job.complete) for p, job in todo])
    for (p, job), r in zip(todo, results):
        _calls(p.row, r)
        if not r.ok:
            p.run.fail(r, p.turn, p.row, last_completed=p.turn)
            continue
        seg = p.run.memory.commit(job, r.output.summary)  # type: ignore[union-attr]
        p.row["memory_json"] = _dump({"new_segment": seg.as_dict(), **p.run.memory.as_dict()})  # type: ignore[union-attr]


# ---- warehouse frames --------------------------------------------------------------------------

def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    import polars as pl

    episode = {"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "eval_order": pl.Int64, "auditor_id": pl.Utf8,
               "turns": pl.Int64, "termination": pl.Utf8, "conflict_kinds": pl.List(pl.Utf8),
               "nodes_completed": pl.Int64, "nodes_total": pl.Int64, "trajectory_progress": pl.Float64,
               "commitments_satisfied": pl.Int64, "commitments_total": pl.Int64,
               "commitments_satisfied_share": pl.Float64, "invalid_role": pl.Utf8, "invalid_message": pl.Utf8,
               "generation_version": pl.Utf8}
    turn = {"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "auditor_id": pl.Utf8, "turn": pl.Int64,
            "node_before": pl.Utf8, "node_after": pl.Utf8, "player_input": pl.Utf8, "narrator_text": pl.Utf8,
            "fact_diff_json": pl.Utf8, "conflict_report_json": pl.Utf8, "node_assessment_json": pl.Utf8,
            "commitment_status_json": pl.Utf8, "ledger_snapshot_json": pl.Utf8, "memory_json": pl.Utf8,
            "outcome": pl.Utf8, "invalid_role": pl.Utf8, "llm_call_ids": pl.List(pl.Utf8)}
    return episode, turn


def episode_frame(rows: list[dict[str, Any]]):
    """`ncp_episodes` / `ncp_reaudit_episodes` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[0])


def turn_frame(rows: list[dict[str, Any]]):
    """`ncp_turns` / `ncp_reaudit_turns` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[1])
