"""Story-generation pipelines of the 100-Endings benchmark: vanilla, beats, warmup_beats.

Each pipeline is a list of named steps that read and write one shared `StoryContext`
(the idea, the reference story and its beats, the plan, the story), so any step can
be dropped (`ablate=`) and the later steps use whatever the context holds:

- ``vanilla``      = [write]                      story straight from the idea
- ``beats``        = [plan, write]                thick beat plan from the idea, then the story
- ``warmup_beats`` = [extract, adapt, write]      7 scene beats of a reference story, adapted
                                                  to the idea, then the story

``write`` uses the beats if the context has any (the adapted or planned beats, or, with
``adapt`` ablated, the reference's own beats) and the vanilla prompt otherwise.
``adapt`` cannot run without ``extract`` (nothing to adapt): asking for that is an error.

All ideas advance one step at a time in one `complete_many` batch. Stories shorter
than `min_chars` are discarded and regenerated with a different seed, at most
`max_story_attempts` times, then recorded as a failure (never kept, never padded).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wse_platform.config import ENDINGS_PIPELINE_STEPS
from wse_platform.endings.corpus import count_words
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Sampling
from wse_platform.prompts import get_prompt

PIPELINE_STEPS: dict[str, tuple[str, ...]] = ENDINGS_PIPELINE_STEPS  # defined once, in the config module
MIN_STORY_CHARS = 200
MAX_STORY_ATTEMPTS = 3
SCENE_BEATS = 7

# ---- story ideas ---------------------------------------------------------------------


class ReferenceSpec(BaseModel):
    """The warm-up story: recalled from its title, or given in full from a text file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["title", "full_text"]
    title: str = Field(min_length=1)
    author: str | None = None
    file: str | None = None  # full_text mode: path relative to the ideas file


