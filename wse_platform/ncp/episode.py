"""NCP-Bench episodes: narrator vs player, audited turn by turn (the paper's Algorithm 1).

Turn 0 is the opening narration (its own prompt, starting at the first trajectory node); the
facts it establishes are extracted by the auditor and applied together with turn 1, so the
turn-1 audit sees them as pre-turn facts. Then for t = 1..T_max: player input (sees only the
visible transcript; plain text) → narrator response → the audit of `audit.py` (fact update →
conflict check given ΔF_t → [double-check] → node update → commitment status) → SUCCESS when
every achievement commitment is satisfied; SURVIVAL at T_max; an output still invalid after
the client's retries ends the run as INVALID (the role is recorded; never a conflict).

Each episode of a cell runs on its own (`wse_platform.flow.each`): its next request goes out as
soon as its previous answer is back, whatever the other episodes are doing.
The `memory` narrator is HiAgent (`memory.py`).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from wse_platform import flow
from wse_platform.llm.types import LLMResult, Sampling
from wse_platform.ncp.audit import PendingTurn, add_calls, audit_openings, audit_turns, dump
from wse_platform.ncp.ledger import FactLedger
from wse_platform.ncp.memory import MAX_RETRIEVE_DEPTH, HiAgentMemory
from wse_platform.ncp.prompter import (AUDITOR_ROLES, ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK,  # noqa: F401
                                       ROLE_CONFLICT_CONFIRM, ROLE_DOUBLE_CHECK, ROLE_FACT_UPDATE, ROLE_HIAGENT,
                                       ROLE_MEMORY, ROLE_NARRATOR, ROLE_NODE_UPDATE, ROLE_OPENING, ROLE_PLAYER,
                                       Prompter)
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.schemas import (NARRATOR_MAX_WORDS, PLAYER_MAX_WORDS, FactDiff, PlayerTurn, word_count)
from wse_platform.ncp.spec import NarrativeSpec, TrajectoryNode

# Bump when the loop's semantics change (part of every episode row's generation_version).
LOOP_VERSION = "ncp-loop-2"
AUDITOR_ID_ROLE = "ncp.auditor"  # JudgeConfig.judge_id(role) of an auditor configuration

Termination = Literal["CONFLICT", "SUCCESS", "SURVIVAL", "INVALID", "CENSORED"]


# ---- configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """`<narrator>+<player>`: narrator `baseline` (full history), `memory` (HiAgent) or `human`;
    player mode `adversarial` / `natural`. `human-player` is a human typing the player's turns."""

    key: str
    narrator: Literal["baseline", "memory", "human"]
    player: Literal["adversarial", "natural", "human"]

    @classmethod
    def parse(cls, key: str) -> "Architecture":
        if key == "human-player":
            return cls(key, "baseline", "human")
        narrator, sep, player = key.partition("+")
        if not sep or narrator not in ("baseline", "memory", "human") or player not in ROLE_PLAYER:
            raise ValueError(f"unknown NCP architecture {key!r}: expected '<baseline|memory|human>+"
                             "<adversarial|natural>' or 'human-player'")
        return cls(key, narrator, player)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AuditorSetup:
    model: str
    prompt_version: str = "v1"
    count: int = 1  # independent reviews of a flagged report; a strict majority keeps a conflict

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
    generation_version: str = LOOP_VERSION

    @classmethod
    def from_settings(cls, settings: Any, narrator_model: str, arch: str,
                      generation_version: str | None = None, auditor: Any = None) -> "EpisodeSetup":
        ncp = settings.ncp
        auditor = auditor if auditor is not None else ncp.auditor
        missing = [k for k, v in (("ncp.player_model", ncp.player_model), ("ncp.auditor", auditor),
                                  ("ncp.t_max", ncp.t_max)) if v is None]
        if missing:
            raise ValueError(f"NCP episodes need {', '.join(missing)} in the configuration")
        return cls(narrator_model=narrator_model, arch=Architecture.parse(arch), player_model=ncp.player_model,
                   auditor=AuditorSetup.from_judge(auditor), t_max=int(ncp.t_max), sampling=ncp.sampling,
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
    history: list[Exchange] = field(default_factory=list)
    pending: FactDiff | None = None       # opening updates, applied together with turn 1
    memory: HiAgentMemory | None = None
    turn_rows: list[dict[str, Any]] = field(default_factory=list)
    termination: str | None = None
    last_turn: int = 0                    # last completed turn
    conflict_kinds: list[str] = field(default_factory=list)
    invalid_role: str | None = None
    invalid_message: str | None = None

    @classmethod
    def start(cls, spec: NarrativeSpec, model: str, arch: str, auditor_id: str,
              memory: HiAgentMemory | None = None) -> "EpisodeRun":
        statuses = {c.id: {"status": "PENDING", "reason": None, "turn": None} for c in spec.commitments}
        return cls(spec, model, arch, auditor_id, FactLedger.from_initial(spec.initial_facts), statuses,
                   memory=memory)

    @property
    def done(self) -> bool:
        return self.termination is not None

    @property
    def current_node(self) -> TrajectoryNode | None:
        return self.spec.trajectory[self.node_idx] if self.node_idx < len(self.spec.trajectory) else None

    def achievements_satisfied(self) -> bool:
        ach = [c.id for c in self.spec.commitments if c.type == "achievement"]
        return bool(ach) and all(self.statuses[c]["status"] == "SATISFIED" for c in ach)

    def end(self, termination: str, turn: int) -> None:
        self.termination = termination
        self.last_turn = turn

    def fail(self, result: LLMResult, turn: int, row: dict[str, Any] | None,
             last_completed: int | None = None) -> None:
        """INVALID: a call stayed invalid after retries."""
        assert result.failure is not None
        self.fail_with(result.failure.role, f"{result.failure.error_kind}: {result.failure.message}", turn, row,
                       last_completed)

    def fail_with(self, role: str, message: str, turn: int, row: dict[str, Any] | None,
                  last_completed: int | None = None) -> None:
        """INVALID, censored at the last completed turn (turn - 1 unless said otherwise)."""
        self.invalid_role = role
        self.invalid_message = message
        if row is not None:
            row["outcome"] = "INVALID"
            row["invalid_role"] = role
        self.end("INVALID", last_completed if last_completed is not None else max(turn - 1, 0))

    def word_stats(self) -> dict[str, Any]:
        narr = [r["narrator_words"] for r in self.turn_rows if r.get("narrator_text")]
        play = [r["player_words"] for r in self.turn_rows if r.get("player_input")]
        return {"narrator_responses": len(narr), "narrator_words_mean": sum(narr) / len(narr) if narr else None,
                "narrator_over_limit": sum(w > NARRATOR_MAX_WORDS for w in narr),
                "player_inputs": len(play), "player_words_mean": sum(play) / len(play) if play else None,
                "player_over_limit": sum(w > PLAYER_MAX_WORDS for w in play)}

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
            **self.word_stats(), "generation_version": generation_version,
        }


