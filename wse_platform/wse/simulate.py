"""The WSE-bench step loop for one cell (model × architecture) over a batch of seeds.

Each trajectory of the cell advances on its own (`wse_platform.flow.each`): its
next request (Character Agents, World Model, Story Agent, World Memory of step t,
then step t+1) goes out as soon as its previous answer is back, whatever the other
seeds are doing; a B3 step's per-NPC requests go out together. A trajectory's
records depend only on its answers, so the rows do not depend on timing. On a
batch-only backend (offline vLLM) the flow falls back to one batch per phase.

Failure semantics (binding): a component whose output is still invalid after the
client's attempts ends the trajectory. CA / World Model / Story Agent failures
leave step t without narrative; a World Memory failure (invalid output or a
delta the reducer rejects) keeps N_t as canon and ends the trajectory after it.
Story endings are recorded apart from failures.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl

from wse_platform import flow
from wse_platform.config import Settings
from wse_platform.llm.limiter import expect
from wse_platform.llm.types import LLMRequest, LLMResult
from wse_platform.prompts import get_prompt
from wse_platform.wse import agents
from wse_platform.wse.architecture import (
    STORY_AGENT,
    WORLD_MEMORY_AGENT,
    WORLD_MODEL,
    Architecture,
    parse_architecture,
)
from wse_platform.wse.reducer import advance_day, initial_state, project_character_memory, try_apply_delta
from wse_platform.wse.schemas import PlotPlan, StepFailure, StepRecord, TrajectoryRecord, WorldState
from wse_platform.wse.world import EpisodeSeed

SIMULATION_CODE_VERSION = "wse-sim-1"


class CompletesMany(Protocol):
    def complete_many(self, requests: list[LLMRequest]) -> list[LLMResult]: ...


@dataclass
class _Draft:
    """A step under construction (mutable until the step's phases are done)."""

    step: int
    player_option: str
    player_option_index: int
    intents: list[dict[str, str]] | None = None
    plan: PlotPlan | None = None
    narrative: str | None = None
    options: list[str] | None = None
    new_day: bool | None = None
    story_end: bool | None = None
    end_kind: str | None = None
    memory_delta: dict[str, Any] | None = None
    memory_state: dict[str, Any] | None = None
    failure: StepFailure | None = None
    call_ids: list[str] = field(default_factory=list)

    def record(self) -> StepRecord:
        return StepRecord(
            step=self.step, player_option=self.player_option, player_option_index=self.player_option_index,
            intents=self.intents, plan=self.plan.model_dump(mode="json") if self.plan is not None else None,
            narrative=self.narrative, options=self.options, new_day=self.new_day, story_end=self.story_end,
            end_kind=self.end_kind, memory_delta=self.memory_delta, memory_state=self.memory_state,
            failure=self.failure, llm_call_ids=self.call_ids,
        )


@dataclass
class _Run:
    seed: EpisodeSeed
    state: WorldState                    # M_t under WMEM; otherwise M_0 with the day kept current
    options: list[str]
    history: list[agents.HistoryEntry] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    failure: StepFailure | None = None
    end_kind: str | None = None
    end_step: int | None = None
    day_advances: int = 0
    draft: _Draft | None = None

    @property
    def running(self) -> bool:
        return self.failure is None and self.end_kind is None

    @property
    def live(self) -> bool:
        """Still inside the current step's phases (no failure in this step so far)."""
        return self.draft is not None and self.draft.failure is None


def _failure(component: str, step: int, result: LLMResult | None = None, *, error_kind: str | None = None,
             message: str | None = None, raw_text: str | None = None, actor_id: str | None = None) -> StepFailure:
    f = result.failure if result is not None else None
    return StepFailure(
        component=component, step=step,
        error_kind=error_kind or (f.error_kind if f else "unknown"),
        message=message or (f.message if f else ""),
        raw_text=raw_text if raw_text is not None else (f.raw_text if f else None),
        attempts=(f.attempts if f else (result.attempts if result is not None else 0)),
        actor_id=actor_id,
    )


def generation_version(settings: Settings, model: str, arch: str, horizon: int, prompt_version: str = "v1") -> str:
    """Fingerprint of everything that determines a trajectory: code, prompts, model identity, horizon."""
    prompts = {r: get_prompt(r, prompt_version, settings.prompts_dir).sha for r in agents.GENERATION_ROLES}
    return settings.fingerprint(SIMULATION_CODE_VERSION, prompts, settings.model(model).identity(),
                                settings.wse.sampling.model_dump(), arch, horizon)


def simulate_cell(
    client: CompletesMany,
    settings: Settings,
    model: str,
    arch: str,
    seeds: list[EpisodeSeed],
    horizon: int | None = None,
    prompt_version: str = "v1",
    early: Any = None,
) -> list[TrajectoryRecord]:
    """Run every seed for `horizon` steps (default `settings.wse.horizon`) in one architecture.

    `early` (`wse_platform.wse.early.CellJudges`) hears of each narrated step and each trajectory's
    end, so the judges can start before the cell is done; it never changes the rows."""
    architecture = parse_architecture(arch)
    H = int(horizon if horizon is not None else (settings.wse.horizon or 0))
    if H < 1:
        raise ValueError(f"horizon must be >= 1 (wse.horizon = {settings.wse.horizon!r})")
    for s in seeds:
        if len(s.choice_schedule) < H:
            raise ValueError(f"seed {s.seed_id}: choice_schedule has {len(s.choice_schedule)} entries, "
                             f"horizon {H} needs {H}")
    ctx = agents.AgentContext(settings=settings, model=model, prompt_version=prompt_version,
                              extra_tags={"arch": architecture.key})
    runs = [_Run(seed=s, state=initial_state(s), options=list(s.initial_actions)) for s in seeds]
    # each trajectory asks its next request as soon as its previous answer is back (wse_platform.flow)
    flow.each(client, runs, lambda c, r: _advance(c, ctx, architecture, r, H, early), models=[model])

    version = generation_version(settings, model, architecture.key, H, prompt_version)
    return [_trajectory(r, model, architecture, H, version) for r in runs]


def _advance(client: CompletesMany, ctx: agents.AgentContext, architecture: Architecture, run: _Run,
             H: int, early: Any = None) -> None:
    """One trajectory, step by step; the phases below get this run alone."""
    try:
        _steps(client, ctx, architecture, run, H, early)
    finally:
        if early is not None:
            early.end(run.seed)


def _steps(client: CompletesMany, ctx: agents.AgentContext, architecture: Architecture, run: _Run,
           H: int, early: Any) -> None:
    for t in range(1, H + 1):
        if not run.running:
            break
        expect((H - t + 1) * _step_requests(architecture, run, early) + (early.richness_count if early else 0))
        active = [run]
        for r in active:
            idx = r.seed.choice_schedule[t - 1]
            r.draft = _Draft(step=t, player_option=r.options[idx], player_option_index=idx)
        if architecture.has_character_agents:
            _character_agent_phase(client, ctx, architecture, active, t)
        if architecture.wmod:
            _world_model_phase(client, ctx, architecture, [r for r in active if r.live], t)
        _story_phase(client, ctx, architecture, [r for r in active if r.live], t)
        if architecture.wmem:
            _memory_phase(client, ctx, [r for r in active if r.live and r.draft.narrative is not None
                                        and not r.draft.story_end], t)
        for r in active:
            d = r.draft
            _close_step(r, t)
            if early is not None and d.narrative is not None:
                early.step(r.seed, t, d.player_option, d.narrative, d.new_day)


def _step_requests(arch: Architecture, run: _Run, early: Any) -> int:
    """Requests per step of a trajectory (generation, and the consistency panel when judged early): the
    limiter's priority of a trajectory is its steps left x this (`wse_platform.llm.limiter.expect`)."""
    ca = (len(run.seed.npc_ids) if arch.distributed_ca else 1) if arch.has_character_agents else 0
    return ca + arch.wmod + 1 + arch.wmem + (early.consistency_count if early else 0)


# ---- phases -----------------------------------------------------------------------------
def _character_agent_phase(client: CompletesMany, ctx: agents.AgentContext, arch: Architecture,
                           runs: list[_Run], t: int) -> None:
    """B2: one request per run; B3: one isolated request per NPC. P_t is never passed."""
    requests: list[LLMRequest] = []
    owners: list[tuple[_Run, str | None]] = []
    for r in runs:
        views = [project_character_memory(r.state, npc) for npc in r.seed.npc_ids]
        if arch.centralized_ca:
            requests.append(agents.centralized_ca_request(ctx, r.seed, views, r.history, t))
            owners.append((r, None))
        else:
            for v in views:
                requests.append(agents.distributed_ca_request(ctx, r.seed, v, r.history, t))
                owners.append((r, v.actor_id))
    results = client.complete_many(requests)
    collected: dict[int, dict[str, str]] = {}
    for (r, actor), res in zip(owners, results, strict=True):
        d = r.draft
        d.call_ids.extend(res.call_ids)
        if not res.ok:
            if d.failure is None:
                d.failure = _failure(arch.ca_component, t, res, actor_id=actor)
            continue
        out = res.output
        got = collected.setdefault(id(r), {})
        if actor is None:
            got.update({i.character_id: i.intent for i in out.intents})
        else:
            got[actor] = out.intent
    for r in runs:
        if r.draft.failure is None:
            got = collected.get(id(r), {})
            r.draft.intents = [{"character_id": npc, "intent": got[npc]} for npc in r.seed.npc_ids]


def _world_model_phase(client: CompletesMany, ctx: agents.AgentContext, arch: Architecture,
                       runs: list[_Run], t: int) -> None:
    requests = [agents.world_model_request(ctx, r.seed, r.history, r.draft.player_option, r.draft.intents or [],
                                           r.state if arch.wmem else None, t) for r in runs]
    for r, res in zip(runs, client.complete_many(requests), strict=True):
        r.draft.call_ids.extend(res.call_ids)
        if res.ok:
            r.draft.plan = res.output
        else:
            r.draft.failure = _failure(WORLD_MODEL, t, res)


def _story_phase(client: CompletesMany, ctx: agents.AgentContext, arch: Architecture,
                 runs: list[_Run], t: int) -> None:
    """The Story Agent gets P_t plus the plan (WMOD) or else the raw intents (B2/B3)."""
    requests = [agents.story_agent_request(
        ctx, r.seed, r.history, r.draft.player_option,
        intents=None if arch.wmod else r.draft.intents, plan=r.draft.plan,
        state=r.state if arch.wmem else None, step=t) for r in runs]
    for r, res in zip(runs, client.complete_many(requests), strict=True):
        d = r.draft
        d.call_ids.extend(res.call_ids)
        if not res.ok:
            d.failure = _failure(STORY_AGENT, t, res)
            continue
        out = res.output
        d.narrative, d.options = out.narrative, list(out.options)
        d.new_day, d.story_end, d.end_kind = out.new_day, out.story_end, out.end_kind


def _memory_phase(client: CompletesMany, ctx: agents.AgentContext, runs: list[_Run], t: int) -> None:
    """World Memory Agent on N_t, then the atomic reducer. Any failure keeps N_t and ends the run."""
    requests = [agents.world_memory_request(ctx, r.seed, r.state, r.draft.narrative, t) for r in runs]
    for r, res in zip(runs, client.complete_many(requests), strict=True):
        d = r.draft
        d.call_ids.extend(res.call_ids)
        if not res.ok:
            d.failure = _failure(WORLD_MEMORY_AGENT, t, res)
            continue
        delta = res.output
        d.memory_delta = delta.model_dump(mode="json")
        new_state, rejection = try_apply_delta(r.state, delta)
        if rejection is not None:
            d.failure = _failure(WORLD_MEMORY_AGENT, t, res, error_kind="rejected_delta",
                                 message=f"reducer rejected the delta: {rejection}",
                                 raw_text=json.dumps(d.memory_delta, ensure_ascii=False))
            continue
        r.state = new_state


def _close_step(r: _Run, t: int) -> None:
    d = r.draft
    if d.narrative is not None:
        if d.new_day:
            r.state = advance_day(r.state)
            r.day_advances += 1
        r.history.append(agents.HistoryEntry(step=t, day=r.state.day, player_action=d.player_option,
                                             narrative=d.narrative))
        r.options = d.options
        if d.memory_delta is not None and d.failure is None:
            d.memory_state = r.state.model_dump(mode="json")
        if d.story_end and d.failure is None:
            r.end_kind, r.end_step = d.end_kind, t
    if d.failure is not None:
        r.failure = d.failure
    r.steps.append(d.record())
    r.draft = None


def _trajectory(r: _Run, model: str, arch: Architecture, horizon: int, version: str) -> TrajectoryRecord:
    f = r.failure
    lost = horizon - f.step if f is not None and f.component == WORLD_MEMORY_AGENT else 0
    return TrajectoryRecord(
        model=model, arch=arch.key, seed_id=r.seed.seed_id, world_id=r.seed.world_id,
        source_family=r.seed.source_family, horizon=horizon, steps=r.steps,
        failure_component=f.component if f else None, failure_step=f.step if f else None,
        end_kind=r.end_kind, end_step=r.end_step, day_advances=r.day_advances, lost_steps_wmem=lost,
        generation_version=version,
    )


# ---- warehouse rows ---------------------------------------------------------------------
def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=False)




