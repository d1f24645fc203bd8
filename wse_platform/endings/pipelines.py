"""Story-generation pipelines of the 100-Endings benchmark: vanilla, beats, warmup_beats.

Each pipeline is a list of named steps (config `ENDINGS_PIPELINE_STEPS`); any step but
``write`` can be dropped (`ablate=`):

- ``vanilla``      = [write]                      the idea as the single user turn, no system message
- ``beats``        = [plan, write]                thick plan from the idea alone, then the story
- ``warmup_beats`` = [extract, adapt, write]      free-text warm-up on a reference story (7 beats:
                                                  action, technique, why memorable, + the narrative
                                                  trick), the thick plan adapted to the idea, the story

As in the paper, all steps of one story are ONE conversation: each step's request carries the
earlier steps' user turns and the model's answers, then its own user turn; the step's own
system message (the writing step's stresses sustaining tension) heads the thread. Plans and
warm-ups are free text (the paper passes them on verbatim). The warm-up reference is drawn at
random per story (seeded by `reference_seed`, the set and the idea) from `reference_pool`,
unless the idea pins one. Stories shorter than `min_chars` are discarded and regenerated with a
different seed, at most `max_story_attempts` times, then recorded as a failure.
"""
from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wse_platform.config import ENDINGS_PIPELINE_STEPS
from wse_platform.endings.corpus import count_words, prose_problem
from wse_platform.endings.ideas import IdeasError, Reference, StoryIdea, load_ideas  # noqa: F401 (re-export)
from wse_platform.inputs import InputFileError, check_input, read_input_text
from wse_platform.llm.limiter import expect
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Sampling
from wse_platform.prompts import get_prompt

PIPELINE_STEPS: dict[str, tuple[str, ...]] = ENDINGS_PIPELINE_STEPS  # defined once, in the config module
MIN_STORY_CHARS = 200
MAX_STORY_ATTEMPTS = 3


def draw_reference(pool: Sequence[Reference], seed: int, set_key: str, idea_id: str) -> Reference | None:
    """The warm-up reference of one story: a seeded draw from the pool (same inputs, same draw)."""
    if not pool:
        return None
    return random.Random(f"{seed}|{set_key}|{idea_id}").choice(list(pool))


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
    """Everything one idea's run has produced so far; `turns` is the shared conversation."""

    idea: StoryIdea
    reference: Reference | None = None
    reference_text: str | None = None
    warmup: str | None = None
    plan: str | None = None
    story: str | None = None
    turns: list[dict[str, str]] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    discarded_lengths: list[int] = field(default_factory=list)

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
    plan_beats: int | None = None          # "exactly N beats" in the plan prompts
    reference_pool: Sequence[Reference] = ()
    reference_seed: int = 0
    set_key: str = ""
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


