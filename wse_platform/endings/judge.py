"""Judging: each predicted ending, on its own, against the true continuation.

The last revealed sentence (the anchor) opens BOTH blocks of the prompt: the true
continuation and the predicted ending, as the paper does, so a terse prediction or
continuation still has its context. The continuation is truncated to 2,000 words.

Verdict rule (paper): Y iff the first non-space character of the answer, uppercased,
is "Y"; anything else (N, empty, malformed) is N. By default the judge decodes freely
and the rule reads its answer, as in the paper. `endings.judge_constrained_choice`
opts in to a closed choice ["Y", "N"] for backends that support it (the judge config id
then ends in ":choice", so its verdicts are never mixed with free ones); an answer
outside the choice is then read by the same rule and flagged `choice_fallback`.
Transport failures and failed predictions stay failures (verdict NULL). A prediction that is
itself empty or malformed (`sample_error`, one sample of an answered request) is an N without a
judge call: the paper's extraction counts an empty or malformed answer as a rejection, and an empty
prediction predicts nothing (sent to the judge it would be the anchor sentence alone).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from wse_platform.config import JudgeConfig, Settings
from wse_platform.endings.forecast import SplitStory, flowing, model_default_seed, repeat_sampling
from wse_platform.llm.types import LLMRequest, LLMResult, Sampling
from wse_platform.prompts import get_prompt

ROLE = "endings.judge"
CHOICES = ["Y", "N"]
MAX_CONTINUATION_WORDS = 2000
_WORD = re.compile(r"\S+")
_ANSWERED_KINDS = ("invalid_choice", "empty_output")  # the judge did answer; the rule decides


def parse_verdict(text: str | None) -> str:
    """'Y' iff the first non-space character, uppercased, is 'Y'; else 'N' (also for empty)."""
    stripped = (text or "").lstrip()
    return "Y" if stripped[:1].upper() == "Y" else "N"


def truncate_words(text: str, max_words: int = MAX_CONTINUATION_WORDS) -> str:
    """The first `max_words` whitespace words of `text`, original spacing kept."""
    for i, m in enumerate(_WORD.finditer(text), 1):
        if i == max_words:
            return text[: m.end()]
    return text


def true_continuation(story: SplitStory, sentence_index: int, max_words: int = MAX_CONTINUATION_WORDS) -> str:
    """The story after `sentence_index`, truncated to `max_words` words: computed once per story and
    position (each of the position's K judge requests, early and in the judging step, shows it)."""
    key = ("continuation", sentence_index, max_words)
    got = story.memo.get(key)
    if got is None:
        got = story.memo[key] = truncate_words(story.after(sentence_index), max_words)
    return got


def judge_config_id(settings: Settings) -> str:
    """`endings.judge:<model>:<prompt version>:x1`, plus `:choice` when decoding is constrained."""
    e = settings.endings
    base = JudgeConfig(model=e.judge or "", prompt_version=e.judge_prompt_version).judge_id(ROLE)
    return base + (":choice" if e.judge_constrained_choice else "")


def judge_request(story: SplitStory, sentence_index: int, position: int, sample_index: int, prediction: str,
                  model: str, sampling: Sampling, prompt_version: str = "v1", prompts_dir: str | None = None,
                  max_words: int = MAX_CONTINUATION_WORDS, constrained: bool = False) -> LLMRequest:
    """One judge request: anchor sentence + truncated continuation vs anchor + prediction."""
    anchor = story.sentence(sentence_index)
    continuation = true_continuation(story, sentence_index, max_words)
    prompt = get_prompt(ROLE, prompt_version, prompts_dir)
    messages = prompt.render(anchor=anchor, continuation=continuation, prediction=prediction)
    return LLMRequest(role=ROLE, model=model, messages=messages, sampling=sampling, n=1,
                      choices=list(CHOICES) if constrained else None, prompt_version=prompt.id,
                      allow_truncated=True,   # the paper caps the judge at 10 tokens and reads the first character
                      tags={"story_id": story.story_id, "position": str(position), "sample_index": str(sample_index)})


def verdict_row(pred: dict[str, Any], judge_id: str, judge_model: str, result: LLMResult | None,
                same_model_judge: bool) -> dict[str, Any]:
    """One `endings_verdicts` row; `result` is None when the prediction itself failed."""
    row = {"story_id": pred["story_id"], "set_key": pred["set_key"], "position": pred["position"],
           "sample_index": pred["sample_index"], "repeat": pred.get("repeat", 0), "judge_config_id": judge_id, "judge_model": judge_model,
           "same_model_judge": same_model_judge, "verdict_raw": None, "verdict": None, "failure_json": None,
           "choice_fallback": False, "llm_call_id": None}
    if pred.get("sample_error"):   # an empty / malformed prediction: a rejection, as the paper counts it
        row["verdict"] = "N"
        return row
    if result is None:
        row["failure_json"] = json.dumps({"error_kind": "prediction_failed",
                                          "message": "no prediction to judge (the forecast request failed)"})
        return row
    row["llm_call_id"] = result.call_ids[-1] if result.call_ids else None
    if result.ok:
        row["verdict_raw"] = result.texts[0] if result.texts else str(result.output)
        row["verdict"] = parse_verdict(row["verdict_raw"])
    elif result.failure.error_kind in _ANSWERED_KINDS and result.failure.raw_text is not None:
        row["verdict_raw"] = result.failure.raw_text
        row["verdict"] = parse_verdict(result.failure.raw_text)
        row["choice_fallback"] = result.failure.error_kind == "invalid_choice"
    else:
        row["failure_json"] = json.dumps(result.failure.model_dump())
    return row


def judgeable(pred: dict[str, Any]) -> bool:
    """Whether a prediction row goes to the judge (a failed or malformed prediction does not)."""
    return not (pred.get("failure_json") or pred.get("prediction") is None or pred.get("sample_error"))


def prediction_request(settings: Settings, story: SplitStory, sentence_index: int, pred: dict[str, Any],
                       judge_seed: int | None, prompts_dir: str | None) -> LLMRequest:
    """The configured judge's request on one prediction row (`judge_seed`: the judge model's default seed)."""
    e = settings.endings
    repeat = int(pred.get("repeat") or 0)
    req = judge_request(story, sentence_index, pred["position"], pred["sample_index"], pred["prediction"], e.judge,
                        repeat_sampling(e.judge_sampling, repeat, judge_seed), e.judge_prompt_version, prompts_dir,
                        constrained=e.judge_constrained_choice)
    req.tags["repeat"] = str(repeat)
    return req


JUDGE_BATCH = 512  # judge requests per complete_many call (the paper's batch size)


def run_judging(client: Any, stories: Sequence[SplitStory], positions: Sequence[dict[str, Any]],
                predictions: Sequence[dict[str, Any]], settings: Settings, prompts_dir: str | None = None,
                batch: int = JUDGE_BATCH, early: dict[tuple, LLMResult] | None = None) -> list[dict[str, Any]]:
    """`endings_verdicts` rows for every prediction of a set, under the configured judge.

    `early`: valid answers the judge gave to these very requests while the forecasts came in, in
    this process (`endings.early.ANSWERS.take`), by `kept_answers.request_digest`; each request found
    there is not asked again (with the cache on, the client would answer it from the cache)."""
    e = settings.endings
    if e.judge is None:
        raise ValueError("endings.judge is not set in the configuration: no model to judge predicted endings")
    judge_id = judge_config_id(settings)
    if early and not getattr(client, "use_cache", False):
        early = None   # without the cache every judging run asks the judge itself, as before
    if early:
        from wse_platform.kept_answers import request_digest
    by_id = {s.story_id: s for s in stories}
    sentence_of = {(p["story_id"], p["position"]): p["sentence_index"] for p in positions}
    judge_seed = model_default_seed(settings, e.judge)
    rows: list[dict[str, Any] | None] = []
    todo: list[tuple[int, dict[str, Any], LLMRequest]] = []
    for pred in predictions:
        key = (pred["story_id"], pred["position"])
        if key not in sentence_of:
            raise ValueError(f"endings_predictions: story_id={key[0]!r} position={key[1]}: "
                             "no matching row in endings_positions (field 'sentence_index')")
        if not judgeable(pred):
            rows.append(verdict_row(pred, judge_id, e.judge, None, e.same_model_judge))
            continue
        req = prediction_request(settings, by_id[pred["story_id"]], sentence_of[key], pred, judge_seed, prompts_dir)
        got = early.get(request_digest(req)) if early else None
        if got is not None:
            rows.append(verdict_row(pred, judge_id, e.judge, got, e.same_model_judge))
            continue
        todo.append((len(rows), pred, req))
        rows.append(None)
    for chunk, results in zip(*flowing(client, todo, [r for _, _, r in todo], lambda x: x[1]["story_id"], batch,
                                       [e.judge])):
        for (i, pred, _), res in zip(chunk, results):
            rows[i] = verdict_row(pred, judge_id, e.judge, res, e.same_model_judge)
    return [r for r in rows if r is not None]