class StoryIdea(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    genre: str = Field(min_length=1)
    characters: list[str] = Field(min_length=1)
    setting: str = Field(min_length=1)
    constraints: list[str] = Field(default_factory=list)
    reference: ReferenceSpec | None = None

    def render(self) -> str:
        lines = [f"Genre: {self.genre}", f"Characters: {'; '.join(self.characters)}", f"Setting: {self.setting}"]
        if self.constraints:
            lines.append(f"Constraints: {'; '.join(self.constraints)}")
        return "\n".join(lines)


class IdeasFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    warmup_reference: ReferenceSpec | None = None
    ideas: list[StoryIdea] = Field(min_length=1)


class IdeasError(ValueError):
    pass


def load_ideas(path: str | Path) -> tuple[list[StoryIdea], Path]:
    """Validated ideas (each with its resolved reference) and the folder references resolve from.

    Errors name the file, the idea (index and id) and the field.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise IdeasError(f"{path}: cannot read story ideas: {err}") from None
    try:
        parsed = IdeasFile.model_validate(raw)
    except ValidationError as err:
        msgs = []
        for e in err.errors():
            loc = list(e["loc"])
            where = ".".join(str(p) for p in loc)
            if len(loc) >= 2 and loc[0] == "ideas" and isinstance(loc[1], int):
                idea_id = ((raw or {}).get("ideas") or [{}])[loc[1]]
                idea_id = idea_id.get("id") if isinstance(idea_id, dict) else None
                where += f" (idea {idea_id!r})" if idea_id else ""
            msgs.append(f"{where}: {e['msg']}")
        raise IdeasError(f"{path}: invalid story ideas: " + "; ".join(msgs)) from None
    seen: set[str] = set()
    ideas = []
    for i, idea in enumerate(parsed.ideas):
        if idea.id in seen:
            raise IdeasError(f"{path}: ideas[{i}].id: duplicate id {idea.id!r}")
        seen.add(idea.id)
        ref = idea.reference or parsed.warmup_reference
        if ref is not None and ref.mode == "full_text":
            if not ref.file:
                raise IdeasError(f"{path}: ideas[{i}] ({idea.id!r}): full_text reference needs 'file'")
            if not (path.parent / ref.file).is_file():
                raise IdeasError(f"{path}: ideas[{i}] ({idea.id!r}): reference file {ref.file!r} not found "
                                 f"(relative to {path.parent})")
        ideas.append(idea.model_copy(update={"reference": ref}))
    return ideas, path.parent


# ---- LLM output models ----------------------------------------------------------------


# Field length caps become `maxLength` in the JSON schema: grammar-constrained small models
# then cannot loop inside one string until max_tokens (seen with SmolLM2-135M), and a beat
# is a few sentences at most for any model.
BEAT_FIELD_MAX_CHARS = 600
_BeatText = Field(min_length=1, max_length=BEAT_FIELD_MAX_CHARS)


class PlanBeat(BaseModel):
    narrative_function: str = _BeatText
    revealed: str = _BeatText
    withheld: str = _BeatText
    tension_mechanism: str = _BeatText
    stakes: str = _BeatText


class BeatPlan(BaseModel):
    """Step 1 of `beats`: the thick plan written from the idea alone."""

    beats: list[PlanBeat] = Field(min_length=3, max_length=12)


class SceneBeat(BaseModel):
    action: str = _BeatText
    technique: str = _BeatText
    memorable: str = _BeatText


class SceneBeats(BaseModel):
    """Step 0 (reference) and step 1 (adapted) of `warmup_beats`: exactly 7 scene beats."""

    beats: list[SceneBeat] = Field(min_length=SCENE_BEATS, max_length=SCENE_BEATS)


def render_beats(beats: Sequence[dict[str, Any]]) -> str:
    """Numbered plain-text beats for the writing prompt (small models read this better than JSON)."""
    lines = []
    for i, beat in enumerate(beats, 1):
        parts = [f"{k.replace('_', ' ')}: {v}" for k, v in beat.items()]
        lines.append(f"{i}. " + " | ".join(parts))
    return "\n".join(lines)


# ---- shared context -------------------------------------------------------------------


@dataclass
class StepRecord:
    step: str
    prompt_id: str
    ok: bool
    call_ids: list[str] = field(default_factory=list)
    attempts: int = 1


@dataclass
class StoryContext:
    """Everything one idea's run has produced so far; every step reads and extends it."""

    idea: StoryIdea
    reference_text: str | None = None
    reference_beats: list[dict[str, Any]] | None = None
    beats: list[dict[str, Any]] | None = None
    story: str | None = None
    steps: list[StepRecord] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    discarded_lengths: list[int] = field(default_factory=list)

    @property
    def reference(self) -> ReferenceSpec | None:
        return self.idea.reference

    @property
    def alive(self) -> bool:
        return self.failure is None


@dataclass
class PipelineOptions:
    model: str
    sampling: Sampling = field(default_factory=Sampling)
    prompt_version: str = "v1"
    prompts_dir: str | None = None
    min_chars: int = MIN_STORY_CHARS
    max_story_attempts: int = MAX_STORY_ATTEMPTS
    base_seed: int = 0  # regeneration attempt a uses seed base_seed + a - 1
    tags: dict[str, str] = field(default_factory=dict)


def pipeline_steps(pipeline: str, ablate: Iterable[str] = ()) -> tuple[str, ...]:
    """The steps a pipeline runs after ablation; refuses combinations that cannot run."""
    if pipeline not in PIPELINE_STEPS:
        raise ValueError(f"unknown pipeline {pipeline!r}; known: {sorted(PIPELINE_STEPS)}")
    ablate = set(ablate)
    unknown = ablate - set(PIPELINE_STEPS[pipeline])
    if unknown:
        raise ValueError(f"pipeline {pipeline!r} has no step(s) {sorted(unknown)} to ablate "
                         f"(steps: {list(PIPELINE_STEPS[pipeline])})")
    if "write" in ablate:
        raise ValueError("the 'write' step produces the story and cannot be ablated")
    steps = tuple(s for s in PIPELINE_STEPS[pipeline] if s not in ablate)
    if "adapt" in steps and "extract" not in steps:
        raise ValueError("step 'adapt' needs step 'extract' (there is no reference beat sheet to adapt); "
                         "ablate both, or only 'adapt'")
    return steps


# ---- steps: each builds one request from the context and absorbs its result -------------


def _prompt(role: str, opts: PipelineOptions):
    return get_prompt(role, opts.prompt_version, opts.prompts_dir)


def _request(role: str, messages: list[dict[str, str]], opts: PipelineOptions, ctx: StoryContext, step: str,
             output_model: type[BaseModel] | None = None, sampling: Sampling | None = None,
             extra_tags: dict[str, str] | None = None) -> LLMRequest:
    prompt = _prompt(role, opts)
    tags = {**opts.tags, "idea_id": ctx.idea.id, "step": step, **(extra_tags or {})}
    return LLMRequest(role=role, model=opts.model, messages=messages, sampling=sampling or opts.sampling,
                      output_model=output_model, prompt_version=prompt.id, tags=tags)


def _extract_request(ctx: StoryContext, opts: PipelineOptions) -> LLMRequest:
    ref = ctx.reference
    if ref is None:
        raise ValueError(f"idea {ctx.idea.id!r}: warmup step 'extract' needs a reference story "
                         "(set `reference` on the idea or `warmup_reference` in the ideas file)")
    author = f" by {ref.author}" if ref.author else ""
    if ref.mode == "full_text":
        material = f"Full text of the story{author}:\n\n{ctx.reference_text}"
    else:
        material = f"(The story{author} is not given here: work from what you know of it.)"
    messages = _prompt("endings.warmup_extract", opts).render(reference_title=ref.title, reference_material=material)
    return _request("endings.warmup_extract", messages, opts, ctx, "extract", SceneBeats)


def _adapt_request(ctx: StoryContext, opts: PipelineOptions) -> LLMRequest:
    messages = _prompt("endings.warmup_adapt", opts).render(
        idea=ctx.idea.render(), reference_beats=render_beats(ctx.reference_beats or []))
    return _request("endings.warmup_adapt", messages, opts, ctx, "adapt", SceneBeats)


def _plan_request(ctx: StoryContext, opts: PipelineOptions) -> LLMRequest:
    messages = _prompt("endings.beats_plan", opts).render(idea=ctx.idea.render())
    return _request("endings.beats_plan", messages, opts, ctx, "plan", BeatPlan)


def _write_request(ctx: StoryContext, opts: PipelineOptions, attempt: int) -> LLMRequest:
    beats = ctx.beats if ctx.beats is not None else ctx.reference_beats
    if beats is not None:
        role = "endings.story_from_beats"
        messages = _prompt(role, opts).render(idea=ctx.idea.render(), beats=render_beats(beats))
    else:
        role = "endings.story_vanilla"
        messages = _prompt(role, opts).render(idea=ctx.idea.render())
    # A regeneration must be a different request (else the cache returns the same short story).
    sampling = opts.sampling if attempt == 1 else opts.sampling.model_copy(
        update={"seed": opts.base_seed + attempt - 1})
    return _request(role, messages, opts, ctx, "write", None, sampling, {"story_attempt": str(attempt)})


def _fail(ctx: StoryContext, step: str, failure: LLMFailure | dict[str, Any]) -> None:
    data = failure.model_dump() if isinstance(failure, LLMFailure) else dict(failure)
    ctx.failure = {"step": step, **data}


def _absorb_beats(ctx: StoryContext, step: str, req: LLMRequest, res: LLMResult) -> None:
    ctx.steps.append(StepRecord(step, req.prompt_version or req.role, res.ok, list(res.call_ids), res.attempts))
    if not res.ok:
        _fail(ctx, step, res.failure)
        return
    beats = [b.model_dump() for b in res.output.beats]
    if step == "extract":
        ctx.reference_beats = beats
    else:
        ctx.beats = beats


# ---- running ------------------------------------------------------------------------


def run_pipeline(client: Any, ideas: Sequence[StoryIdea], pipeline: str, opts: PipelineOptions,
                 ablate: Iterable[str] = (), reference_root: str | Path | None = None) -> list[StoryContext]:
    """Run `pipeline` for every idea; returns one context per idea (story set, or failure set).

    `client` is an `LLMClient` (anything with `complete_many(list[LLMRequest])`).
    `reference_root` is the folder that full-text reference paths are relative to.
    """
    steps = pipeline_steps(pipeline, ablate)
    contexts = [StoryContext(idea=i) for i in ideas]
    if "extract" in steps:
        for ctx in contexts:
            ref = ctx.reference
            if ref is not None and ref.mode == "full_text":
                root = Path(reference_root) if reference_root is not None else Path.cwd()
                ctx.reference_text = (root / str(ref.file)).read_text(encoding="utf-8").strip()
    builders = {"extract": _extract_request, "adapt": _adapt_request, "plan": _plan_request}
    for step in steps:
        live = [c for c in contexts if c.alive]
        if not live:
            break
        if step == "write":
            _write_stories(client, live, opts)
            continue
        reqs = [builders[step](c, opts) for c in live]
        for ctx, req, res in zip(live, reqs, client.complete_many(reqs)):
            _absorb_beats(ctx, step, req, res)
    return contexts


def _write_stories(client: Any, contexts: list[StoryContext], opts: PipelineOptions) -> None:
    pending = list(contexts)
    for attempt in range(1, opts.max_story_attempts + 1):
        if not pending:
            return
        reqs = [_write_request(c, opts, attempt) for c in pending]
        retry = []
        for ctx, req, res in zip(pending, reqs, client.complete_many(reqs)):
            ctx.steps.append(StepRecord("write", req.prompt_version or req.role, res.ok, list(res.call_ids),
                                        res.attempts))
            if not res.ok:
                _fail(ctx, "write", res.failure)
                continue
            text = str(res.output).strip()
            if len(text) < opts.min_chars:
                ctx.discarded_lengths.append(len(text))
                retry.append(ctx)
            else:
                ctx.story = text
        pending = retry
    for ctx in pending:
        _fail(ctx, "write", {
            "error_kind": "story_too_short",
            "message": f"every story was shorter than {opts.min_chars} characters after "
                       f"{opts.max_story_attempts} attempts (lengths {ctx.discarded_lengths})",
            "attempts": opts.max_story_attempts,
        })


def story_rows(contexts: Sequence[StoryContext], set_key: str, model: str, pipeline: str,
               same_model_judge: bool) -> list[dict[str, Any]]:
    """`endings_stories` rows for a generated set: one per idea, failures included (not measured)."""
    rows = []
    for ctx in contexts:
        ref = ctx.reference if any(s.step == "extract" for s in ctx.steps) else None
        beats = ctx.beats if ctx.beats is not None else ctx.reference_beats
        ok = ctx.story is not None
        rows.append({
            "story_id": f"{set_key}/{ctx.idea.id}", "set_key": set_key, "corpus": set_key,
            "quality_tier": "generated", "generator_model": model, "pipeline": pipeline,
            "title": None, "author": model, "source": f"generated by {model} with pipeline {pipeline}",
            "license": None, "file": None,
            "n_words": count_words(ctx.story) if ok else 0, "text": ctx.story,
            "included": ok, "exclusion_reason": None if ok else f"generation failed at step {ctx.failure['step']}",
            "same_model_judge": same_model_judge, "idea_id": ctx.idea.id,
            "beats_json": json.dumps(beats) if beats is not None else None,
            "reference_beats_json": json.dumps(ctx.reference_beats) if ctx.reference_beats is not None else None,
            "reference_title": ref.title if ref else None, "reference_mode": ref.mode if ref else None,
            "steps_json": json.dumps([s.__dict__ for s in ctx.steps]),
            "failure_json": json.dumps(ctx.failure) if ctx.failure else None,
        })
    return rows


def ideas_path(settings: Any) -> Path:
    """The configured ideas file (`endings.ideas_file`, relative to the config) or the shipped one."""
    from wse_platform.config import DATA_DIR

    if settings.endings.ideas_file:
        return settings.resolve_path(settings.endings.ideas_file)
    return DATA_DIR / "story_ideas.yaml"


def generate_set(client: Any, settings: Any, model: str, pipeline: str, set_key: str,
                 ablate: Iterable[str] = ()) -> list[dict[str, Any]]:
    """`endings_stories` rows of one generated set: the first `endings.n_ideas` ideas through `pipeline`."""
    ideas, root = load_ideas(ideas_path(settings))
    n = settings.endings.n_ideas
    ideas = ideas if n is None else ideas[:n]
    sampling = settings.endings.story_sampling
    base_seed = sampling.seed if sampling.seed is not None else (settings.model(model).sampling.seed or 0)
    opts = PipelineOptions(model=model, sampling=sampling, prompts_dir=settings.prompts_dir, base_seed=base_seed,
                           tags={"set_key": set_key})
    contexts = run_pipeline(client, ideas, pipeline, opts, ablate=ablate, reference_root=root)
    return story_rows(contexts, set_key, model, pipeline, settings.endings.same_model_judge)
