"""The one configuration file (`wse.yaml`), validated by pydantic.

Errors name the offending key (e.g. ``wse.judges.consistency.model``) so a
researcher can fix the file without reading code. Environment variables override
paths (``WSE_WAREHOUSE``, ``WSE_CACHE_DIR``, ``WSE_ARTIFACTS_DIR``) and secrets
are only ever referenced by the *name* of an environment variable.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from wse_platform.llm.backends.options import BACKEND_OPTIONS, unknown_options
from wse_platform.llm.types import Sampling

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_CONFIG = REPO_ROOT / "wse.yaml"

Backend = Literal["embedded", "litellm", "vllm"]
Profile = Literal["quick", "demo", "paper"]

# B_b (+WMEM) (+WMOD): b=1 no character agent, 2 one centralized, 3 four distributed.
WSE_ARCHITECTURES: tuple[str, ...] = tuple(
    f"B{b}" + ("+WMEM" if w else "") + ("+WMOD" if p else "")
    for b in (1, 2, 3) for w in (False, True) for p in (False, True)
)
NCP_ARCHITECTURES: tuple[str, ...] = ("baseline+adversarial", "baseline+natural", "memory+adversarial")
# also accepted (not run by default): HiAgent with the natural player, which the reference method allows
NCP_KNOWN_ARCHITECTURES: tuple[str, ...] = (*NCP_ARCHITECTURES, "memory+natural")
# 100-Endings pipelines and their steps, in order (the last step writes the story).
ENDINGS_PIPELINE_STEPS: dict[str, tuple[str, ...]] = {
    "vanilla": ("write",),
    "beats": ("plan", "write"),
    "warmup_beats": ("extract", "adapt", "write"),
}
ENDINGS_PIPELINES: tuple[str, ...] = tuple(ENDINGS_PIPELINE_STEPS)

# Scale-dependent settings per profile; anything set explicitly in the file wins.
SCALE_PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "demo": {
        "wse": {"horizon": 3, "n_seeds": 2, "bootstrap_draws": 200},
        "ncp": {"t_max": 3, "n_specs": 2, "n_extraction_specs": 1},
        "endings": {"k": 4, "position_stride": 4, "max_positions_per_story": 4, "max_human_stories": 2,
                    "n_ideas": 1},
    },
    "paper": {
        "wse": {"horizon": 20, "n_seeds": 42, "bootstrap_draws": 10_000},
        # extraction: the released trajectories and commitment sets mostly exceed 1,024 tokens
        "ncp": {"t_max": 100, "n_specs": 100, "n_extraction_specs": 100,
                "extraction_sampling": {"temperature": 0.0, "max_tokens": 8092}},
        "endings": {"k": 100, "position_stride": 1, "max_positions_per_story": None, "max_human_stories": None,
                    "n_ideas": None},
    },
}


class ConfigError(ValueError):
    """A configuration problem; the message names the file and the key."""


# Names of models and corpora become Dagster partition keys (`B1|<model>`, `gen:<model>:<pipeline>`,
# `human:<corpus>`), run tags, generated-file values and file names: one allowed character set.
NAME_CHARS = "letters, digits and . _ - + (starting with a letter or digit)"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_NAME_LENGTH = 64
MAX_CONFIG_BYTES = 1024 * 1024   # a config file above 1 MiB is refused before it is parsed


def name_problem(name: Any) -> str | None:
    """Why `name` cannot name a model or corpus (None when it can)."""
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    if not name:
        return "is empty"
    problems = []
    if not NAME_PATTERN.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9._+-]", c)}) or [name[0]]
        problems.append(f"contains {', '.join(repr(c) for c in bad[:5])}; use only {NAME_CHARS}")
    if len(name) > MAX_NAME_LENGTH:
        problems.append(f"is {len(name)} characters long (at most {MAX_NAME_LENGTH})")
    return "; and ".join(problems) or None


def _shown(name: Any) -> str:
    text = repr(name)
    return text if len(text) <= 60 else f"{text[:57]}...'"


def _check_name(what: str, name: Any) -> None:
    problem = name_problem(name)
    if problem:
        raise ValueError(f"{what} {_shown(name)} {problem}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    backend: Backend
    model_id: str                     # backend model id (litellm provider string, GGUF name, HF id for vLLM)
    revision: str | None = None
    quantization: str | None = None
    api_base: str | list[str] | None = None  # e.g. http://127.0.0.1:8000/v1; a list = several servers (litellm Router)
    api_key_env: str | None = None    # NAME of the env var holding the key, never the key itself
    sampling: Sampling = Field(default_factory=Sampling)
    params_b: float | None = None     # parameter count in billions (scaling fits)
    family: str | None = None         # e.g. "qwen3-dense"
    price_in_per_token: float | None = None
    price_out_per_token: float | None = None
    # thinking models: off | on | an effort (minimal/low/medium/high); None = the model's default.
    # Mapped per backend (llm/reasoning.py); part of the model's identity and cache keys.
    reasoning: str | None = None
    allow_input_truncation: bool = False  # accept prompts cut to fit the context window (else a failure)
    # attempts per request before an invalid or truncated answer is recorded as a failure (default 3)
    max_attempts: PositiveInt | None = None
    endpoint_concurrency: int | None = Field(default=None, ge=1)  # in-flight requests per api_base
    router: dict[str, Any] = Field(default_factory=dict)  # litellm Router options (routing_strategy, cooldown_time...)
    extra: dict[str, Any] = Field(default_factory=dict)  # backend-specific (n_ctx, tensor_parallel_size...)

    @field_validator("model_id")
    @classmethod
    def _no_credential(cls, v: str) -> str:
        from wse_platform.redact import credential_in
        found = credential_in(v)
        if found:
            raise ValueError(f"carries {found}; the model id is part of the model's identity, cache keys and "
                             "tables: put the key in an environment variable named by api_key_env")
        return v

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning_mode(cls, v: Any) -> Any:
        if v is False:
            return "off"  # YAML reads a bare `off` as false
        if v is True:
            return "on"
        from wse_platform.llm.reasoning import REASONING_MODES
        if v is not None and v not in REASONING_MODES:
            raise ValueError(f"{v!r} is not one of {list(REASONING_MODES)}")
        return v

    @property
    def api_bases(self) -> list[str]:
        """The configured endpoints (empty: the provider's default)."""
        if self.api_base is None:
            return []
        return [self.api_base] if isinstance(self.api_base, str) else list(self.api_base)

    @field_validator("extra")
    @classmethod
    def _known_options(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        backend = info.data.get("backend")
        bad = unknown_options(backend, v) if backend in BACKEND_OPTIONS else []
        if bad:
            raise ValueError(f"unknown option(s) {bad} for backend {backend!r}; "
                             f"known: {sorted(BACKEND_OPTIONS[backend])}")
        return v

    def identity(self) -> dict[str, Any]:
        """What determines this model's outputs (for staleness). `extra` is included: backend
        options such as n_ctx or repeat_penalty change answers; `api_base` does not."""
        return {
            "backend": self.backend, "model_id": self.model_id, "revision": self.revision,
            "quantization": self.quantization, "sampling": self.sampling.model_dump(), "extra": self.extra,
            **({"reasoning": self.reasoning} if self.reasoning is not None else {}),
            # accepting cut prompts turns failures into results; unset keys leave old identities unchanged
            **({"allow_input_truncation": True} if self.allow_input_truncation else {}),
            # more attempts turn more failures into results
            **({"max_attempts": self.max_attempts} if self.max_attempts is not None else {}),
        }


class JudgeConfig(_Strict):
    model: str
    prompt_version: str = "v1"
    count: PositiveInt = 1

    def judge_id(self, role: str) -> str:
        """Stable id of this judge configuration, carried by every verdict row."""
        return f"{role}:{self.model}:{self.prompt_version}:x{self.count}"


class JudgeMember(_Strict):
    """One judge of a WSE-bench panel: a configured model, its prompt version and its own sampling
    (merged over the role's sampling; unset fields, including the seed, come from the role)."""

    model: str
    prompt_version: str = "v1"
    sampling: Sampling | None = None
    label: str | None = None          # name in verdict rows (default "<index>:<model>")


class JudgePanel(_Strict):
    """The judges whose votes form one WSE-bench verdict (the paper: three different models).

    Written in wse.yaml as a list (`wse.consistency_judges: [{model, prompt_version, sampling}, ...]`)
    or with the one-model shorthand `wse.consistency_judge: {model, prompt_version, count}` (count
    members of one model, told apart by their sampling seed). `model`, `prompt_version` and `count`
    describe the panel as a whole for code that only needs a summary."""

    members: list[JudgeMember] = Field(min_length=1)

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def model(self) -> str:           # the first member (run-queue backend tag)
        return self.members[0].model

    @property
    def models(self) -> list[str]:
        return sorted({m.model for m in self.members})

    @property
    def prompt_version(self) -> str:
        return self.members[0].prompt_version

    @property
    def prompt_versions(self) -> list[str]:
        return sorted({m.prompt_version for m in self.members})

    @property
    def homogeneous(self) -> bool:
        """One model, one prompt version, no per-member sampling or label: the `count` shorthand."""
        first = self.members[0]
        return all(m.model == first.model and m.prompt_version == first.prompt_version
                   and m.sampling is None and m.label is None for m in self.members)

    def member_label(self, index: int) -> str:
        m = self.members[index]
        return m.label or f"{index}:{m.model}"

    def judge_id(self, role: str) -> str:
        """Stable id of the whole panel, carried by every verdict row. The one-model shorthand keeps
        its readable historical form; any other panel adds a hash of every member's settings."""
        first = self.members[0]
        if self.homogeneous:
            return f"{role}:{first.model}:{first.prompt_version}:x{self.count}"
        blob = json.dumps([m.model_dump(mode="json") for m in self.members], sort_keys=True).encode()
        return f"{role}:panel:{'+'.join(m.model for m in self.members)}:{hashlib.sha256(blob).hexdigest()[:10]}"


def _panel_input(raw: dict[str, Any], role: str) -> None:
    """Map `wse.<role>s` (list) or the shorthand `wse.<role>` ({model, prompt_version, count}) to the
    panel field `<role>s`; both at once is an error naming the keys."""
    short, full = raw.pop(role, None), raw.get(f"{role}s")
    if short is not None and full is not None:
        raise ValueError(f"set either wse.{role}s (a list of judges) or the one-model shorthand "
                         f"wse.{role} (model, prompt_version, count), not both")
    if short is not None:
        if not isinstance(short, dict) or "members" in short:
            raw[f"{role}s"] = short
            return
        extra = set(short) - {"model", "prompt_version", "count"}
        if extra:
            raise ValueError(f"wse.{role}: unknown key(s) {sorted(extra)}; for per-judge sampling use the "
                             f"list form wse.{role}s")
        count = short.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"wse.{role}.count: must be an integer >= 1, got {count!r}")
        member = {k: v for k, v in short.items() if k != "count"}
        raw[f"{role}s"] = {"members": [member] * count}
    elif isinstance(full, list):
        raw[f"{role}s"] = {"members": full}


# Per-role output budgets (max_tokens) of the WSE-bench roles, sized for paper-scale outputs of
# real models: a 20-step trajectory at ~3.5 development units per step lists ~70 units for the
# richness judge; an inconsistent verdict carries six fields. A budget that cuts answers biases
# the judges (cut inconsistent votes become failures), so the demo lowers them explicitly.
WSE_ROLE_BUDGETS: dict[str, int] = {
    "character_agent_centralized": 1024, "character_agent_distributed": 256, "world_model": 1536,
    "story_agent": 2048, "world_memory_agent": 1536, "consistency_judge": 1024, "richness_judge": 8192,
}


class WSEConfig(_Strict):
    models: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=lambda: list(WSE_ARCHITECTURES))
    # Counts are positive: 0 or a negative number would otherwise mean "all" or "none" through slicing.
    horizon: PositiveInt | None = None
    n_seeds: PositiveInt | None = None
    # run exactly these episode seeds (ids such as dracor_hamlet-01) instead of the first n_seeds
    seed_ids: list[str] | None = Field(default=None, min_length=1)
    bootstrap_draws: PositiveInt | None = None
    bootstrap_seed: int = 20_260_815
    consistency_judges: JudgePanel | None = None
    richness_judges: JudgePanel | None = None
    budgets: dict[str, int] = Field(default_factory=lambda: dict(WSE_ROLE_BUDGETS))  # role -> max_tokens
    model_groups: dict[str, list[str]] = Field(default_factory=dict)
    sampling: Sampling = Field(default_factory=Sampling)
    human_labels: str | None = None   # folder with the human validation CSVs (App. B.5)

    @model_validator(mode="before")
    @classmethod
    def _panels(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            raw = dict(raw)
            if "construction_model" in raw:   # removed (issue 22): nothing used it
                raise ValueError("construction_model was removed: openings and initial actions are built from "
                                 "per-language templates without any model (paper §3.1); delete the key")
            for role in ("consistency_judge", "richness_judge"):
                _panel_input(raw, role)
        return raw

    @field_validator("budgets")
    @classmethod
    def _known_budgets(cls, v: dict[str, int]) -> dict[str, int]:
        bad = sorted(set(v) - set(WSE_ROLE_BUDGETS))
        if bad:
            raise ValueError(f"unknown role(s) {bad}; known: {sorted(WSE_ROLE_BUDGETS)}")
        low = {k: n for k, n in v.items() if n < 1}
        if low:
            raise ValueError(f"budgets must be >= 1 token: {low}")
        return {**WSE_ROLE_BUDGETS, **v}

    @property
    def consistency_judge(self) -> JudgePanel | None:
        """The consistency panel (historical name, kept for callers)."""
        return self.consistency_judges

    @property
    def richness_judge(self) -> JudgePanel | None:
        return self.richness_judges

    @field_validator("architectures")
    @classmethod
    def _known_arch(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in WSE_ARCHITECTURES]
        if bad:
            raise ValueError(f"unknown architecture(s) {bad}; known: {list(WSE_ARCHITECTURES)}")
        return v


class NCPAblationConfig(_Strict):
    """Paper Table 2 as run: live episodes of one cell with each auditor configuration in the loop."""

    narrator: str
    arch: str = "baseline+adversarial"
    auditors: list[JudgeConfig] = Field(min_length=1)
    n_specs: int | None = None  # default: ncp.n_specs


class NCPConfig(_Strict):
    narrators: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=lambda: list(NCP_ARCHITECTURES))
    player_model: str | None = None
    auditor: JudgeConfig | None = None
    reaudit_auditors: list[JudgeConfig] = Field(default_factory=list)
    extraction_models: list[str] = Field(default_factory=list)
    t_max: PositiveInt | None = None
    n_specs: PositiveInt | None = None
    n_extraction_specs: PositiveInt | None = None
    # run exactly these specs (ids such as movie26, evaluation order kept) for episodes, ablation and
    # extraction, instead of the first n_specs / n_extraction_specs
    spec_ids: list[str] | None = Field(default=None, min_length=1)
    # spec ids left out on purpose (e.g. a file that fails validation); any other bad spec fails `ncp_specs`
    exclude_specs: list[str] = Field(default_factory=list)
    sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.6, top_p=0.95, max_tokens=8092))
    extraction_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=1024))
    ablation: NCPAblationConfig | None = None
    # a local checkout of NLP2CT/NCP-Bench whose prompt files are sent instead of ours (ncp/reference.py)
    reference: str | None = None
    # what the narrators see of the trajectory: the current node (as the reference) or the full R (App. C.3)
    narrator_trajectory: Literal["current_node", "full"] = "current_node"

    # plug-in narrator methods {name: "package.module:Class"}; architecture "<name>+adversarial" runs one
    narrator_methods: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_arch(self) -> "NCPConfig":
        known = [*NCP_KNOWN_ARCHITECTURES, *(f"{m}+{p}" for m in self.narrator_methods
                                             for p in ("adversarial", "natural"))]
        bad = [a for a in self.architectures if a not in known]
        if bad:
            raise ValueError(f"ncp.architectures: unknown architecture(s) {bad}; known: {known}")
        return self


