"""The 100-Endings judge starts on each position's endings as they arrive (issue 24 item 1).

The forecast of story s2's last position is held until a judge request has arrived (at most 5 s):
without early judging no judge is asked before the forecasts are done, so the test fails there.
`run_judging` on the stored rows then makes no backend call and gives the same verdicts.
"""
from __future__ import annotations

import threading

import duckdb
import polars as pl

from tests.endings.test_forecast_judge import TEXT, _settings
from tests.gated_backend import GatedBackend
from wse_platform.endings.early import position_judge
from wse_platform.endings.forecast import SplitStory, compute_positions, run_forecasts
from wse_platform.endings.judge import run_judging
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.metrics.endings import whitespace_token_count

STORIES = [SplitStory.of("s1", TEXT), SplitStory.of("s2", TEXT.replace("Mara", "Jonas"))]


def _verdict(call) -> str:
    """The judge's answer depends on the request, not on the order of calls (early requests come in another order)."""
    return "Y" if "End A." in "\n".join(m["content"] for m in call.messages) else "N"


def _forecast(settings, early: bool, wait: float):
    positions = compute_positions(STORIES, "human:x", whitespace_token_count, 3, "f", "ws")
    judged, held = threading.Event(), []

    def before(call):
        text = "\n".join(m["content"] for m in call.messages)
        if "Jonas" in text and "number 10 " in text:      # s2's last position waits for a judge request
            held.append(judged.wait(wait))

    fb = GatedBackend(lambda call: ["End A.", "End B."], before, namespace="f")
    jb = GatedBackend(_verdict, lambda call: judged.set(), namespace="j")
    client = LLMClient(settings, backends={"f": fb, "j": jb}, progress=False)
    after = position_judge(client, settings, STORIES, "human:x", "f", 2, None, force=early)
    preds = run_forecasts(client, STORIES, positions, "human:x", "f", 2, settings.endings.forecast_sampling,
                          after=after)
    client.close()
    return positions, preds, held


def _judge(settings, positions, preds):
    """`endings_verdicts` from the stored rows (DuckDB round trip); (rows, judge backend calls)."""
    stored = duckdb.connect().from_arrow(pl.DataFrame(preds).to_arrow()).pl().to_dicts()
    jb = ScriptedBackend(_verdict, namespace="j")
    client = LLMClient(settings, backends={"f": ScriptedBackend({}, namespace="f"), "j": jb}, progress=False)
    rows = run_judging(client, STORIES, positions, stored, settings)
    client.close()
    return [{k: v for k, v in r.items() if k != "llm_call_id"} for r in rows], jb.n_calls


def test_judge_starts_before_the_forecasts_end_and_judging_then_calls_nothing(tmp_path):
    plain_settings = _settings(tmp_path / "plain", k=2)
    positions, plain, held = _forecast(plain_settings, early=False, wait=0.5)
    assert held == [False]
    reference, calls = _judge(plain_settings, positions, plain)
    assert calls == len(plain)

    settings = _settings(tmp_path / "early", k=2)
    positions, preds, held = _forecast(settings, early=None, wait=5.0)   # on by default (server backends)
    assert held == [True], "no judge request was issued before the last forecast completed"
    assert [{k: v for k, v in p.items() if k != "llm_call_id"} for p in preds] == \
        [{k: v for k, v in p.items() if k != "llm_call_id"} for p in plain]
    rows, calls = _judge(settings, positions, preds)
    assert calls == 0, f"endings_verdicts made {calls} judge call(s): the early answers were not its requests"
    assert rows == reference


def test_the_judging_step_of_the_same_run_takes_the_early_answers_without_replaying_them(tmp_path):
    """In the process and run that forecast a set, `endings_verdicts` takes the judge's early answers
    (`early.ANSWERS`) instead of replaying K x positions cache hits through the client: the same rows,
    no backend call and no `llm_calls` row of its own; a request that is not the early one (here: another
    judge temperature), another run, or a client without the cache goes through the client as before."""
    from wse_platform.kept_answers import EarlyAnswers

    settings = _settings(tmp_path / "early", k=2)
    positions = compute_positions(STORIES, "human:x", whitespace_token_count, 3, "f", "ws")
    fb = ScriptedBackend(lambda call: ["End A.", "End B."], namespace="f")
    jb = ScriptedBackend(_verdict, namespace="j")
    client = LLMClient(settings, run_id="run-1", backends={"f": fb, "j": jb}, progress=False)
    answers = EarlyAnswers()
    after = position_judge(client, settings, STORIES, "human:x", "f", 2, None, force=True, answers=answers)
    preds = run_forecasts(client, STORIES, positions, "human:x", "f", 2, settings.endings.forecast_sampling,
                          after=after)
    early_ids = {r.get("call_id") for r in client._records if r["role"] == "endings.judge"}
    client.close()
    assert jb.n_calls == len(preds)
    stored = duckdb.connect().from_arrow(pl.DataFrame(preds).to_arrow()).pl().to_dicts()
    reference, _ = _judge(settings, positions, preds)           # the cache replay (another run)

    assert answers.take("run-2", "human:x") == {}                 # another run finds nothing
    early = answers.take("run-1", "human:x")
    assert len(early) == len(preds) and answers.take("run-1", "human:x") == {}   # taken once

    def judging(s, early, use_cache=True):
        judge = ScriptedBackend(_verdict, namespace="j")
        c = LLMClient(s, run_id="run-1", use_cache=use_cache, progress=False,
                      backends={"f": ScriptedBackend({}, namespace="f"), "j": judge})
        rows = run_judging(c, STORIES, positions, stored, s, early=early)
        records = list(c._records)
        c.close()
        return rows, judge.n_calls, records

    rows, calls, records = judging(settings, early)
    assert calls == 0 and records == []       # neither a backend call nor a cache replay
    assert [{k: v for k, v in r.items() if k != "llm_call_id"} for r in rows] == reference
    assert {r["llm_call_id"] for r in rows} == early_ids          # the early calls' llm_calls rows

    warmer = _settings(tmp_path / "early", k=2, judge_sampling={"temperature": 0.5, "max_tokens": 10})
    _, calls, records = judging(warmer, early)
    assert calls == len(preds) and len(records) == len(preds)     # not the early requests: asked
    _, calls, _ = judging(settings, early, use_cache=False)
    assert calls == len(preds)                                    # --no-cache: asked again, as before