def step_rows(records: list[TrajectoryRecord]) -> pl.DataFrame:
    """`wse_trajectory_steps` rows (one per attempted step; a failed step has narrative NULL)."""
    rows = []
    for tr in records:
        for s in tr.steps:
            rows.append({
                "model": tr.model, "arch": tr.arch, "seed_id": tr.seed_id, "world_id": tr.world_id,
                "source_family": tr.source_family, "step": s.step, "player_option": s.player_option,
                "player_option_index": s.player_option_index, "intents_json": _json(s.intents),
                "plan_json": _json(s.plan), "narrative": s.narrative, "options_json": _json(s.options),
                "new_day": s.new_day, "story_end": s.story_end, "end_kind": s.end_kind,
                "memory_delta_json": _json(s.memory_delta), "memory_state_json": _json(s.memory_state),
                "failure_component": s.failure.component if s.failure else None,
                "failure_json": s.failure.model_dump_json() if s.failure else None,
                "llm_call_ids": list(s.llm_call_ids), "generation_version": tr.generation_version,
            })
    schema = {
        "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "world_id": pl.Utf8, "source_family": pl.Utf8,
        "step": pl.Int32, "player_option": pl.Utf8, "player_option_index": pl.Int32, "intents_json": pl.Utf8,
        "plan_json": pl.Utf8, "narrative": pl.Utf8, "options_json": pl.Utf8, "new_day": pl.Boolean,
        "story_end": pl.Boolean, "end_kind": pl.Utf8, "memory_delta_json": pl.Utf8, "memory_state_json": pl.Utf8,
        "failure_component": pl.Utf8, "failure_json": pl.Utf8, "llm_call_ids": pl.List(pl.Utf8),
        "generation_version": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema)


def trajectory_rows(records: list[TrajectoryRecord]) -> pl.DataFrame:
    """`wse_trajectories` rows (one per trajectory; length = L_i)."""
    rows = [{
        "model": tr.model, "arch": tr.arch, "seed_id": tr.seed_id, "world_id": tr.world_id,
        "source_family": tr.source_family, "horizon": tr.horizon, "length": tr.length,
        "failure_component": tr.failure_component, "failure_step": tr.failure_step, "end_kind": tr.end_kind,
        "end_step": tr.end_step, "day_advances": tr.day_advances, "lost_steps_wmem": tr.lost_steps_wmem,
        "generation_version": tr.generation_version,
    } for tr in records]
    schema = {
        "model": pl.Utf8, "arch": pl.Utf8, "seed_id": pl.Utf8, "world_id": pl.Utf8, "source_family": pl.Utf8,
        "horizon": pl.Int32, "length": pl.Int32, "failure_component": pl.Utf8, "failure_step": pl.Int32,
        "end_kind": pl.Utf8, "end_step": pl.Int32, "day_advances": pl.Int32, "lost_steps_wmem": pl.Int32,
        "generation_version": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema)