class CorpusConfig(_Strict):
    """A human corpus: a folder of .txt files (+ corpus.yaml), a .jsonl or a .csv file."""

    name: str
    path: str
    quality_tier: str = "human"
    format: Literal["folder", "jsonl", "csv"] | None = None   # default: from the path
    text_column: str = "text"
    id_column: str | None = None
    title_column: str | None = None
    author_column: str | None = None
    metadata_columns: list[str] = Field(default_factory=list)
    sample: PositiveInt | None = None      # random sample (seeded) of the in-range stories
    seed: int = 0
    min_words: NonNegativeInt | None = None   # per-corpus word range (default endings.min/max_words)
    max_words: PositiveInt | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _valid_name(cls, v: Any) -> Any:
        _check_name("corpus name", v)
        return v


class ReferenceConfig(_Strict):
    """A warm-up reference story: recalled from its title, or given in full from a file."""

    title: str
    author: str | None = None
    file: str | None = None   # full text (relative to the config); without it: title mode


class RubricConfig(_Strict):
    """The EQ-Bench-style rubric judge of generated and human stories (opt-in)."""

    model: str
    rubric_file: str | None = None    # default: the shipped wse_platform/endings/rubric.yaml
    prompt_version: str = "v1"
    min_words: NonNegativeInt = 0     # paper: 2,000-3,000 words for human corpora (length control)
    max_words: PositiveInt | None = None
    band_applies_to: Literal["human", "all"] = "human"   # paper: generated stories are scored at all lengths
    sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=1500))


