"""Forecasting: at each kept position, K predicted endings from the story so far.

All K samples of a position are ONE request with ``n = K`` (as the paper does on vLLM:
one prompt, many samples, so the prompt is processed once). Consecutive positions of
a story share their prompt prefix, which a prefix cache can reuse (see
`prefix_reuse_share`). The story so far is the original text up to the end of the
position's last sentence, so paragraph breaks survive.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wse_platform.llm.types import LLMRequest, LLMResult, SampleFailure, Sampling
from wse_platform.metrics.endings import Position, join_sentences, select_positions, sentence_spans
from wse_platform.prompts import get_prompt

ROLE = "endings.forecast"


@dataclass(frozen=True)
class SplitStory:
    """A story's text with its sentence offsets (the one splitter of `wse_platform.metrics`)."""

    story_id: str
    text: str
    spans: tuple[tuple[int, int], ...]
    # values derived from the text, computed once per story (`memo`; not part of equality):
    # every position's K requests, early and again in the judging step, read the same ones
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, story_id: str, text: str) -> "SplitStory":
        return cls(story_id, text, tuple(sentence_spans(text)))

    @property
    def sentences(self) -> list[str]:
        return list(self._sentences())

    def sentence(self, sentence_index: int) -> str:
        """Sentence `sentence_index` (1-based)."""
        self._check(sentence_index)
        return self._sentences()[sentence_index - 1]

    def _sentences(self) -> tuple[str, ...]:
        got = self.memo.get("sentences")
        if got is None:
            got = self.memo["sentences"] = tuple(self.text[s:e] for s, e in self.spans)
        return got

    def so_far(self, sentence_index: int) -> str:
        """Sentences 1..`sentence_index` (1-based) joined with one space (the paper's context
        string; the revealed share is counted on exactly this string)."""
        self._check(sentence_index)
        return join_sentences(self._sentences()[:sentence_index])

    def after(self, sentence_index: int) -> str:
        """Sentences after `sentence_index`, joined with one space (the true continuation)."""
        self._check(sentence_index)
        return join_sentences(self._sentences()[sentence_index:])

    def _check(self, i: int) -> None:
        if not 1 <= i <= len(self.spans):
            raise ValueError(f"story {self.story_id!r}: sentence index {i} outside 1..{len(self.spans)}")


def story_positions(story: SplitStory, count_tokens: Callable[[str], int], stride: int = 1,
                    max_positions: int | None = None) -> list[Position]:
    """Kept positions of a story (share of forecaster tokens in [10 %, 99 %], last sentence ≥ 10 words).

    `max_positions` (demo scale) keeps at most that many, evenly spaced over the kept ones
    (first and last included), renumbered 0..m-1 so the curve's x order stays contiguous."""
    kept = select_positions(story.sentences, count_tokens, stride=stride)
    if max_positions is None or len(kept) <= max_positions:
        return kept
    if max_positions < 1:
        raise ValueError(f"max_positions must be ≥ 1, got {max_positions}")
    last = len(kept) - 1
    picks = sorted({round(i * last / (max_positions - 1)) for i in range(max_positions)}) if max_positions > 1 else [0]
    return [replace(kept[j], position=i) for i, j in enumerate(picks)]


def position_rows(story: SplitStory, set_key: str, positions: Sequence[Position], forecaster: str,
                  tokenizer: str) -> list[dict[str, Any]]:
    return [{
        "story_id": story.story_id, "set_key": set_key, "position": p.position, "sentence_index": p.sentence_index,
        "revealed_share": p.revealed_share, "n_tokens_revealed": p.n_tokens_revealed,
        "n_tokens_total": p.n_tokens_total, "last_sentence": p.last_sentence,
        "n_sentences": len(story.spans), "forecaster_model": forecaster, "tokenizer": tokenizer,
    } for p in positions]


