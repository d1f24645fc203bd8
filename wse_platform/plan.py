"""`wse plan`: what a configuration will ask of the model servers, before anything runs.

Per benchmark and cell: the number of requests (an upper bound: every unit runs to its limit —
WSE trajectories to the horizon, NCP episodes to t_max with one double-check per turn, every kept
100-Endings position), prompt and output tokens, the cost for priced models, and the expected
wall time on the configured endpoints.

Requests follow the protocols:
- WSE-bench, per trajectory step: a centralized Character Agent call (B2) or one per non-player
  character (B3), a World Model call (+WMOD), the Story Agent, a World Memory call (+WMEM); per
  judge member a consistency verdict per step and one richness verdict per trajectory.
- NCP-Bench, per episode: the opening, then per turn the player, the narrator (HiAgent: plus one
  subgoal summary), and the auditor's fact update, conflict check, double check, node update and
  commitment status; per re-audit auditor the four audit stages per turn times its count;
  extraction three stages per spec and extraction model.
- 100-Endings: per generated story its pipeline's steps; per kept position and repeat one
  forecast request with n = K and K judge requests; positions estimated from each story's
  sentences (human corpora are read; a generated story's length from its token budget).

Tokens: where the warehouse already holds calls of a role (`llm_calls`, answered by a model, not
the cache), their mean prompt/output tokens and latency are used ("observed"); otherwise the
prompt is the role's template plus its inputs at 4 characters per token and the output the
role's typical length capped by its budget ("estimate"). Wall time: the work of each model
divided by its in-flight slots, or the longest unit's chain of requests if that is longer.

Each load names the asset whose step makes it; `step_requests` gives the planned requests per
(asset, partition), the totals of `wse materialize`'s progress lines (`wse_platform/progress.py`),
which also count the re-audit's replay of the in-loop auditor (answered by the cache, so not in
the table, the cost or the wall time).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from wse_platform.config import ENDINGS_PIPELINE_STEPS, Settings

CHARS_PER_TOKEN = 4
# Typical output lengths in tokens where no call was observed (capped by the role's budget): the
# papers' word limits (NCP narrator 150 words, player 50) and the sizes of our JSON answers.
TYPICAL_OUT = {
    "wse.character_agent_centralized": 300, "wse.character_agent_distributed": 120, "wse.world_model": 400,
    "wse.story_agent": 450, "wse.world_memory_agent": 300, "wse.consistency_judge": 150,
    "wse.richness_judge": 600, "ncp.narrator_opening": 250, "ncp.narrator": 220, "ncp.memory_summary": 60,
    "ncp.player_adversarial": 80, "ncp.player_natural": 80, "ncp.fact_update": 200, "ncp.conflict_check": 200,
    "ncp.conflict_double_check": 250, "ncp.node_update": 120, "ncp.commitment_status": 200,
    "ncp.extract_facts": 1500, "ncp.extract_trajectory": 1500, "ncp.extract_commitments": 1200,
    "endings.plan": 400, "endings.write": 3000, "endings.extract": 400, "endings.adapt": 400,
    "endings.forecast": 100, "endings.judge": 1,
}
DEFAULT_WORLD_CHARS = 6000     # a WSE seed's world as rendered, when no seed is in the warehouse
DEFAULT_NPCS = 4               # non-player characters per seed, when no seed is in the warehouse
AUDIT_STAGES = ("ncp.fact_update", "ncp.conflict_check", "ncp.conflict_double_check", "ncp.node_update",
                "ncp.commitment_status")
ENDINGS_STEP_ROLE = {"write": "endings.write", "plan": "endings.plan", "extract": "endings.extract",
                     "adapt": "endings.adapt"}


@dataclass
class Load:
    """Requests of one role by one model inside a cell."""

    role: str
    model: str
    requests: int
    prompt_tokens: float            # per request
    out_tokens: float               # per request
    basis: str = "estimate"
    samples: int = 1                # outputs per request (forecasts: K)
    asset: str = ""                 # the asset whose step makes these requests (progress lines)
    cached: bool = False            # expected from the response cache: not a server request, not costed


# the asset (the first key of its step) that makes a role's requests, for progress against the plan
ROLE_ASSET = {"wse.consistency_judge": "wse_consistency_verdicts", "wse.richness_judge": "wse_richness_verdicts",
              "ncp.extract_facts": "ncp_spec_extraction", "ncp.extract_trajectory": "ncp_spec_extraction",
              "ncp.extract_commitments": "ncp_spec_extraction", "endings.forecast": "endings_predictions",
              "endings.judge": "endings_verdicts"}
PREFIX_ASSET = {"wse.": "wse_trajectory_steps", "ncp.": "ncp_episodes", "endings.": "endings_stories"}


def role_asset(role: str) -> str:
    return ROLE_ASSET.get(role) or next((a for p, a in PREFIX_ASSET.items() if role.startswith(p)), "")


@dataclass
class CellPlan:
    benchmark: str
    cell: str
    loads: list[Load] = field(default_factory=list)
    chain: int = 0                  # requests one after another in the cell's longest unit
    partition: str = ""             # the cell's partition key (default: `cell`)

    @property
    def requests(self) -> int:
        return sum(x.requests for x in self.loads if not x.cached)

    def tokens(self) -> tuple[float, float]:
        return (sum(x.requests * x.prompt_tokens for x in self.loads if not x.cached),
                sum(x.requests * x.out_tokens * x.samples for x in self.loads if not x.cached))


@dataclass
class Observed:
    """Mean prompt/output tokens and latency per (role, model) from `llm_calls`."""

    by_role_model: dict[tuple[str, str], tuple[float, float, float, int]] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: list[tuple]) -> "Observed":
        return cls({(r, m): (float(a or 0), float(b or 0), float(c or 0), int(n)) for r, m, a, b, c, n in rows})

    def get(self, role: str, model: str) -> tuple[float, float, float, int] | None:
        return self.by_role_model.get((role, model))

    def latency(self, model: str) -> float | None:
        rows = [(lat, n) for (_, m), (_, _, lat, n) in self.by_role_model.items() if m == model]
        total = sum(n for _, n in rows)
        return sum(lat * n for lat, n in rows) / total if total else None


def template_tokens(role: str, settings: Settings) -> float:
    from wse_platform.prompts import get_prompt
    try:
        prompt = get_prompt(role, "v1", settings.prompts_dir)
    except Exception:  # noqa: BLE001 - a role without its own file (pipeline steps) counts no template
        return 0.0
    return sum(len(text) for _, text in prompt.sections) / CHARS_PER_TOKEN


def _load(role: str, model: str, requests: int, input_chars: float, budget: int | None,
          settings: Settings, observed: Observed, samples: int = 1, asset: str | None = None) -> Load:
    asset = asset or role_asset(role)
    seen = observed.get(role, model)
    if seen is not None:
        return Load(role, model, requests, seen[0], seen[1], f"observed ({seen[3]} calls)", samples, asset)
    out = TYPICAL_OUT.get(role, 200)
    out = min(out, budget) if budget else out
    return Load(role, model, requests, template_tokens(role, settings) + input_chars / CHARS_PER_TOKEN, out,
                "estimate", samples, asset)


# ---- WSE-bench ---------------------------------------------------------------------------------

OBSERVED_SQL = ("SELECT role, model, avg(tokens_in), avg(tokens_out / greatest(n_samples, 1)), avg(latency_s), "
                "count(*) FROM llm_calls WHERE NOT cache_hit AND valid GROUP BY role, model")
SEEDS_SQL = "SELECT seed_id, seed_json FROM wse_episode_seeds ORDER BY seed_order"


def warehouse_facts(warehouse: Path) -> tuple[Observed, list[tuple[str, str]]]:
    """What the plan reads from the warehouse, in one read-only visit: the observed means of
    `llm_calls` and the stored WSE seeds (empty where a table is not built yet)."""
    import duckdb

    from wse_platform.warehouse import read_only_or_empty

    def fetch(con, sql: str) -> list[tuple]:
        try:
            return con.execute(sql).fetchall()
        except duckdb.CatalogException:  # not built yet: plan from estimates
            return []
    with read_only_or_empty(warehouse) as con:
        return Observed.from_rows(fetch(con, OBSERVED_SQL)), fetch(con, SEEDS_SQL)


def _wse_seed_npcs(settings: Settings, seed_rows: list[tuple[str, str]]) -> tuple[list[int], float]:
    """NPC counts of the seeds the cells run, and the mean world size in characters."""
    import json

    w = settings.wse
    n = len(w.seed_ids) if w.seed_ids else (w.n_seeds or 42)
    rows = [r for r in seed_rows if r[0] in set(w.seed_ids)] if w.seed_ids else list(seed_rows)
    rows = rows[:n]
    if not rows:
        return [DEFAULT_NPCS] * n, float(DEFAULT_WORLD_CHARS)
    npcs = [sum(c.get("role") == "npc" for c in json.loads(js).get("cast", [])) or DEFAULT_NPCS for _, js in rows]
    return npcs + [DEFAULT_NPCS] * (n - len(npcs)), sum(len(js) for _, js in rows) / len(rows)


def plan_wse(settings: Settings, observed: Observed, seed_rows: list[tuple[str, str]]) -> list[CellPlan]:
    from wse_platform.wse.architecture import parse_architecture

    w = settings.wse
    if not w.models:
        return []
    horizon = w.horizon or 20
    npcs, world = _wse_seed_npcs(settings, seed_rows)
    seeds = len(npcs)
    narrative = min(TYPICAL_OUT["wse.story_agent"], w.budgets["story_agent"]) * CHARS_PER_TOKEN
    history = world + narrative * (horizon - 1) / 2          # mean over the steps of a trajectory
    out: list[CellPlan] = []
    for model in w.models:
        for key in w.architectures:
            arch = parse_architecture(key)
            cell = CellPlan("wse", f"{key}|{model}")
            steps = seeds * horizon
            per_step = 1 + arch.wmod + arch.wmem
            if arch.centralized_ca:
                cell.loads.append(_load("wse.character_agent_centralized", model, steps, history,
                                        w.budgets["character_agent_centralized"], settings, observed))
            if arch.distributed_ca:
                cell.loads.append(_load("wse.character_agent_distributed", model, horizon * sum(npcs), history,
                                        w.budgets["character_agent_distributed"], settings, observed))
            for flag, role, budget in ((arch.wmod, "wse.world_model", "world_model"),
                                       (True, "wse.story_agent", "story_agent"),
                                       (arch.wmem, "wse.world_memory_agent", "world_memory_agent")):
                if flag:
                    cell.loads.append(_load(role, model, steps, history, w.budgets[budget], settings, observed))
            for panel, role, per_traj in ((w.consistency_judges, "wse.consistency_judge", horizon),
                                          (w.richness_judges, "wse.richness_judge", 1)):
                for member in (panel.members if panel else []):
                    cell.loads.append(_load(role, member.model, seeds * per_traj, history + narrative,
                                            w.budgets[role.split(".")[1]], settings, observed))
            # a step's CA calls run side by side; the judges run once the trajectory exists
            cell.chain = horizon * (per_step + (1 if arch.has_character_agents else 0)) + horizon
            out.append(cell)
    return out


# ---- NCP-Bench ---------------------------------------------------------------------------------

def _spec_chars() -> float:
    from wse_platform.config import REPO_ROOT
    files = list((REPO_ROOT / "data" / "ncp_bench" / "dataset" / "specs").glob("*.yaml"))
    return sum(f.stat().st_size for f in files) / len(files) if files else 8000.0


def plan_ncp(settings: Settings, observed: Observed) -> list[CellPlan]:
    n = settings.ncp
    if not n.narrators:
        return []
    t_max = n.t_max or 25
    specs = len(n.spec_ids) if n.spec_ids else (n.n_specs or 100)
    spec = _spec_chars()
    turn_chars = (TYPICAL_OUT["ncp.narrator"] + TYPICAL_OUT["ncp.player_adversarial"]) * CHARS_PER_TOKEN
    history = spec + turn_chars * (t_max - 1) / 2
    budget = n.sampling.max_tokens
    auditor = n.auditor.model if n.auditor else None
    out: list[CellPlan] = []
    for model in n.narrators:
        for arch in n.architectures:
            base, player = arch.split("+")
            cell = CellPlan("ncp", f"{arch}|{model}")
            turns = specs * t_max
            cell.loads.append(_load("ncp.narrator_opening", model, specs, spec, budget, settings, observed))
            cell.loads.append(_load("ncp.narrator", model, turns, history, budget, settings, observed))
            if base == "memory":
                cell.loads.append(_load("ncp.memory_summary", model, turns, history, budget, settings, observed))
            if n.player_model:
                cell.loads.append(_load(f"ncp.player_{player}", n.player_model, turns, history, budget,
                                        settings, observed))
            for role in (AUDIT_STAGES if auditor else ()):
                cell.loads.append(_load(role, auditor, turns, history, budget, settings, observed))
            for re in n.reaudit_auditors:
                for role in AUDIT_STAGES:
                    if role != "ncp.conflict_double_check":
                        cell.loads.append(_load(role, re.model, turns * re.count, history, budget, settings, observed,
                                                asset="ncp_reaudit_episodes"))
            for role in (AUDIT_STAGES if auditor else ()):
                # the re-audit replays the in-loop auditor too: its audits again, answered from the cache
                cell.loads.append(replace(_load(role, auditor, turns, history, budget, settings, observed,
                                                asset="ncp_reaudit_episodes"), cached=True))
            cell.chain = 1 + t_max * (3 + (len(AUDIT_STAGES) if auditor else 0))
            out.append(cell)
    for model in n.extraction_models:
        cell = CellPlan("ncp", f"extraction|{model}", partition=model)
        k = len(n.spec_ids) if n.spec_ids else (n.n_extraction_specs or 100)
        for stage in ("ncp.extract_facts", "ncp.extract_trajectory", "ncp.extract_commitments"):
            cell.loads.append(_load(stage, model, k, spec, n.extraction_sampling.max_tokens, settings, observed))
        cell.chain = 3
        out.append(cell)
    return out


# ---- 100-Endings -------------------------------------------------------------------------------

def _positions(n_sentences: int, stride: int, cap: int | None) -> int:
    kept = max(0, math.floor(n_sentences * 0.89 / max(1, stride)))   # shares 10 %–99 % of the story
    return min(kept, cap) if cap is not None else kept


def _human_sentences(settings: Settings, problems: list[str]) -> list[tuple[str, int, int]]:
    """(corpus, sentences, characters) of every human story the configuration keeps."""
    from wse_platform.endings.corpus import load_configured
    from wse_platform.metrics.endings import sentence_spans
    out = []
    for cfg in settings.endings.corpora:
        try:
            load = load_configured(settings, cfg)
        except Exception as err:  # noqa: BLE001 - the plan goes on without it and says so
            problems.append(f"endings corpus {cfg.name!r} left out of the plan: {err}")
            continue
        out += [(cfg.name, len(sentence_spans(s.text)), len(s.text)) for s in load.included]
    return out


def _n_ideas(settings: Settings, problems: list[str]) -> int:
    from wse_platform.endings.ideas import load_ideas
    from wse_platform.endings.pipelines import ideas_path
    try:
        ideas, _ = load_ideas(ideas_path(settings))
    except Exception as err:  # noqa: BLE001
        problems.append(f"endings ideas left out of the plan: {err}")
        return 0
    n = settings.endings.n_ideas
    return min(len(ideas), n) if n else len(ideas)


def plan_endings(settings: Settings, observed: Observed, problems: list[str]) -> list[CellPlan]:
    e = settings.endings
    if not e.forecaster:
        return []
    k, stride, cap, reps = e.k or 100, e.position_stride or 1, e.max_positions_per_story, e.repeats
    out: list[CellPlan] = []

    def measure(cell: CellPlan, stories: list[tuple[int, int]]) -> None:
        positions = sum(_positions(s, stride, cap) for s, _ in stories) * reps
        mean_chars = sum(c for _, c in stories) / len(stories) if stories else 0
        cell.loads.append(_load("endings.forecast", e.forecaster, positions, mean_chars / 2,
                                e.forecast_sampling.max_tokens, settings, observed, samples=k))
        cell.loads.append(_load("endings.judge", e.judge or e.forecaster, positions * k, mean_chars / 2,
                                e.judge_sampling.max_tokens, settings, observed))
        cell.chain = max(cell.chain, 2)

    human: dict[str, list[tuple[int, int]]] = {}
    for corpus, sentences, chars in _human_sentences(settings, problems):
        human.setdefault(corpus, []).append((sentences, chars))
    for corpus, stories in human.items():
        cell = CellPlan("endings", f"human:{corpus}")
        measure(cell, stories)
        out.append(cell)
    ideas = _n_ideas(settings, problems)
    words = min(TYPICAL_OUT["endings.write"], e.story_sampling.max_tokens) * 0.75
    story = (max(1, round(words / 17)), int(words * 6))          # ~17 words per sentence
    for model in e.generators:
        for pipeline in e.pipelines:
            cell = CellPlan("endings", f"{pipeline}|{model}", partition=f"gen:{model}:{pipeline}")
            steps = [s for s in ENDINGS_PIPELINE_STEPS[pipeline] if s not in e.ablate.get(pipeline, [])]
            for step in steps:
                cell.loads.append(_load(ENDINGS_STEP_ROLE[step], model, ideas, 2000, e.story_sampling.max_tokens,
                                        settings, observed))
            measure(cell, [story] * ideas)
            cell.chain = len(steps) + 2
            out.append(cell)
    return out


# ---- the whole plan ----------------------------------------------------------------------------

def slots(settings: Settings, model: str) -> int:
    """Requests one model can have in flight: its endpoints × per-endpoint limit, else its
    backend's limit (the embedded model: one)."""
    m = settings.models[model]
    if m.backend == "embedded":
        return 1
    if m.endpoint_concurrency:
        return m.endpoint_concurrency * max(1, len(m.api_bases))
    return max(1, int(settings.concurrency.get(m.backend, 1)))