# The paper's title-mode pool of canonical short stories (Appendix D.4.1).
DEFAULT_REFERENCE_POOL: tuple[dict[str, str], ...] = (
    {"title": "The Ones Who Walk Away from Omelas", "author": "Ursula K. Le Guin"},
    {"title": "The Lottery", "author": "Shirley Jackson"},
    {"title": "The Yellow Wallpaper", "author": "Charlotte Perkins Gilman"},
)


class EndingsConfig(_Strict):
    forecaster: str | None = None
    judge: str | None = None
    judge_prompt_version: str = "v1"
    allow_same_model: bool = False
    generators: list[str] = Field(default_factory=list)
    pipelines: list[str] = Field(default_factory=lambda: list(ENDINGS_PIPELINES))
    # steps to drop per pipeline (ablation), e.g. {beats: [plan]} or {warmup_beats: [adapt]}
    ablate: dict[str, list[str]] = Field(default_factory=dict)
    corpora: list[CorpusConfig] = Field(default_factory=list)
    # Table 2's reference rows: these corpora by name, in order (None: every measured corpus)
    reference_corpora: list[str] | None = None
    ideas_file: str | None = None
    min_words: NonNegativeInt = 500
    max_words: PositiveInt = 5000
    k: PositiveInt | None = None
    position_stride: PositiveInt | None = None
    max_positions_per_story: PositiveInt | None = None
    max_human_stories: PositiveInt | None = None
    n_ideas: PositiveInt | None = None
    forecast_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=1.2, top_p=0.95, max_tokens=150))
    judge_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=10))
    story_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.7, max_tokens=4000, min_p=0.1))
    judge_constrained_choice: bool = False   # opt-in closed {Y, N} decoding (judge id gets ":choice")
    repeats: PositiveInt = 1                 # forecast+judge repeats with different seeds (Table 7)
    reference_pool: list[ReferenceConfig] = Field(
        default_factory=lambda: [ReferenceConfig(**r) for r in DEFAULT_REFERENCE_POOL])
    reference_seed: int = 0                  # the warm-up reference is drawn per story from this seed
    plan_beats: PositiveInt | None = None    # "exactly N beats" in the plan prompts (None: model decides)
    rubric: RubricConfig | None = None

    @field_validator("pipelines")
    @classmethod
    def _known_pipeline(cls, v: list[str]) -> list[str]:
        bad = [p for p in v if p not in ENDINGS_PIPELINES]
        if bad:
            raise ValueError(f"unknown pipeline(s) {bad}; known: {list(ENDINGS_PIPELINES)}")
        return v

    @field_validator("ablate")
    @classmethod
    def _known_ablation(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for pipeline, drop in v.items():
            if pipeline not in ENDINGS_PIPELINE_STEPS:
                raise ValueError(f"unknown pipeline {pipeline!r}; known: {list(ENDINGS_PIPELINES)}")
            ablatable = set(ENDINGS_PIPELINE_STEPS[pipeline][:-1])
            bad = set(drop) - ablatable
            if bad:
                raise ValueError(f"{pipeline}: cannot ablate {sorted(bad)} (ablatable: {sorted(ablatable)})")
        return v

    @model_validator(mode="after")
    def _known_reference_corpora(self) -> "EndingsConfig":
        names = [c.name for c in self.corpora]
        bad = [n for n in self.reference_corpora or [] if n not in names]
        if bad:
            raise ValueError(f"endings.reference_corpora: unknown corpus name(s) {bad}; "
                             f"configured corpora (endings.corpora[].name): {names}")
        return self

    @property
    def same_model_judge(self) -> bool:
        return self.forecaster is not None and self.forecaster == self.judge

    def evaluators(self) -> dict[str, str | None]:
        """Config key -> model name of every evaluating role (kept apart from the generators)."""
        return {"endings.forecaster": self.forecaster, "endings.judge": self.judge,
                "endings.rubric.model": self.rubric.model if self.rubric else None}


class Settings(_Strict):
    profile: Profile = "demo"
    warehouse_path: str = ".wse/warehouse.duckdb"
    cache_dir: str = ".wse/llm_cache"
    artifacts_dir: str = ".wse/artifacts"
    prompts_dir: str | None = None  # optional folder of user prompt files, searched before the shipped ones
    use_cache: bool = True
    concurrency: dict[Backend, PositiveInt] = Field(default_factory=lambda: {"embedded": 1, "litellm": 8, "vllm": 1})
    rejudge_cron: str = "0 3 * * *"
    # `wse ui` serves the published plots here so they show inline on each asset's Overview
    # (see wse_platform/plot_server.py); 0 = no plot server, plots stay in a markdown dialog.
    plots_port: int = Field(default=3071, ge=0, le=65535)
    view_port: int = Field(default=3072, ge=0, le=65535)  # `wse view` on 127.0.0.1 (0: a free port)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    wse: WSEConfig = Field(default_factory=WSEConfig)
    ncp: NCPConfig = Field(default_factory=NCPConfig)
    endings: EndingsConfig = Field(default_factory=EndingsConfig)
    source_file: str | None = None  # where this was loaded from (informational)

    @field_validator("models", mode="before")
    @classmethod
    def _model_names(cls, v: Any) -> Any:
        for name in v if isinstance(v, dict) else ():
            _check_name("model name", name)
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "Settings":
        errors: list[str] = []

        def need(key: str, name: str | None) -> None:
            if name is not None and name not in self.models:
                errors.append(f"{key}: unknown model {name!r} (defined models: {sorted(self.models)})")

        for i, m in enumerate(self.wse.models):
            need(f"wse.models[{i}]", m)
        for role in ("consistency_judges", "richness_judges"):
            panel = getattr(self.wse, role)
            for i, member in enumerate(panel.members if panel is not None else []):
                need(f"wse.{role}[{i}].model", member.model)
        for group, members in self.wse.model_groups.items():
            for i, m in enumerate(members):
                if m not in self.wse.models:
                    errors.append(f"wse.model_groups.{group}[{i}]: {m!r} is not in wse.models")
        for i, m in enumerate(self.ncp.narrators):
            need(f"ncp.narrators[{i}]", m)
        need("ncp.player_model", self.ncp.player_model)
        if self.ncp.auditor is not None:
            need("ncp.auditor.model", self.ncp.auditor.model)
        for i, a in enumerate(self.ncp.reaudit_auditors):
            need(f"ncp.reaudit_auditors[{i}].model", a.model)
        for i, m in enumerate(self.ncp.extraction_models):
            need(f"ncp.extraction_models[{i}]", m)
        if self.ncp.ablation is not None:
            need("ncp.ablation.narrator", self.ncp.ablation.narrator)
            for i, a in enumerate(self.ncp.ablation.auditors):
                need(f"ncp.ablation.auditors[{i}].model", a.model)
            if self.ncp.ablation.arch not in NCP_KNOWN_ARCHITECTURES:
                errors.append(f"ncp.ablation.arch: unknown architecture {self.ncp.ablation.arch!r}")
        need("endings.forecaster", self.endings.forecaster)
        need("endings.judge", self.endings.judge)
        for i, m in enumerate(self.endings.generators):
            need(f"endings.generators[{i}]", m)
        if self.endings.same_model_judge and not self.endings.allow_same_model:
            errors.append("endings.judge: the judge must be a different model from endings.forecaster "
                          f"({self.endings.judge!r}); set endings.allow_same_model: true to accept it "
                          "(results are then marked same_model_judge)")
        if self.endings.rubric is not None:
            need("endings.rubric.model", self.endings.rubric.model)
        if not self.endings.allow_same_model:   # the paper keeps generator and evaluator models apart
            gen_ids = {self.models[g].model_id: g for g in self.endings.generators if g in self.models}
            for key, name in self.endings.evaluators().items():
                m = self.models.get(name) if name else None
                if m is not None and m.model_id in gen_ids:
                    errors.append(f"{key}: model {name!r} has the same model_id {m.model_id!r} as the story "
                                  f"generator {gen_ids[m.model_id]!r}; evaluators must differ from generators "
                                  "(set endings.allow_same_model: true to accept it)")
        if errors:
            raise ValueError("; ".join(errors))
        self._endings_thinking_off()
        return self

    def _endings_thinking_off(self) -> None:
        """100-Endings runs every model without thinking (forecaster App. C.4, judge C.5, story
        pipeline D.1 / Table 8): a litellm / vLLM model of those roles whose config leaves
        `reasoning` unset gets `off` (an explicit `reasoning:` is kept)."""
        e = self.endings
        for name in sorted({e.forecaster, e.judge, *e.generators} - {None}):
            m = self.models.get(name)
            if m is not None and m.reasoning is None and m.backend in ("litellm", "vllm"):
                self.models[name] = m.model_copy(update={"reasoning": "off"})

    # ---- convenience -------------------------------------------------
    def model(self, name: str) -> ModelConfig:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined models: {sorted(self.models)}") from None

    def resolve_path(self, p: str, output: bool = False) -> Path:
        """A relative path is taken relative to the config file; an input that does not exist
        there but does in the repository (shipped data such as ``data/stories/...``) is taken
        from the repository, so a config copied elsewhere still finds the shipped data. Outputs
        (warehouse, cache, artifacts) never fall back: a new folder gets its own, even when the
        repository already holds a `.wse/` of its own."""
        path = Path(p).expanduser()
        if path.is_absolute():
            return path
        base = Path(self.source_file).parent if self.source_file else Path.cwd()
        resolved = (base / path).resolve()
        if not output and not resolved.exists() and (REPO_ROOT / path).exists():
            return (REPO_ROOT / path).resolve()
        return resolved

    @property
    def dagster_home(self) -> Path:
        """The Dagster instance every `wse` command uses: $DAGSTER_HOME, else next to the warehouse."""
        return Path(os.environ.get("DAGSTER_HOME") or self.warehouse.parent / "dagster_home")

    @property
    def warehouse(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_WAREHOUSE", self.warehouse_path), output=True)

    @property
    def cache(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_CACHE_DIR", self.cache_dir), output=True)

    @property
    def artifacts(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_ARTIFACTS_DIR", self.artifacts_dir), output=True)

    def fingerprint(self, *parts: Any) -> str:
        """Short stable hash of JSON-able parts (config slices, prompt hashes...)."""
        blob = json.dumps(parts, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# `profile: quick` is the quick demo's scale: the `demo` profile's values with the overlay file
# below on top (what `wse demo` runs on the shipped wse.yaml, in a few minutes on a CPU).
QUICK_PROFILE_FILE = Path(__file__).resolve().parent / "defaults" / "demo-quick.yaml"
# A profile's list of ids is not applied where the config sets the count it would fight with
# (`wse.n_seeds: 5` under the quick profile runs the first five seeds, not its one `seed_ids`).
PROFILE_KEY_UNLESS: dict[str, dict[str, str]] = {"wse": {"seed_ids": "n_seeds"}, "ncp": {"spec_ids": "n_specs"}}


def profile_scale(profile: str) -> dict[str, dict[str, Any]] | None:
    """The scale settings a profile fills in (None: no such profile)."""
    if profile != "quick":
        return SCALE_PROFILES.get(profile)
    overlay = yaml.safe_load(QUICK_PROFILE_FILE.read_text(encoding="utf-8")) or {}
    return {sec: {**SCALE_PROFILES["demo"].get(sec, {}), **(overlay.get(sec) or {})}
            for sec in {*SCALE_PROFILES["demo"], *overlay}}


def _apply_profile(raw: dict[str, Any]) -> dict[str, Any]:
    scale = profile_scale(raw.get("profile", "demo"))
    if scale is None:
        return raw  # pydantic reports the bad profile
    out = dict(raw)
    for section, defaults in scale.items():
        sec = dict(out.get(section) or {})
        unless, explicit = PROFILE_KEY_UNLESS.get(section, {}), set(sec)
        for k, v in defaults.items():
            if unless.get(k) not in explicit:
                sec.setdefault(k, v)
        out[section] = sec
    return out


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] in ("greater_than", "greater_than_equal"):
            msg = f"{msg} (got {e.get('input')!r})"
        lines.append(f"  {key}: {msg}")
    return "\n".join(lines)


def settings_from_dict(raw: dict[str, Any], source: str = "<dict>") -> Settings:
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid configuration in {source}: the top level must be a mapping")
    data = _apply_profile(raw)
    if source != "<dict>":
        data.setdefault("source_file", source)
    try:
        return Settings(**data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_settings(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Load and validate the config: `path`, else $WSE_CONFIG, else ./wse.yaml, else the shipped default.

    A file named explicitly (`path` or $WSE_CONFIG) must exist: falling back to the shipped demo
    config would silently run a different experiment."""
    env = os.environ.get("WSE_CONFIG") or None
    for named, how in ((path, "$WSE_CONFIG" if path and str(path) == env else "--config"),
                       (None if path else env, "$WSE_CONFIG")):
        if named and not Path(named).is_file():
            problem = ("is a directory, not a file" if Path(named).is_dir() else
                       "is not a regular file (a FIFO, socket or device)" if Path(named).exists() else "does not exist")
            raise ConfigError(f"config file {named} (from {how}) {problem}; fix the path, or drop {how} "
                              "to use ./wse.yaml or the shipped demo config")
    candidates = [path, env, Path.cwd() / "wse.yaml", DEFAULT_CONFIG]
    chosen = next((Path(c) for c in candidates if c and Path(c).exists()), None)
    if chosen is None:
        raise ConfigError(f"no configuration file found (tried {[str(c) for c in candidates if c]})")
    raw = read_config_file(chosen)
    if overrides:
        raw = _deep_merge(raw, overrides)
    return settings_from_dict(raw, str(chosen.resolve()))


def read_config_file(path: Path) -> dict[str, Any]:
    """The parsed config file: a regular file of at most MAX_CONFIG_BYTES, YAML whose aliases expand
    to at most MAX_YAML_NODES nodes (refused quickly, with the limit named, instead of hanging)."""
    from wse_platform.inputs import InputFileError, YAMLTooLarge, load_yaml, read_input_text

    try:
        text = read_input_text(path, what="config file", max_bytes=MAX_CONFIG_BYTES)
    except InputFileError as err:
        if "larger than" in str(err):
            raise ConfigError(f"config file {path}: {path.stat().st_size / 1024 / 1024:,.1f} MiB is larger than the "
                              f"limit of {MAX_CONFIG_BYTES // 1024 // 1024} MiB (config.MAX_CONFIG_BYTES); a config "
                              "holds settings, not data: put large inputs in the files it names") from None
        raise ConfigError(str(err)) from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {path}: not UTF-8 ({err.reason} at byte {err.start})") from None
    try:
        return load_yaml(text) or {}
    except YAMLTooLarge as err:
        raise ConfigError(f"config file {path}: refused: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid YAML in {path}: {err}") from None


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
