"""Continuous flow in 100-Endings forecasting and judging: no barrier across stories.

Story s1's first position is held until story s2's last position is asked (or 5 s pass); the
old loop sent fixed chunks of positions (`batch`) over all stories in order, so s2 waited.
"""
from __future__ import annotations

import threading

from tests.endings.test_forecast_judge import TEXT, _settings
from tests.gated_backend import GatedBackend
from wse_platform.endings.forecast import SplitStory, compute_positions, run_forecasts
from wse_platform.endings.judge import run_judging
from wse_platform.llm import LLMClient
from wse_platform.metrics.endings import whitespace_token_count


def _gate(first_of_s1, last_of_s2):
    s2_last, seen = threading.Event(), []

    def before(call):
        text = "\n".join(m["content"] for m in call.messages)
        if last_of_s2(text):
            s2_last.set()
        if first_of_s1(text):
            seen.append(s2_last.wait(5.0))
    return before, seen


def test_stories_do_not_wait_for_each_other(tmp_path):
    settings = _settings(tmp_path, k=2)
    stories = [SplitStory.of("s1", TEXT), SplitStory.of("s2", TEXT.replace("Mara", "Jonas"))]
    positions = compute_positions(stories, "human:x", whitespace_token_count, 3, "f", "ws")
    assert len(positions) == 8
    before, seen = _gate(lambda t: "Mara" in t and "number 2 " not in t, lambda t: "Jonas" in t and "number 10 " in t)
    fb = GatedBackend(lambda call: ["End A.", "End B."], before, namespace="f")
    jbefore, jseen = _gate(lambda t: "[PREDICTION STARTS]\nSentence number 1 tells us that Mara" in t,
                           lambda t: "[PREDICTION STARTS]\nSentence number 10 tells us that Jonas" in t)
    jb = GatedBackend({"endings.judge": "Y"}, jbefore, namespace="j")
    client = LLMClient(settings, backends={"f": fb, "j": jb}, progress=False, use_cache=False)
    preds = run_forecasts(client, stories, positions, "human:x", "f", 2, settings.endings.forecast_sampling, batch=2)
    assert seen == [True], "story s2's last position was not asked while s1's first one was outstanding"
    assert [(p["story_id"], p["position"]) for p in preds][::2] == [(p["story_id"], p["position"]) for p in positions]
    verdicts = run_judging(client, stories, positions, preds, settings, batch=2)
    assert jseen == [True, True], "story s2's last prediction was not judged while s1's first one was outstanding"
    assert [(v["story_id"], v["position"], v["sample_index"]) for v in verdicts] == \
        [(p["story_id"], p["position"], p["sample_index"]) for p in preds]
