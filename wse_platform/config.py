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
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from wse_platform.llm.types import Sampling

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_CONFIG = REPO_ROOT / "wse.yaml"

Backend = Literal["embedded", "litellm", "vllm"]
Profile = Literal["demo", "paper"]

# B_b (+WMEM) (+WMOD): b=1 no character agent, 2 one centralized, 3 four distributed.
WSE_ARCHITECTURES: tuple[str, ...] = tuple(
    f"B{b}" + ("+WMEM" if w else "") + ("+WMOD" if p else "")
    for b in (1, 2, 3) for w in (False, True) for p in (False, True)
)
NCP_ARCHITECTURES: tuple[str, ...] = ("baseline+adversarial", "baseline+natural", "memory+adversarial")
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
        "ncp": {"t_max": 100, "n_specs": 100, "n_extraction_specs": 100},
        "endings": {"k": 100, "position_stride": 1, "max_positions_per_story": None, "max_human_stories": None,
                    "n_ideas": None},
    },
}


class ConfigError(ValueError):
    """A configuration problem; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    backend: Backend
    model_id: str                     # backend model id (litellm provider string, GGUF name, HF id for vLLM)
    revision: str | None = None
    quantization: str | None = None
    api_base: str | None = None       # e.g. http://127.0.0.1:8000/v1 for hosted_vllm/...
    api_key_env: str | None = None    # NAME of the env var holding the key, never the key itself
    sampling: Sampling = Field(default_factory=Sampling)
    params_b: float | None = None     # parameter count in billions (scaling fits)
    family: str | None = None         # e.g. "qwen3-dense"
    price_in_per_token: float | None = None
    price_out_per_token: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)  # backend-specific (n_ctx, tensor_parallel_size...)

    def identity(self) -> dict[str, Any]:
        """What determines this model's outputs (for staleness). `extra` is included: backend
        options such as n_ctx or repeat_penalty change answers; `api_base` does not."""
        return {
            "backend": self.backend, "model_id": self.model_id, "revision": self.revision,
            "quantization": self.quantization, "sampling": self.sampling.model_dump(), "extra": self.extra,
        }


class JudgeConfig(_Strict):
    model: str
    prompt_version: str = "v1"
    count: int = 1

    def judge_id(self, role: str) -> str:
        """Stable id of this judge configuration, carried by every verdict row."""
        return f"{role}:{self.model}:{self.prompt_version}:x{self.count}"


class WSEConfig(_Strict):
    models: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=lambda: list(WSE_ARCHITECTURES))
    horizon: int | None = None
    n_seeds: int | None = None
    bootstrap_draws: int | None = None
    bootstrap_seed: int = 20_260_815
    consistency_judge: JudgeConfig | None = None
    richness_judge: JudgeConfig | None = None
    model_groups: dict[str, list[str]] = Field(default_factory=dict)
    construction_model: str | None = None  # optional model for openings; must not be evaluated
    sampling: Sampling = Field(default_factory=Sampling)

    @field_validator("architectures")
    @classmethod
    def _known_arch(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in WSE_ARCHITECTURES]
        if bad:
            raise ValueError(f"unknown architecture(s) {bad}; known: {list(WSE_ARCHITECTURES)}")
        return v


class NCPConfig(_Strict):
    narrators: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=lambda: list(NCP_ARCHITECTURES))
    player_model: str | None = None
    auditor: JudgeConfig | None = None
    reaudit_auditors: list[JudgeConfig] = Field(default_factory=list)
    extraction_models: list[str] = Field(default_factory=list)
    t_max: int | None = None
    n_specs: int | None = None
    n_extraction_specs: int | None = None
    sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.6, top_p=0.95, max_tokens=8092))
    extraction_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=1024))

    @field_validator("architectures")
    @classmethod
    def _known_arch(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in NCP_ARCHITECTURES]
        if bad:
            raise ValueError(f"unknown architecture(s) {bad}; known: {list(NCP_ARCHITECTURES)}")
        return v


class CorpusConfig(_Strict):
    name: str
    path: str
    quality_tier: str = "human"


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
    ideas_file: str | None = None
    min_words: int = 500
    max_words: int = 5000
    k: int | None = None
    position_stride: int | None = None
    max_positions_per_story: int | None = None
    max_human_stories: int | None = None
    n_ideas: int | None = None
    forecast_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=1.2, top_p=0.95, max_tokens=150))
    judge_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=10))
    story_sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.7, max_tokens=4000, min_p=0.1))

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

    @property
    def same_model_judge(self) -> bool:
        return self.forecaster is not None and self.forecaster == self.judge


class Settings(_Strict):
    profile: Profile = "demo"
    warehouse_path: str = ".wse/warehouse.duckdb"
    cache_dir: str = ".wse/llm_cache"
    artifacts_dir: str = ".wse/artifacts"
    prompts_dir: str | None = None  # optional folder of user prompt files, searched before the shipped ones
    use_cache: bool = True
    concurrency: dict[str, int] = Field(default_factory=lambda: {"embedded": 1, "litellm": 8, "vllm": 1})
    rejudge_cron: str = "0 3 * * *"
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    wse: WSEConfig = Field(default_factory=WSEConfig)
    ncp: NCPConfig = Field(default_factory=NCPConfig)
    endings: EndingsConfig = Field(default_factory=EndingsConfig)
    source_file: str | None = None  # where this was loaded from (informational)

    @model_validator(mode="after")
    def _cross_checks(self) -> "Settings":
        errors: list[str] = []

        def need(key: str, name: str | None) -> None:
            if name is not None and name not in self.models:
                errors.append(f"{key}: unknown model {name!r} (defined models: {sorted(self.models)})")

        for i, m in enumerate(self.wse.models):
            need(f"wse.models[{i}]", m)
        for role in ("consistency_judge", "richness_judge"):
            j = getattr(self.wse, role)
            if j is not None:
                need(f"wse.{role}.model", j.model)
        need("wse.construction_model", self.wse.construction_model)
        if self.wse.construction_model and self.wse.construction_model in self.wse.models:
            errors.append("wse.construction_model: must not be one of the evaluated wse.models "
                          f"({self.wse.construction_model!r})")
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
        need("endings.forecaster", self.endings.forecaster)
        need("endings.judge", self.endings.judge)
        for i, m in enumerate(self.endings.generators):
            need(f"endings.generators[{i}]", m)
        if self.endings.same_model_judge and not self.endings.allow_same_model:
            errors.append("endings.judge: the judge must be a different model from endings.forecaster "
                          f"({self.endings.judge!r}); set endings.allow_same_model: true to accept it "
                          "(results are then marked same_model_judge)")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    # ---- convenience -------------------------------------------------
    def model(self, name: str) -> ModelConfig:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined models: {sorted(self.models)}") from None

    def resolve_path(self, p: str) -> Path:
        """A relative path is taken relative to the config file; an input that does not exist
        there but does in the repository (shipped data such as ``data/stories/...``) is taken
        from the repository, so a config copied elsewhere still finds the shipped data."""
        path = Path(p).expanduser()
        if path.is_absolute():
            return path
        base = Path(self.source_file).parent if self.source_file else Path.cwd()
        resolved = (base / path).resolve()
        if not resolved.exists() and (REPO_ROOT / path).exists():
            return (REPO_ROOT / path).resolve()
        return resolved

    @property
    def warehouse(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_WAREHOUSE", self.warehouse_path))

    @property
    def cache(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_CACHE_DIR", self.cache_dir))

    @property
    def artifacts(self) -> Path:
        return self.resolve_path(os.environ.get("WSE_ARTIFACTS_DIR", self.artifacts_dir))

    def fingerprint(self, *parts: Any) -> str:
        """Short stable hash of JSON-able parts (config slices, prompt hashes...)."""
        blob = json.dumps(parts, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _apply_profile(raw: dict[str, Any]) -> dict[str, Any]:
    profile = raw.get("profile", "demo")
    scale = SCALE_PROFILES.get(profile)
    if scale is None:
        return raw  # pydantic reports the bad profile
    out = dict(raw)
    for section, defaults in scale.items():
        sec = dict(out.get(section) or {})
        for k, v in defaults.items():
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
    """Load and validate the config: `path`, else $WSE_CONFIG, else ./wse.yaml, else the shipped default."""
    candidates = [path, os.environ.get("WSE_CONFIG"), Path.cwd() / "wse.yaml", DEFAULT_CONFIG]
    chosen = next((Path(c) for c in candidates if c and Path(c).exists()), None)
    if chosen is None:
        raise ConfigError(f"no configuration file found (tried {[str(c) for c in candidates if c]})")
    try:
        raw = yaml.safe_load(chosen.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid YAML in {chosen}: {err}") from None
    if overrides:
        raw = _deep_merge(raw, overrides)
    return settings_from_dict(raw, str(chosen.resolve()))


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