def _threaded(ctx: StoryContext, rendered: list[dict[str, str]]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(request messages, this step's new turns): own system first, then the thread, then own turns."""
    system = [m for m in rendered if m["role"] == "system"]
    own = [m for m in rendered if m["role"] != "system"]
    return system + ctx.turns + own, own


def _request(role: str, values: dict[str, Any], opts: PipelineOptions, ctx: StoryContext, step: str,
             sampling: Sampling | None = None, extra_tags: dict[str, str] | None = None
             ) -> tuple[LLMRequest, list[dict[str, str]]]:
    prompt = get_prompt(role, opts.prompt_version, opts.prompts_dir)
    messages, own = _threaded(ctx, prompt.render(**values))
    tags = {**opts.tags, "idea_id": ctx.idea.id, "step": step, **(extra_tags or {})}
    return LLMRequest(role=role, model=opts.model, messages=messages, sampling=sampling or opts.sampling,
                      prompt_version=prompt.id, tags=tags), own


def _beats_constraint(opts: PipelineOptions) -> str:
    return f" Use exactly {opts.plan_beats} beats." if opts.plan_beats else ""


def _extract_request(ctx: StoryContext, opts: PipelineOptions):
    ref = ctx.reference
    if ref is None:
        raise ValueError(f"idea {ctx.idea.id!r}: warm-up step 'extract' needs a reference story "
                         "(endings.reference_pool is empty and the idea pins none)")
    if ref.mode == "full_text":
        return _request("endings.warmup_text", {"reference_text": ctx.reference_text}, opts, ctx, "extract")
    return _request("endings.warmup_title", {"reference": ref.label}, opts, ctx, "extract")


def _adapt_request(ctx: StoryContext, opts: PipelineOptions):
    return _request("endings.warmup_adapt", {"warmup": ctx.warmup, "idea": ctx.idea.render(),
                                             "beats_constraint": _beats_constraint(opts)}, opts, ctx, "adapt")


def _plan_request(ctx: StoryContext, opts: PipelineOptions):
    return _request("endings.beats_plan", {"idea": ctx.idea.render(), "beats_constraint": _beats_constraint(opts)},
                    opts, ctx, "plan")


def _write_request(ctx: StoryContext, opts: PipelineOptions, attempt: int):
    beats = ctx.plan if ctx.plan is not None else ctx.warmup
    # A regeneration must be a different request (else the cache returns the same short story).
    sampling = opts.sampling if attempt == 1 else opts.sampling.model_copy(
        update={"seed": opts.base_seed + attempt - 1})
    tags = {"story_attempt": str(attempt)}
    if beats is not None:
        return _request("endings.story_from_beats", {"beats": beats}, opts, ctx, "write", sampling, tags)
    return _request("endings.story_vanilla", {"idea": ctx.idea.render()}, opts, ctx, "write", sampling, tags)


def _fail(ctx: StoryContext, step: str, failure: LLMFailure | dict[str, Any]) -> None:
    data = failure.model_dump() if isinstance(failure, LLMFailure) else dict(failure)
    ctx.failure = {"step": step, **data}


def _absorb(ctx: StoryContext, step: str, req: LLMRequest, own: list[dict[str, str]], res: LLMResult) -> None:
    ctx.steps.append(StepRecord(step, req.prompt_version or req.role, res.ok, list(res.call_ids), res.attempts))
    if not res.ok:
        _fail(ctx, step, res.failure)
        return
    text = str(res.output).strip()
    if not text:
        _fail(ctx, step, {"error_kind": "empty_output", "message": f"step {step!r} answered with empty text"})
        return
    ctx.turns += [*own, {"role": "assistant", "content": text}]
    if step == "extract":
        ctx.warmup = text
    else:
        ctx.plan = text


# ---- running ------------------------------------------------------------------------


def run_pipeline(client: Any, ideas: Sequence[StoryIdea], pipeline: str, opts: PipelineOptions,
                 ablate: Iterable[str] = ()) -> list[StoryContext]:
    """Run `pipeline` for every idea; returns one context per idea (story set, or failure set).

    `client` is an `LLMClient` (anything with `complete_many(list[LLMRequest])`). Full-text
    reference files are absolute paths (resolved when the pool / ideas were loaded). Each story
    goes on to its next step as soon as its previous answer is back (`wse_platform.flow`).
    """
    from wse_platform import flow

    steps = pipeline_steps(pipeline, ablate)
    parts = flow.each(client, list(ideas), lambda c, idea: _run_steps(c, [idea], steps, opts), models=[opts.model])
    return [ctx for part in parts for ctx in part]


def _run_steps(client: Any, ideas: Sequence[StoryIdea], steps: tuple[str, ...],
               opts: PipelineOptions) -> list[StoryContext]:
    """The pipeline's steps over `ideas` in lockstep (one `complete_many` per step)."""
    contexts = [StoryContext(idea=i) for i in ideas]
    if "extract" in steps:
        for ctx in contexts:
            ctx.reference = ctx.idea.reference or draw_reference(opts.reference_pool, opts.reference_seed,
                                                                 opts.set_key, ctx.idea.id)
            if ctx.reference is not None and ctx.reference.mode == "full_text":
                ctx.reference_text = read_input_text(str(ctx.reference.file), what="reference file").strip()
    builders = {"extract": _extract_request, "adapt": _adapt_request, "plan": _plan_request}
    expect(len(steps) * len(ideas))   # the limiter's priority: requests this story expects, one per step
    for step in steps:
        live = [c for c in contexts if c.alive]
        if not live:
            break
        if step == "write":
            _write_stories(client, live, opts)
            continue
        built = [builders[step](c, opts) for c in live]
        results = client.complete_many([req for req, _ in built])
        for ctx, (req, own), res in zip(live, built, results):
            _absorb(ctx, step, req, own, res)
    return contexts


def _write_stories(client: Any, contexts: list[StoryContext], opts: PipelineOptions) -> None:
    pending = list(contexts)
    for attempt in range(1, opts.max_story_attempts + 1):
        if not pending:
            return
        built = [_write_request(c, opts, attempt) for c in pending]
        retry = []
        for ctx, (req, _), res in zip(pending, built, client.complete_many([r for r, _ in built])):
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


def exclusion(text: str | None, n_words: int, min_words: int, max_words: int) -> str | None:
    """Why a story is not measured (None: measured). The same rule for human and generated stories."""
    if text is None:
        return "no text"
    problem = prose_problem(text)
    if problem:
        return f"not prose: {problem}"
    if n_words < min_words:
        return f"too short: {n_words} words < min_words {min_words}"
    if n_words > max_words:
        return f"too long: {n_words} words > max_words {max_words}"
    return None


def story_rows(contexts: Sequence[StoryContext], set_key: str, model: str, pipeline: str,
               same_model_judge: bool, min_words: int = 0, max_words: int = 10**9) -> list[dict[str, Any]]:
    """`endings_stories` rows for a generated set: one per idea, failures and out-of-range
    stories included with the reason (the paper keeps only 500-5,000-word stories)."""
    rows = []
    for ctx in contexts:
        ref = ctx.reference if any(s.step == "extract" for s in ctx.steps) else None
        n_words = count_words(ctx.story) if ctx.story else 0
        if ctx.story is None:
            reason = f"generation failed at step {ctx.failure['step']}" if ctx.failure else "no story"
        else:
            reason = exclusion(ctx.story, n_words, min_words, max_words)
        rows.append({
            "story_id": f"{set_key}/{ctx.idea.id}", "set_key": set_key, "corpus": set_key,
            "quality_tier": "generated", "generator_model": model, "pipeline": pipeline,
            "title": ctx.idea.metadata.get("title"), "author": model,
            "source": f"generated by {model} with pipeline {pipeline}",
            "license": None, "file": None, "n_words": n_words, "text": ctx.story,
            "included": reason is None, "exclusion_reason": reason,
            "same_model_judge": same_model_judge, "idea_id": ctx.idea.id,
            "beats_json": json.dumps(ctx.plan) if ctx.plan is not None else None,
            "reference_beats_json": json.dumps(ctx.warmup) if ctx.warmup is not None else None,
            "reference_title": ref.label if ref else None, "reference_mode": ref.mode if ref else None,
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


def reference_pool(settings: Any) -> list[Reference]:
    """`endings.reference_pool` with full-text files resolved (relative to the config)."""
    pool = []
    for i, r in enumerate(settings.endings.reference_pool):
        path = settings.resolve_path(r.file) if r.file else None
        if path is not None:
            try:
                check_input(path, what="reference file")   # a regular file within the size limit
            except InputFileError as err:
                raise IdeasError(f"endings.reference_pool[{i}].file: {err}") from None
        pool.append(Reference(r.title, r.author, str(path) if path else None))
    return pool


def generate_set(client: Any, settings: Any, model: str, pipeline: str, set_key: str,
                 ablate: Iterable[str] = ()) -> list[dict[str, Any]]:
    """`endings_stories` rows of one generated set: the first `endings.n_ideas` ideas through `pipeline`."""
    ideas, _ = load_ideas(ideas_path(settings))
    e = settings.endings
    ideas = ideas if e.n_ideas is None else ideas[:e.n_ideas]
    sampling = e.story_sampling
    base_seed = sampling.seed if sampling.seed is not None else (settings.model(model).sampling.seed or 0)
    opts = PipelineOptions(model=model, sampling=sampling, prompts_dir=settings.prompts_dir, base_seed=base_seed,
                           plan_beats=e.plan_beats, reference_pool=reference_pool(settings),
                           reference_seed=e.reference_seed, set_key=set_key, tags={"set_key": set_key})
    contexts = run_pipeline(client, ideas, pipeline, opts, ablate=ablate)
    return story_rows(contexts, set_key, model, pipeline, e.same_model_judge, e.min_words, e.max_words)