def new_turn_row(run: EpisodeRun, turn: int, player_input: str | None, narrator_text: str | None) -> dict[str, Any]:
    return {
        "model": run.model, "arch": run.arch, "spec_id": run.spec.spec_id, "auditor_id": run.auditor_id,
        "turn": turn, "node_before": run.current_node.id if run.current_node else None, "node_after": None,
        "player_input": player_input, "narrator_text": narrator_text, "fact_diff_json": None,
        "conflict_report_json": None, "node_assessment_json": None, "commitment_status_json": None,
        "ledger_snapshot_json": None, "memory_json": None, "outcome": None, "invalid_role": None,
        "player_words": word_count(player_input) if player_input else None,
        "narrator_words": word_count(narrator_text) if narrator_text else None, "llm_call_ids": [],
    }


def set_text(row: dict[str, Any], column: str, text: str) -> None:
    row[column] = text
    row["narrator_words" if column == "narrator_text" else "player_words"] = word_count(text)


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
    """Play one cell (narrator model × architecture) on `specs`, each episode on its own
    (`wse_platform.flow`): an episode's next request goes out as soon as its previous answer is back."""
    models = [setup.narrator_model, setup.player_model, setup.auditor.model]
    parts = flow.each(client, list(specs), lambda c, spec: _play(c, [spec], setup), models=models,
                      on_done=(lambda n, total: progress(n, total)) if progress is not None else None)
    return EpisodeBatchResult([r for p in parts for r in p.runs], setup.generation_version)