def forecast_request(story: SplitStory, sentence_index: int, position: int, model: str, k: int,
                     sampling: Sampling, prompt_version: str = "v1", prompts_dir: str | None = None,
                     tags: dict[str, str] | None = None) -> LLMRequest:
    """One request with n = k: k predicted endings of the story cut after `sentence_index`."""
    if k < 1:
        raise ValueError(f"forecast: k must be >= 1 (got {k})")
    prompt = get_prompt(ROLE, prompt_version, prompts_dir)
    return LLMRequest(
        role=ROLE, model=model, messages=prompt.render(story_so_far=story.so_far(sentence_index)),
        sampling=sampling, n=k, prompt_version=prompt.id,
        allow_truncated=True,   # the paper's 150-token cap is part of the protocol: a capped prediction is kept
        per_sample=True,        # one empty answer among K is that sample's (an N), never a redraw of all K
        tags={**(tags or {}), "story_id": story.story_id, "position": str(position)},
    )


def repeat_sampling(sampling: Sampling, repeat: int, default_seed: int | None = None) -> Sampling:
    """Repeat 0 is the configured sampling; repeat r > 0 gets seed base + r (a new request).

    base is the role's seed, else the model's default seed (`models.<name>.sampling.seed`, which
    repeat 0 runs with when the role sets none), else 0: repeat r never runs with repeat 0's
    seed, so it is never the same request (and never the same cache entry)."""
    if repeat == 0:
        return sampling
    base = sampling.seed if sampling.seed is not None else (default_seed or 0)
    return sampling.model_copy(update={"seed": base + repeat})


def model_default_seed(settings: Any, model: str) -> int | None:
    """`models.<model>.sampling.seed` of a config (None when unset or unknown)."""
    cfg = getattr(settings, "models", {}).get(model) if settings is not None else None
    return cfg.sampling.seed if cfg is not None else None


def prediction_rows(story_id: str, set_key: str, position: int, k: int, result: LLMResult,
                    forecaster: str, repeat: int = 0) -> list[dict[str, Any]]:
    """K rows per position; a failed request gives K rows with no prediction and the failure.

    An invalid sample of an answered request (empty, or only an unclosed think block) keeps its
    row: `prediction` is its text as given (stripped), `sample_error` its kind; the judge counts it
    as an N (Appendix C.5: an empty or malformed answer is a rejection)."""
    call_id = result.call_ids[-1] if result.call_ids else None
    base = {"story_id": story_id, "set_key": set_key, "position": position, "forecaster_model": forecaster,
            "llm_call_id": call_id, "repeat": repeat, "sample_error": None}
    if not result.ok:
        failure = json.dumps(result.failure.model_dump())
        return [{**base, "sample_index": i, "prediction": None, "failure_json": failure} for i in range(k)]
    rows = []
    for i, out in enumerate(result.outputs):
        if isinstance(out, SampleFailure):
            rows.append({**base, "sample_index": i, "prediction": out.raw_text.strip(), "failure_json": None,
                         "sample_error": out.error_kind})
        else:
            rows.append({**base, "sample_index": i, "prediction": str(out).strip(), "failure_json": None})
    return rows


def prefix_reuse_share(prompt_token_counts: Sequence[int], shared_prefix_counts: Sequence[int]) -> float:
    """Share of all prompt tokens a prefix cache could serve from the previous position's prompt.

    `shared_prefix_counts[i]` is the number of leading tokens position i's prompt shares with
    position i-1's (0 for the first position). Returns Σ shared / Σ prompt tokens.
    """
    total = sum(prompt_token_counts)
    if len(prompt_token_counts) != len(shared_prefix_counts):
        raise ValueError("prefix_reuse_share: one shared-prefix count per prompt is needed")
    return sum(shared_prefix_counts) / total if total else 0.0


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# ---- a whole set --------------------------------------------------------------------

FORECAST_BATCH = 64  # positions per complete_many call (the paper's batch size)


