"""100-Endings judge asked while the forecasts come in (`wse_platform.early_judges` has the design).

`run_forecasts(..., after=position_judge(...))`: as soon as a position's K endings are back, the
configured judge's requests on them go out, built by `judge.prediction_request` from the same
values the stored `endings_predictions` rows hold, so the `endings_verdicts` step is answered
from the cache.

When the judging step runs in the same process as the forecasting step of the same run (one
`wse materialize` run of a story set, executed in process), it does not even read the cache:
the valid answers the judge gave here are kept in memory (`EarlyAnswers`, per run and set) and
`run_judging` takes each one whose request is the very request it builds from the stored rows
(same model, sampling, choices and messages, compared by a digest), instead of replaying ~K x
positions cache hits through the client (≈ 0.5 ms of CPU each after the last answer). Everything
else — a failed early request, another process, a resumed run, `--no-cache` — goes through the
client as before. The rows are the same (the answers are the ones the cache holds); only
`llm_call_id` then names the early call's `llm_calls` row (a real call, not a cache hit).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from wse_platform import early_judges
from wse_platform.endings.forecast import SplitStory, model_default_seed, prediction_rows
from wse_platform.endings.judge import judgeable, prediction_request
from wse_platform.kept_answers import EarlyAnswers

ANSWERS = EarlyAnswers()


def position_judge(client: Any, settings: Any, stories: Sequence[SplitStory], set_key: str, forecaster: str,
                   k: int, prompts_dir: str | None, force: bool | None = None,
                   answers: EarlyAnswers | None = ANSWERS) -> Callable[[Any, Any, Any], None] | None:
    """The `after` hook of `run_forecasts` when early judging is on (`early_judges.enabled`, or `force`).
    Valid answers are kept in `answers` for the judging step of the same run (None: not kept)."""
    judge = settings.endings.judge
    on = force if force is not None else early_judges.enabled(settings, client, [forecaster, judge])
    if judge is None or not on:
        return None
    by_id = {s.story_id: s for s in stories}
    judge_seed = model_default_seed(settings, judge)
    ask = early_judges.Ask("100-Endings judge")
    run_id = getattr(client, "run_id", None)
    keep = answers is not None and run_id is not None and getattr(client, "use_cache", False)

    def after(client: Any, item: tuple[int, dict[str, Any]], result: Any) -> None:
        repeat, p = item
        preds = [x for x in prediction_rows(p["story_id"], set_key, p["position"], k, result, forecaster,
                                            repeat=repeat) if judgeable(x)]
        if not preds:
            return

        def judge_them() -> None:
            reqs = [prediction_request(settings, by_id[p["story_id"]], p["sentence_index"], x, judge_seed,
                                       prompts_dir) for x in preds]
            results = client.complete_many(reqs)
            if keep:
                answers.keep(run_id, set_key, reqs, results)
        ask.call(judge_them)
    return after
