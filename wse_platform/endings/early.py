"""100-Endings judge asked while the forecasts come in (`wse_platform.early_judges` has the design).

`run_forecasts(..., after=position_judge(...))`: as soon as a position's K endings are back, the
configured judge's requests on them go out, built by `judge.prediction_request` from the same
values the stored `endings_predictions` rows hold, so the `endings_verdicts` step is answered
from the cache.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from wse_platform import early_judges
from wse_platform.endings.forecast import SplitStory, model_default_seed, prediction_rows
from wse_platform.endings.judge import judgeable, prediction_request


def position_judge(client: Any, settings: Any, stories: Sequence[SplitStory], set_key: str, forecaster: str,
                   k: int, prompts_dir: str | None, force: bool | None = None
                   ) -> Callable[[Any, Any, Any], None] | None:
    """The `after` hook of `run_forecasts` when early judging is on (`early_judges.enabled`, or `force`)."""
    judge = settings.endings.judge
    on = force if force is not None else early_judges.enabled(settings, client, [forecaster, judge])
    if judge is None or not on:
        return None
    by_id = {s.story_id: s for s in stories}
    judge_seed = model_default_seed(settings, judge)
    ask = early_judges.Ask("100-Endings judge")

    def after(client: Any, item: tuple[int, dict[str, Any]], result: Any) -> None:
        repeat, p = item
        preds = [x for x in prediction_rows(p["story_id"], set_key, p["position"], k, result, forecaster,
                                            repeat=repeat) if judgeable(x)]
        if preds:
            ask.call(lambda: client.complete_many([
                prediction_request(settings, by_id[p["story_id"]], p["sentence_index"], x, judge_seed, prompts_dir)
                for x in preds]))
    return after