def _play(client: Any, specs: list[NarrativeSpec], setup: EpisodeSetup,
          progress: ProgressFn | None = None) -> EpisodeBatchResult:
    """Play `specs` in lockstep (each stage of a turn one `complete_many` over the active episodes)."""
    prompter = Prompter(setup)
    memory = setup.arch.narrator == "memory"
    runs = [EpisodeRun.start(s, setup.narrator_model, setup.arch.key, setup.auditor.auditor_id,
                             HiAgentMemory() if memory else None) for s in specs]

    # t = 0: the opening narration at the first node, then the facts it establishes.
    rows = [new_turn_row(r, 0, None, None) for r in runs]
    for run, row, res in zip(runs, rows, client.complete_many([prompter.opening(r) for r in runs])):
        run.turn_rows.append(row)
        add_calls(row, res)
        if not res.ok:
            run.fail(res, 0, row)
            continue
        set_text(row, "narrator_text", res.output.text)
        row["node_after"] = row["node_before"]
        row["ledger_snapshot_json"] = dump(run.ledger.snapshot())
        run.history.append(Exchange(0, None, res.output.text))
        if run.memory is not None:
            run.memory.record(run.history[-1])
    audit_openings(client, prompter, list(zip(runs, rows)))

    for t in range(1, setup.t_max + 1):
        active = [r for r in runs if not r.done]
        if not active:
            break
        rows = {id(r): new_turn_row(r, t, None, None) for r in active}
        for r in active:
            r.turn_rows.append(rows[id(r)])
        # 1. player (plain text)
        inputs: dict[int, str] = {}
        for r, res in zip(active, client.complete_many([prompter.player(r, t) for r in active])):
            add_calls(rows[id(r)], res)
            if not res.ok:
                r.fail(res, t, rows[id(r)])
                continue
            text = PlayerTurn(text=res.output).text if str(res.output).strip() else ""
            if not text:
                r.fail_with(res.role, "empty_output: empty player input", t, rows[id(r)])
                continue
            inputs[id(r)] = text
            set_text(rows[id(r)], "player_input", text)
        # 2. narrator
        active = [r for r in active if not r.done]
        texts = narrate(client, prompter, active, t, inputs, rows)
        pending = [PendingTurn(r, t, inputs[id(r)], texts[id(r)], rows[id(r)]) for r in active if id(r) in texts]
        # 3–7. audit
        audit_turns(client, prompter, pending)
        survivors = [p for p in pending if not p.run.done]
        for p in survivors:
            if p.run.memory is not None:
                p.run.memory.record(p.run.history[-1])
        summarise_subgoals(client, prompter, survivors)
        for p in survivors:
            if not p.run.done and t == setup.t_max:
                p.row["outcome"] = "SURVIVAL"
                p.run.end("SURVIVAL", t)
        if progress is not None:
            progress(t, setup.t_max)
    return EpisodeBatchResult(runs, setup.generation_version)


