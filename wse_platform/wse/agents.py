"""Request builders for the WSE-bench generation roles (Character Agents, World Model,
Story Agent, World Memory Agent).

Each builder decides *what a role may see* — that is the experimental
manipulation — and renders it through the role's versioned prompt file. In
particular the Character Agents never receive the current player action P_t, and
the Story Agent receives the PlotPlan instead of raw intents when WMOD is on.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from wse_platform.config import Settings
from wse_platform.llm.types import LLMRequest, Sampling
from wse_platform.prompts import get_prompt
from wse_platform.wse.schemas import (
    PLAYER_INTENT_ID,
    CharacterMemory,
    DistributedIntent,
    MemoryDelta,
    PlotPlan,
    StoryAgentOutput,
    WorldState,
    centralized_intents_model,
    plot_plan_model,
)
from wse_platform.wse.world import EpisodeSeed

ROLE_CA_CENTRALIZED = "wse.character_agent_centralized"
ROLE_CA_DISTRIBUTED = "wse.character_agent_distributed"
ROLE_WORLD_MODEL = "wse.world_model"
ROLE_STORY = "wse.story_agent"
ROLE_WORLD_MEMORY = "wse.world_memory_agent"
GENERATION_ROLES = (ROLE_CA_CENTRALIZED, ROLE_CA_DISTRIBUTED, ROLE_WORLD_MODEL, ROLE_STORY, ROLE_WORLD_MEMORY)

# Per-role output budgets (max_tokens) come from `wse.budgets` (defaults sized for paper-scale
# outputs, `wse_platform.config.WSE_ROLE_BUDGETS`); they are explicit, so a model's own
# `sampling.max_tokens` does not change them; `wse.sampling.max_tokens` overrides every role. An
# answer cut by the budget is recorded by the LLM client as a failure of kind `truncated`.


LANGUAGE_NAMES = {"en": "English", "nb": "Norwegian (Dano-Norwegian)", "no": "Norwegian", "da": "Danish",
                  "ru": "Russian", "sv": "Swedish", "zh": "Chinese", "de": "German", "fr": "French"}

NO_MEMORY = "(none: this condition keeps no structured memory; rely on the story so far)"


def language_name(code: str) -> str:
    return f"{LANGUAGE_NAMES.get(code.split('-')[0], code)} [{code}]"


@dataclass(frozen=True)
class HistoryEntry:
    """What later steps may know of step k: the selected player action, the canon narrative, the day."""

    step: int
    day: int
    player_action: str
    narrative: str


@dataclass(frozen=True)
class AgentContext:
    settings: Settings
    model: str
    prompt_version: str = "v1"
    extra_tags: dict[str, str] = field(default_factory=dict)


# ---- rendering --------------------------------------------------------------------------
def render_world(seed: EpisodeSeed) -> str:
    """The seed's start world (no source family, reference or selection internals)."""
    lines = [f"Setting: {seed.setting}", f"Time: {seed.time.label} (day {seed.time.day})", "Characters:"]
    for c in seed.cast:
        who = "player character" if c.role == "player" else "NPC"
        lines.append(f"- {c.name} (id {c.id}, {who}): {c.description} Condition: {c.condition}. "
                     f"Location: {c.location}.")
    if seed.relationships:
        names = {c.id: c.name for c in seed.cast}
        lines.append("Relationships:")
        lines += [f"- {names.get(r.a, r.a)} – {names.get(r.b, r.b)}: {r.description}" for r in seed.relationships]
    if seed.facts:
        lines.append("Facts:")
        lines += [f"- {f.text}" for f in seed.facts]
    if seed.locations:
        lines.append("Places: " + "; ".join(seed.locations))
    return "\n".join(lines)