@dataclass
class Plan:
    cells: list[CellPlan]
    observed: Observed
    problems: list[str] = field(default_factory=list)   # inputs the plan could not read


def build(settings: Settings, facts: tuple[Observed, list[tuple[str, str]]] | None = None) -> Plan:
    """The plan; `facts` (observed means, WSE seed rows) instead of reading them from the warehouse."""
    (observed, seed_rows), problems = facts if facts is not None else warehouse_facts(settings.warehouse), []
    cells = (plan_wse(settings, observed, seed_rows) + plan_ncp(settings, observed)
             + plan_endings(settings, observed, problems))
    return Plan(cells, observed, problems)


def prices(settings: Settings, model: str) -> tuple[float, float] | None:
    """$ per prompt and output token: the config's prices, else litellm's cost map (as the client's
    accounting does) for litellm models; None when unknown (local servers, the embedded model)."""
    m = settings.models.get(model)
    if m is None:
        return None
    if m.price_in_per_token is not None and m.price_out_per_token is not None:
        return m.price_in_per_token, m.price_out_per_token
    if m.backend != "litellm":
        return None
    from wse_platform.llm.backends.litellm_backend import _litellm
    table = _litellm().model_cost
    for key in (m.model_id, m.model_id.split("/", 1)[-1]):
        entry = table.get(key) or {}
        if entry.get("input_cost_per_token") is not None and entry.get("output_cost_per_token") is not None:
            return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    return None