def narrate(client: Any, prompter: Prompter, runs: list[EpisodeRun], turn: int, inputs: dict[int, str],
            rows: dict[int, dict[str, Any]]) -> dict[int, str]:
    """The narrator step for a batch: one call for the baseline narrator; for HiAgent a control
    step (new subgoal? narration or retrieve?), re-asked after a retrieve up to a bounded depth."""
    out: dict[int, str] = {}
    base = [r for r in runs if r.memory is None]
    for r, res in zip(base, client.complete_many([prompter.narrator(r, turn, inputs[id(r)]) for r in base])
                      if base else []):
        add_calls(rows[id(r)], res)
        if not res.ok:
            r.fail(res, turn, rows[id(r)])
            continue
        out[id(r)] = res.output.text
        set_text(rows[id(r)], "narrator_text", res.output.text)
    todo = [r for r in runs if r.memory is not None]
    steps: dict[int, list[dict[str, Any]]] = {id(r): [] for r in todo}
    for depth in range(MAX_RETRIEVE_DEPTH + 1):
        if not todo:
            break
        results = client.complete_many([prompter.hiagent(r, turn, inputs[id(r)]) for r in todo])
        again = []
        for r, res in zip(todo, results):
            row = rows[id(r)]
            add_calls(row, res)
            if not res.ok:
                r.fail(res, turn, row)
                continue
            step = res.output
            steps[id(r)].append(step.model_dump())
            if step.subgoal is not None:
                r.memory.propose(step.subgoal, turn)
            if step.text is not None:
                out[id(r)] = step.text.strip()
                set_text(row, "narrator_text", out[id(r)])
            else:
                unknown = r.memory.retrieve(step.retrieve)
                if unknown or depth == MAX_RETRIEVE_DEPTH:
                    why = f"no finished subgoal {unknown}" if unknown else "retrieve depth exceeded"
                    r.fail_with(ROLE_HIAGENT, f"invalid_retrieve: {why}", turn, row)
                else:
                    again.append(r)
            row["memory_json"] = dump({"steps": steps[id(r)], **r.memory.as_dict()})
        todo = again
    return out


def summarise_subgoals(client: Any, prompter: Prompter, survivors: list[PendingTurn]) -> None:
    """HiAgent: summarise each finished subgoal once, with the narrator's own model."""
    jobs = [(p, s) for p in survivors if p.run.memory is not None for s in p.run.memory.unsummarised()]
    if not jobs:
        return
    results = client.complete_many([prompter.subgoal_summary(p.run, p.turn, s) for p, s in jobs])
    for (p, s), r in zip(jobs, results):
        add_calls(p.row, r)
        if p.run.done:
            continue
        if not r.ok:
            p.run.fail(r, p.turn, p.row, last_completed=p.turn)
            continue
        s.summary = r.output.summary
        before = json.loads(p.row["memory_json"]) if p.row["memory_json"] else {}
        done = before.get("summarised", []) + [s.number]
        p.row["memory_json"] = dump({**before, "summarised": done, **p.run.memory.as_dict()})


# ---- warehouse frames --------------------------------------------------------------------------

def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    import polars as pl

    episode = {"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "eval_order": pl.Int64, "auditor_id": pl.Utf8,
               "turns": pl.Int64, "termination": pl.Utf8, "conflict_kinds": pl.List(pl.Utf8),
               "nodes_completed": pl.Int64, "nodes_total": pl.Int64, "trajectory_progress": pl.Float64,
               "commitments_satisfied": pl.Int64, "commitments_total": pl.Int64,
               "commitments_satisfied_share": pl.Float64, "invalid_role": pl.Utf8, "invalid_message": pl.Utf8,
               "narrator_responses": pl.Int64, "narrator_words_mean": pl.Float64, "narrator_over_limit": pl.Int64,
               "player_inputs": pl.Int64, "player_words_mean": pl.Float64, "player_over_limit": pl.Int64,
               "generation_version": pl.Utf8}
    turn = {"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "auditor_id": pl.Utf8, "turn": pl.Int64,
            "node_before": pl.Utf8, "node_after": pl.Utf8, "player_input": pl.Utf8, "narrator_text": pl.Utf8,
            "fact_diff_json": pl.Utf8, "conflict_report_json": pl.Utf8, "node_assessment_json": pl.Utf8,
            "commitment_status_json": pl.Utf8, "ledger_snapshot_json": pl.Utf8, "memory_json": pl.Utf8,
            "outcome": pl.Utf8, "invalid_role": pl.Utf8, "player_words": pl.Int64, "narrator_words": pl.Int64,
            "llm_call_ids": pl.List(pl.Utf8)}
    return episode, turn


def episode_frame(rows: list[dict[str, Any]]):
    """`ncp_episodes` / `ncp_reaudit_episodes` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[0])


def turn_frame(rows: list[dict[str, Any]]):
    """`ncp_turns` / `ncp_reaudit_turns` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[1])