def render_state(state: WorldState) -> str:
    """M_t as compact JSON (ids are needed by the World Memory Agent's operations)."""
    return json.dumps(state.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def render_character_memory(cm: CharacterMemory) -> str:
    return json.dumps(cm.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def render_history(seed: EpisodeSeed, history: list[HistoryEntry]) -> str:
    """Opening plus every earlier step (player action, narrative, day): the full narrative history."""
    parts = [f"Opening: {seed.opening}"]
    for h in history:
        parts.append(f"Step {h.step} (day {h.day}). Player: {h.player_action}\n{h.narrative}")
    return "\n\n".join(parts)


def render_intents(intents: list[dict[str, str]]) -> str:
    return "\n".join(f"- {i['character_id']}: {i['intent']}" for i in intents) or "(none)"


def render_plan(plan: PlotPlan) -> str:
    lines = []
    for b in plan.beats:
        after = f" (after {', '.join(b.depends_on)})" if b.depends_on else ""
        lines.append(f"- {b.beat_id}{after}: {b.content}")
    return "\n".join(lines)


# ---- requests ---------------------------------------------------------------------------
def role_budget(settings: Settings, role: str) -> int:
    """The configured output budget of a WSE role ("wse.story_agent" -> wse.budgets.story_agent)."""
    return settings.wse.budgets[role.removeprefix("wse.")]


def role_sampling(settings: Settings, model: str, role: str, seed: int | None = None) -> Sampling:
    """Benchmark sampling with the role's configured output budget and an optional seed."""
    base = settings.wse.sampling
    updates: dict[str, object] = {}
    if base.max_tokens is None:
        updates["max_tokens"] = role_budget(settings, role)
    if seed is not None:
        updates["seed"] = seed
    return base.model_copy(update=updates)


def _request(ctx: AgentContext, role: str, output_model, tags: dict[str, str], sampling_seed: int | None = None,
             **values: object) -> LLMRequest:
    prompt = get_prompt(role, ctx.prompt_version, ctx.settings.prompts_dir)
    return LLMRequest(
        role=role, model=ctx.model, messages=prompt.render(**values),
        sampling=role_sampling(ctx.settings, ctx.model, role, sampling_seed),
        output_model=output_model, prompt_version=prompt.id, tags={**ctx.extra_tags, **tags},
    )


def _tags(seed: EpisodeSeed, step: int, **more: str) -> dict[str, str]:
    return {"seed_id": seed.seed_id, "step": str(step), **more}


def centralized_ca_request(ctx: AgentContext, seed: EpisodeSeed, memories: list[CharacterMemory],
                           history: list[HistoryEntry], step: int) -> LLMRequest:
    """B2: one call for all four NPCs. Sees the four actor-centric views B3's isolated calls see (one
    each) and the same history (App. A, Fig. 6: (H_t, M_t^(k))), never P_t nor anything else of the
    start world: B3 − B2 then measures the architecture, not a difference in information."""
    return _request(
        ctx, ROLE_CA_CENTRALIZED, centralized_intents_model(tuple(seed.npc_ids)), _tags(seed, step),
        language=language_name(seed.language),
        memory="\n".join(render_character_memory(m) for m in memories),
        history=render_history(seed, history), npc_ids=", ".join(seed.npc_ids),
    )


def distributed_ca_request(ctx: AgentContext, seed: EpisodeSeed, memory: CharacterMemory,
                           history: list[HistoryEntry], step: int) -> LLMRequest:
    """B3: one isolated call per NPC with only its actor-centric view (and the history), never P_t."""
    return _request(
        ctx, ROLE_CA_DISTRIBUTED, DistributedIntent, _tags(seed, step, actor=memory.actor_id),
        language=language_name(seed.language), actor_name=memory.name, actor_id=memory.actor_id,
        memory=render_character_memory(memory), history=render_history(seed, history),
    )


def world_model_request(ctx: AgentContext, seed: EpisodeSeed, history: list[HistoryEntry], player_action: str,
                        intents: list[dict[str, str]], state: WorldState | None, step: int) -> LLMRequest:
    """WMOD: stateless planner; memory only when WMEM is on."""
    intent_ids = tuple(i["character_id"] for i in intents)
    return _request(
        ctx, ROLE_WORLD_MODEL, plot_plan_model(intent_ids), _tags(seed, step),
        language=language_name(seed.language), world=render_world(seed),
        memory=render_state(state) if state is not None else NO_MEMORY,
        history=render_history(seed, history), player_action=player_action,
        intents=render_intents(intents), intent_ids=", ".join((PLAYER_INTENT_ID, *intent_ids)),
    )


def story_guidance(intents: list[dict[str, str]] | None, plan: PlotPlan | None) -> str:
    """What the narrator gets besides P_t: the plan (WMOD), else the raw intents (B2/B3), else nothing (B1)."""
    if plan is not None:
        return ("Plot plan to narrate (the world model's decision about what happens, in order):\n"
                + render_plan(plan))
    if intents:
        return ("Other characters' intentions (attempts; you decide whether they succeed):\n"
                + render_intents(intents))
    return "You decide how the world and the other characters respond."


def story_agent_request(ctx: AgentContext, seed: EpisodeSeed, history: list[HistoryEntry], player_action: str,
                        intents: list[dict[str, str]] | None, plan: PlotPlan | None,
                        state: WorldState | None, step: int) -> LLMRequest:
    return _request(
        ctx, ROLE_STORY, StoryAgentOutput, _tags(seed, step),
        language=language_name(seed.language), world=render_world(seed),
        memory=render_state(state) if state is not None else NO_MEMORY,
        history=render_history(seed, history), player_name=seed.player.name, player_action=player_action,
        guidance=story_guidance(intents, plan),
    )


def world_memory_request(ctx: AgentContext, seed: EpisodeSeed, state: WorldState, narrative: str,
                         step: int) -> LLMRequest:
    return _request(
        ctx, ROLE_WORLD_MEMORY, MemoryDelta, _tags(seed, step),
        language=language_name(seed.language), memory=render_state(state), narrative=narrative, step=step,
    )