def compute_positions(stories: Sequence[SplitStory], set_key: str, count_tokens: Callable[[str], int],
                      stride: int, forecaster: str, tokenizer: str,
                      max_positions: int | None = None) -> list[dict[str, Any]]:
    """`endings_positions` rows for every story of a set."""
    rows: list[dict[str, Any]] = []
    for story in stories:
        rows += position_rows(story, set_key, story_positions(story, count_tokens, stride, max_positions),
                              forecaster, tokenizer)
    return rows


def run_forecasts(client: Any, stories: Sequence[SplitStory], positions: Sequence[dict[str, Any]], set_key: str,
                  model: str, k: int, sampling: Sampling, prompt_version: str = "v1",
                  prompts_dir: str | None = None, batch: int = FORECAST_BATCH,
                  repeats: int = 1, default_seed: int | None = None,
                  after: Callable[[Any, Any, Any], None] | None = None) -> list[dict[str, Any]]:
    """`endings_predictions` rows: one n=k request per position and repeat, `batch` at a time.

    Repeat r (0..repeats-1) draws fresh endings with `repeat_sampling(sampling, r)`; its rows
    carry `repeat = r`, so repeats sit side by side and never overwrite each other.
    `default_seed` is the forecasting model's configured seed (default: read from the client's
    settings; see `repeat_sampling`). `after(client, (repeat, position row), result)` runs as each
    position's answer arrives (`wse_platform.endings.early`); it never changes the rows."""
    by_id = {s.story_id: s for s in stories}
    if default_seed is None:
        default_seed = model_default_seed(getattr(client, "settings", None), model)
    todo = [(r, p) for r in range(repeats) for p in positions]
    reqs = [forecast_request(by_id[p["story_id"]], p["sentence_index"], p["position"], model, k,
                             repeat_sampling(sampling, r, default_seed), prompt_version, prompts_dir,
                             tags={"set_key": set_key, "repeat": str(r)}) for r, p in todo]
    rows: list[dict[str, Any]] = []
    for chunk, results in zip(*flowing(client, todo, reqs, lambda x: x[1]["story_id"], batch, [model], after)):
        for (r, p), res in zip(chunk, results):
            rows += prediction_rows(p["story_id"], set_key, p["position"], k, res, model, repeat=r)
    return rows


def flowing(client: Any, todo: Sequence[Any], reqs: Sequence[Any], story_of: Callable[[Any], str], batch: int,
            models: Sequence[str], after: Callable[[Any, Any, Any], None] | None = None
            ) -> tuple[list[list[Any]], list[list[Any]]]:
    """(chunks of `todo`, their results). Each story's requests go out as soon as the story comes up,
    every story at once (`wse_platform.flow`), no barrier between stories; on a batch-only backend
    (offline vLLM) `batch` requests at a time as before. With `after`, each request is a conversation
    of its own: `after(client, todo item, result)` runs as soon as its answer is back (early judging,
    `wse_platform.endings.early`); chunks and results come back in the same order either way."""
    from wse_platform import flow

    if flow.batch_only(client, models):
        spans = [list(range(start, min(start + batch, len(reqs)))) for start in range(0, len(reqs), batch)]
        results = [client.complete_many([reqs[i] for i in span]) for span in spans]
    else:
        by_story: dict[str, list[int]] = {}
        for i, x in enumerate(todo):
            by_story.setdefault(story_of(x), []).append(i)
        spans = list(by_story.values())
        if after is None:
            results = flow.each(client, spans, lambda c, span: c.complete_many([reqs[i] for i in span]),
                                models=models)
        else:
            def one(c: Any, i: int) -> Any:
                res = c.complete_many([reqs[i]])[0]
                after(c, todo[i], res)
                return res
            flat = iter(flow.each(client, [i for span in spans for i in span], one, models=models))
            results = [[next(flat) for _ in span] for span in spans]
    return [[todo[i] for i in span] for span in spans], results
