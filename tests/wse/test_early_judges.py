"""Judges start while their cell is generated (issue 24 item 1; `wse_platform/early_judges.py`).

Every seed's last Story Agent request is held until a judge request has arrived (at most 5 s):
without early judging no judge is asked before the cell's generation ends, so the test fails
there. The judging step, rebuilding its requests from the stored rows as the asset does, then
makes no backend call, and its rows equal those of judging without early answers.
"""
from __future__ import annotations

import json
import random
import re
import threading
import time

import duckdb
import polars as pl

from tests.gated_backend import GatedBackend
from tests.wse._wse_sim_helpers import (MODEL, FakeGenerationModel, gen_step, make_seed, make_settings, prompt_text,
                                        seed_tag)
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.wse.early import early_judging
from wse_platform.wse.judges import judge_consistency, judge_richness, judged_trajectories
from wse_platform.wse.simulate import simulate_cell, step_rows, trajectory_rows

H = 3
ARCH = "B3+WMEM+WMOD"
CONSISTENCY, RICHNESS = "wse.consistency_judge", "wse.richness_judge"


def judge_answer(call) -> str:
    text, j = prompt_text(call), call.sampling.seed // 1000 - 1
    if call.role == CONSISTENCY:
        step = int(re.search(r"CURRENT step (\d+):", text).group(1))
        if seed_tag(text) == "B" and step == 2:   # B's panel finds step 2 inconsistent: its judging stops there
            return json.dumps({"verdict": "inconsistent", "prior_fact": "Nora is well", "prior_source": "narrative",
                               "prior_step": 1, "conflicting_claim": "Nora is dead", "exclusion_reason": "dead vs well",
                               "missing_transition": "no death is narrated", "category": "character-state"})
        return json.dumps({"verdict": "consistent"})
    units = [{"step": 1, "kind": "event", "repetitive": False, "evidence": "x", "description": "x"}]
    return json.dumps({"units": units, "rating_event_diversity": 1 + j, "rating_character_change": 2,
                       "rating_world_expansion": 3})


def _seeds():
    return [make_seed("A"), make_seed("B", family="smallville", schedule=[1, 1, 2] * 7), make_seed("C")]


def _generate(settings, early: bool, delays: random.Random | None = None, wait: float = 5.0):
    """(records, judge call times, whether a judge was asked before each held last Story Agent answer)."""
    judged, held, lock = threading.Event(), [], threading.Lock()

    def before_gen(call):
        if delays is not None:
            with lock:
                dt = delays.uniform(0, 0.01)
            time.sleep(dt)
        if call.role == "wse.story_agent" and gen_step(call) == H:
            held.append(judged.wait(wait))     # the last step of every trajectory waits for a judge

    def before_judge(call):
        judged.set()

    client = LLMClient(settings, run_id="fixed-run", progress=False, backends={
        MODEL: GatedBackend(FakeGenerationModel(), before_gen, namespace="gen"),
        "judge": GatedBackend(judge_answer, before_judge, namespace="judge")})
    with early_judging(client, settings, MODEL, ARCH, force=early) as judges:
        records = simulate_cell(client, settings, MODEL, ARCH, _seeds(), horizon=H, early=judges)
    client.close()
    return records, held


def _judge(settings, records):
    """The judging assets' work on the stored rows (DuckDB round trip); returns (rows, backend calls)."""
    con = duckdb.connect()
    steps = con.from_arrow(step_rows(records).to_arrow()).pl()
    trajs = con.from_arrow(trajectory_rows(records).to_arrow()).pl()
    seeds = {s.seed_id: s for s in _seeds()}
    trajectories = judged_trajectories(steps.select("seed_id", "step", "player_option", "narrative", "new_day"),
                                       trajs, seeds)
    backend = ScriptedBackend(judge_answer, namespace="judge")
    client = LLMClient(settings, progress=False, backends={"judge": backend})
    cons = judge_consistency(client, settings, settings.wse.consistency_judge, trajectories)
    rich = judge_richness(client, settings, settings.wse.richness_judge, trajectories)
    client.close()
    drop = ["llm_call_ids"]
    return (cons.verdicts.drop(drop).sort("seed_id", "step", "judge_index"), cons.trajectories,
            rich.drop(drop).sort("seed_id", "judge_index")), backend.n_calls


def test_judges_start_before_the_cell_is_generated_and_judging_then_calls_nothing(tmp_path):
    # reference: no early judging (the judges are asked only by the judging step)
    plain_settings = make_settings(tmp_path / "plain")
    plain, held = _generate(plain_settings, early=False, wait=0.5)
    assert held == [False] * 3          # no judge before the end of generation (each held request timed out)
    reference, calls = _judge(plain_settings, plain)
    assert calls > 0

    settings = make_settings(tmp_path / "early")
    records, held = _generate(settings, early=True, delays=random.Random(1))
    assert held == [True] * 3, "no judge request was issued before the last generation requests completed"
    assert records == plain                      # the same rows whatever the timing
    rows, calls = _judge(settings, records)
    assert calls == 0, f"the judging step made {calls} backend call(s): the early answers were not its requests"
    for got, want in zip(rows, reference):
        assert got.equals(want)
    b = rows[1].filter(pl.col("seed_id") == "seed-B")
    assert b["first_contradiction"].to_list() == [2]   # the chain stopped where judging stops


def test_a_failing_judge_endpoint_never_fails_the_generation(tmp_path, caplog):
    """A judge that cannot be reached is logged once; the cell's generation succeeds (the judging step asks again)."""
    settings = make_settings(tmp_path)
    judge = ScriptedBackend(lambda call: ConnectionError("judge server down"), namespace="judge")
    client = LLMClient(settings, progress=False, max_attempts=1, backends={
        MODEL: ScriptedBackend(FakeGenerationModel(), namespace="gen"), "judge": judge})
    with early_judging(client, settings, MODEL, ARCH, force=True) as judges:
        records = simulate_cell(client, settings, MODEL, ARCH, _seeds(), horizon=H, early=judges)
    client.close()
    assert [r.length for r in records] == [H, H, H] and judge.n_calls > 0
    assert sum("early WSE judge requests failed" in r.getMessage() for r in caplog.records) == 1