def cost(settings: Settings, load: Load) -> float | None:
    if load.cached:
        return 0.0
    price = prices(settings, load.model)
    if price is None:
        return None
    return load.requests * (load.prompt_tokens * price[0] + load.out_tokens * load.samples * price[1])


def wall_seconds(settings: Settings, cells: list[CellPlan], observed: Observed,
                 latency: float | None) -> tuple[float | None, dict[str, float]]:
    """Expected wall time if every cell runs at once: per model, its requests × latency ÷ its
    slots; at least the longest chain. None when a model has no latency (no calls, no --latency)."""
    work: dict[str, float] = {}
    longest = 0.0
    for cell in cells:
        chain_lat = 0.0
        for load in (x for x in cell.loads if not x.cached):
            lat = observed.latency(load.model) if latency is None else latency
            if lat is None:
                return None, {}
            work[load.model] = work.get(load.model, 0.0) + load.requests * lat
            chain_lat = max(chain_lat, lat)
        longest = max(longest, cell.chain * chain_lat)
    per_model = {m: s / slots(settings, m) for m, s in work.items()}
    return max([longest, *per_model.values()]), per_model


def _n(x: float) -> str:
    return f"{x / 1e6:.1f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:,.0f}"


def render(settings: Settings, the_plan: Plan, latency: float | None = None) -> str:
    from wse_platform.scale import scale_note
    cells, observed = the_plan.cells, the_plan.observed
    lines = [f"plan for {settings.source_file or 'the config'} (profile {settings.profile}); requests are upper "
             "bounds (every unit runs to its limit)"]
    note = scale_note(settings)
    if note:
        lines.append(note)
    lines.append(f"{'benchmark':9s} {'cell':34s} {'requests':>9s} {'prompt tok':>10s} {'output tok':>10s} "
                 f"{'cost $':>8s}  basis")
    total_req, total_in, total_out, total_cost, unpriced = 0, 0.0, 0.0, 0.0, False
    for cell in cells:
        tin, tout = cell.tokens()
        costs = [cost(settings, x) for x in cell.loads]
        c = None if any(v is None for v in costs) else sum(costs)      # type: ignore[arg-type]
        unpriced |= c is None
        asked = [x for x in cell.loads if not x.cached]
        basis = "observed" if all(x.basis != "estimate" for x in asked) else \
            "estimate" if all(x.basis == "estimate" for x in asked) else "mixed"
        lines.append(f"{cell.benchmark:9s} {cell.cell[:34]:34s} {cell.requests:>9,d} {_n(tin):>10s} "
                     f"{_n(tout):>10s} {('-' if c is None else f'{c:,.2f}'):>8s}  {basis}")
        total_req += cell.requests
        total_in += tin
        total_out += tout
        total_cost += c or 0.0
    lines.append(f"{'total':9s} {f'{len(cells)} cells':34s} {total_req:>9,d} {_n(total_in):>10s} {_n(total_out):>10s} "
                 f"{f'{total_cost:,.2f}':>8s}" + ("  (+ unpriced models)" if unpriced else ""))
    wall, per_model = wall_seconds(settings, cells, observed, latency)
    if wall is None:
        lines.append("wall time: unknown (no calls of some model in llm_calls yet); `wse plan --latency 0.4` "
                     "assumes 0.4 s per request")
    else:
        lines.append(f"wall time: ~{_duration(wall)} with every cell at once "
                     + ", ".join(f"{m}: {_duration(s)} on {slots(settings, m)} slot(s)" for m, s in per_model.items()))
    lines += [f"warning: {p}" for p in the_plan.problems]
    return "\n".join(lines) + "\n"


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def cell_requests(settings: Settings) -> dict[tuple[str, str], int]:
    """(benchmark, cell) → planned requests to the model servers."""
    return {(c.benchmark, c.cell): c.requests for c in build(settings).cells}


def step_requests(the_plan: Plan) -> dict[tuple[str, str], int]:
    """(asset, partition key) → requests its step makes, those expected from the cache included
    (progress lines count every finished request against these)."""
    out: dict[tuple[str, str], int] = {}
    for cell in the_plan.cells:
        for load in cell.loads:
            key = (load.asset, cell.partition or cell.cell)
            out[key] = out.get(key, 0) + load.requests
    return out


def main(settings: Settings, latency: float | None = None) -> int:
    print(render(settings, build(settings), latency), end="")
    return 0

