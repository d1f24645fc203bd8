"""NCP-Bench episodes: narrator vs player, audited turn by turn (the paper's Algorithm 1).

Turn 0 is the opening narration (its own prompt, starting at the first trajectory node); the
facts it establishes are extracted by the auditor and applied together with turn 1, so the
turn-1 audit sees them as pre-turn facts. Then for t = 1..T_max: player input (sees only the
visible transcript; plain text) → narrator response → the audit of `audit.py` (fact update →
conflict check given ΔF_t → [double-check] → node update → commitment status) → SUCCESS when
every achievement commitment is satisfied; SURVIVAL at T_max. A call that still fails after the
client's retries (transport error or invalid output) leaves the episode with no result, as in
the reference (whose runner stops without writing the episode's result file): it is not an
episode row (never in a denominator), it is listed in `ncp_failed_episodes` with the role and
the reason, and the next run of the cell plays it again. A transport failure (after the
client's retries) ends only its own episode so (`failures.each_episode`), unless every episode
that reached the server failed on transport: then the server is down and the run fails.

Each episode of a cell runs on its own (`wse_platform.flow.each`): its next request goes out as
soon as its previous answer is back, whatever the other episodes are doing.
The `memory` narrator is HiAgent (`hiagent.py`, `memory.py`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wse_platform.llm.limiter import expect
from wse_platform.ncp import hiagent
from wse_platform.ncp.audit import PendingTurn, add_calls, audit_openings, audit_turns, dump
from wse_platform.ncp.failures import each_episode
from wse_platform.ncp.memory import HiAgentMemory
from wse_platform.ncp.prompter import Prompter
from wse_platform.ncp.render import Exchange
from wse_platform.ncp.roles import (AUDITOR_ROLES, ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK,  # noqa: F401
                                    ROLE_CONFLICT_CONFIRM, ROLE_DOUBLE_CHECK, ROLE_FACT_UPDATE, ROLE_HIAGENT,
                                    ROLE_MEMORY, ROLE_NARRATOR, ROLE_NODE_UPDATE, ROLE_OPENING, ROLE_PLAYER)
from wse_platform.ncp.schemas import PlayerTurn
from wse_platform.ncp.spec import NarrativeSpec
from wse_platform.ncp.state import (AUDITOR_ID_ROLE, LOOP_VERSION, Architecture, AuditorSetup,  # noqa: F401
                                    EpisodeRun, EpisodeSetup, Termination, new_turn_row, set_text)

# ---- the live loop -----------------------------------------------------------------------------

TURN_REQUESTS = 6   # player, narrator, fact update, conflict check, node update, commitment status

@dataclass
class EpisodeBatchResult:
    runs: list[EpisodeRun]
    generation_version: str

    def episode_rows(self) -> list[dict[str, Any]]:
        """Episodes with a result (a FAILED episode has none and is in no denominator)."""
        return [r.episode_row(self.generation_version) for r in self.runs if not r.failed]

    def turn_rows(self) -> list[dict[str, Any]]:
        return [row for r in self.runs if not r.failed for row in r.turn_rows]

    def failed_rows(self) -> list[dict[str, Any]]:
        """`ncp_failed_episodes`: one row per episode without a result, with the failing role and reason."""
        return [r.failure_row(self.generation_version) for r in self.runs if r.failed]


ProgressFn = Callable[[int, int], None]


def run_episodes(client: Any, specs: list[NarrativeSpec], setup: EpisodeSetup,
                 progress: ProgressFn | None = None,
                 on_episode: Callable[[list[EpisodeRun]], None] | None = None) -> EpisodeBatchResult:
    """Play one cell (narrator model × architecture) on `specs`, each episode on its own
    (`wse_platform.flow`): an episode's next request goes out as soon as its previous answer is back.
    An episode whose transport fails has no result (`failures.each_episode`); the run fails when every
    episode that reached the server failed so. `on_episode(runs)` is called with each episode's runs as
    soon as it has ended (in its thread; `ncp/kept.py` replays it for the re-audit there)."""
    models = [setup.narrator_model, setup.player_model, setup.auditor.model]
    if setup.arch.narrator == "memory" and setup.method is None:   # HiAgent counts tokens from turn 1 on
        from wse_platform.ncp import tokens
        tokens.warm(Prompter(setup).hiagent_texts().tokenizer_model)
    def play(c: Any, spec: NarrativeSpec) -> list[EpisodeRun]:
        runs = _play(c, [spec], setup).runs
        if on_episode is not None:
            on_episode(runs)
        return runs

    runs = each_episode(client, list(specs), play,
                        lambda spec: EpisodeRun.start(spec, setup.narrator_model, setup.arch.key,
                                                      setup.auditor.auditor_id),
                        models=models, on_done=(lambda n, total: progress(n, total)) if progress is not None else None)
    return EpisodeBatchResult(runs, setup.generation_version)


def _play(client: Any, specs: list[NarrativeSpec], setup: EpisodeSetup,
          progress: ProgressFn | None = None) -> EpisodeBatchResult:
    """Play `specs` in lockstep (each stage of a turn one `complete_many` over the active episodes)."""
    prompter = Prompter(setup)
    memory = setup.arch.narrator == "memory"
    runs = [EpisodeRun.start(s, setup.narrator_model, setup.arch.key, setup.auditor.auditor_id,
                             HiAgentMemory() if memory else None) for s in specs]
    methods = None
    if setup.method is not None:  # a plug-in narrator method (ncp.narrator_methods)
        from wse_platform.ncp.methods import MethodNarrators, load_method
        methods = MethodNarrators(client, setup, load_method(setup.arch.narrator, setup.method))
    try:
        _turns(client, prompter, runs, setup, methods, progress)
    finally:  # a method's episodes are closed also when a call raises (as the reference runner does)
        if methods is not None:
            methods.close()
    return EpisodeBatchResult(runs, setup.generation_version)


def _turns(client: Any, prompter: Prompter, runs: list[EpisodeRun], setup: EpisodeSetup, methods: Any,
           progress: ProgressFn | None) -> None:
    # the limiter's priority: the server requests this episode expects (opening, 6 per turn; HiAgent one more:
    # the summary of the subgoal it finished, its other summaries come from the cache: hiagent.py), set again
    # at every turn so that a turn's requests outside the count (a double check, a retrieve) do not add up
    per_turn = TURN_REQUESTS + any(r.memory is not None for r in runs)
    expect(2 + per_turn * setup.t_max)
    # t = 0: the opening narration at the first node, then the facts it establishes.
    rows = [new_turn_row(r, 0, None, None) for r in runs]
    if methods is not None:
        for run, row in zip(runs, rows):
            run.turn_rows.append(row)
            text = methods.open(run, row)
            if text is not None:
                _opening_done(run, row, text)
    else:
        for run, row, res in zip(runs, rows, client.complete_many([prompter.opening(r) for r in runs])):
            run.turn_rows.append(row)
            add_calls(row, res)
            if not res.ok:
                run.fail(res, 0, row)
                continue
            _opening_done(run, row, res.output.text)
    audit_openings(client, prompter, list(zip(runs, rows)))

    for t in range(1, setup.t_max + 1):
        active = [r for r in runs if not r.done]
        if not active:
            break
        expect(per_turn * (setup.t_max - t + 1))
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
        texts = narrate(client, prompter, active, t, inputs, rows, methods)
        pending = [PendingTurn(r, t, inputs[id(r)], texts[id(r)], rows[id(r)]) for r in active if id(r) in texts]
        # 3–7. audit
        audit_turns(client, prompter, pending)
        survivors = [p for p in pending if not p.run.done]
        for p in survivors:
            if not p.run.done and t == setup.t_max:
                p.row["outcome"] = "SURVIVAL"
                p.run.end("SURVIVAL", t)
        if progress is not None:
            progress(t, setup.t_max)


def _opening_done(run: EpisodeRun, row: dict[str, Any], text: str) -> None:
    set_text(row, "narrator_text", text)
    row["node_after"] = row["node_before"]
    row["ledger_snapshot_json"] = dump(run.ledger.snapshot())
    run.history.append(Exchange(0, None, text))


def narrate(client: Any, prompter: Prompter, runs: list[EpisodeRun], turn: int, inputs: dict[int, str],
            rows: dict[int, dict[str, Any]], methods: Any = None) -> dict[int, str]:
    """The narrator step for a batch: one call for the baseline narrator; for HiAgent its control
    step with its memory (`hiagent.py`);
    a plug-in method answers each episode in turn through its own `complete` calls."""
    out: dict[int, str] = {}
    if methods is not None:
        for r in runs:
            text = methods.respond(r, turn, inputs[id(r)], rows[id(r)])
            if text is not None:
                out[id(r)] = text
                set_text(rows[id(r)], "narrator_text", text)
        return out
    base = [r for r in runs if r.memory is None]
    for r, res in zip(base, client.complete_many([prompter.narrator(r, turn, inputs[id(r)]) for r in base])
                      if base else []):
        add_calls(rows[id(r)], res)
        if not res.ok:
            r.fail(res, turn, rows[id(r)])
            continue
        out[id(r)] = res.output.text
        set_text(rows[id(r)], "narrator_text", res.output.text)
    memory = [r for r in runs if r.memory is not None]  # HiAgent (hiagent.py)
    if memory:
        out.update(hiagent.narrate(client, prompter, memory, turn, inputs, rows))
    return out


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
            "llm_call_ids": pl.List(pl.Utf8), "session": pl.Utf8}
    return episode, turn


def failed_frame(rows: list[dict[str, Any]]):
    """`ncp_failed_episodes` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "arch": pl.Utf8, "spec_id": pl.Utf8, "eval_order": pl.Int64,
                                      "auditor_id": pl.Utf8, "turn": pl.Int64, "role": pl.Utf8,
                                      "error_kind": pl.Utf8, "message": pl.Utf8, "generation_version": pl.Utf8})


def episode_frame(rows: list[dict[str, Any]]):
    """`ncp_episodes` / `ncp_reaudit_episodes` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[0])


def turn_frame(rows: list[dict[str, Any]]):
    """`ncp_turns` / `ncp_reaudit_turns` rows as a typed polars frame (also when empty)."""
    import polars as pl
    return pl.DataFrame(rows, schema=_schemas()[1])
