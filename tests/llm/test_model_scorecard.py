"""`model_scorecard`: one row per model across the three benchmarks, on a warehouse with two
models (rows inserted with the real DDL, the SQL model built as the asset builds it)."""
from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest

from wse_platform.sql_models import load_models
from wse_platform.warehouse import Warehouse


def _insert(wh: Warehouse, table: str, rows: list[dict]) -> None:
    with wh.connect() as con:
        for r in rows:
            cols = ", ".join(f'"{c}"' for c in r)
            con.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(r))})', list(r.values()))


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    judge = "wse.consistency_judge:j:v1:x3"
    _insert(wh, "wse_cell_metrics", [
        {"model": "alpha", "arch": "B1", "judge_config_id": judge, "n": 4, "G": 0.5, "C_obs": 0.8, "C_adj": 0.7, "R": 3.0},
        {"model": "alpha", "arch": "B2+WMEM", "judge_config_id": judge, "n": 4, "G": 1.0, "C_obs": 0.6, "C_adj": 0.5,
         "R": 5.0},
        {"model": "beta", "arch": "B1", "judge_config_id": judge, "n": 4, "G": 0.25, "C_obs": None, "C_adj": None,
         "R": None},
    ])
    _insert(wh, "ncp_summary", [
        {"model": "alpha", "arch": "baseline+adversarial", "auditor_id": "ncp.auditor:j:v1:x1", "n_episodes": 2,
         "avg_turns": 10.0, "trajectory_pct": 40.0, "satisfied_pct": 50.0, "survival_at_20": 0.5},
        {"model": "beta", "arch": "baseline+adversarial", "auditor_id": "ncp.auditor:j:v1:x1", "n_episodes": 2,
         "avg_turns": 4.0, "trajectory_pct": 10.0, "satisfied_pct": 20.0, "survival_at_20": None},
    ])
    # alpha forecasts the human story, beta judges it; beta also generated a story set
    _insert(wh, "endings_positions", [{"story_id": "human:pd/s1", "set_key": "human:pd", "position": p,
                                       "forecaster_model": "alpha"} for p in range(2)])
    _insert(wh, "endings_story_tension", [
        {"story_id": "human:pd/s1", "set_key": "human:pd", "set_kind": "human",
         "judge_config_id": "endings.judge:beta:v1:x1", "mean_no_rate": 0.4, "late_no_rate": 0.6},
    ])
    _insert(wh, "endings_corpus_tension", [
        {"set_key": "gen:beta:vanilla", "set_kind": "gen", "judge_config_id": "endings.judge:beta:v1:x1",
         "generator_model": "beta", "pipeline": "vanilla", "n": 1, "mean_no_rate": 0.2, "late_no_rate": 0.1},
        {"set_key": "human:pd", "set_kind": "human", "judge_config_id": "endings.judge:beta:v1:x1",
         "generator_model": None, "pipeline": None, "n": 1, "mean_no_rate": 0.4, "late_no_rate": 0.6},
    ])
    now = datetime(2026, 12, 1)
    calls = [("wse.story_agent", "alpha", 100, 0.01, False), ("ncp.narrator", "alpha", 50, 0.0, False),
             ("endings.forecast", "alpha", 30, None, False), ("endings.forecast", "alpha", 30, 0.0, True),
             ("endings.judge", "beta", 7, 0.002, False)]
    _insert(wh, "llm_calls", [{"call_id": f"c{i}", "run_id": "r", "role": role, "model": m, "tokens_in": t,
                               "tokens_out": 1, "cost_usd": cost, "cache_hit": hit, "valid": True,
                               "created_at": now} for i, (role, m, t, cost, hit) in enumerate(calls)])
    return wh


def test_one_row_per_model_across_the_three_benchmarks(wh):
    (model,) = [m for m in load_models() if m.name == "model_scorecard"]
    assert model.build(wh) == 2
    rows = {r["model"]: r for r in wh.query("SELECT * FROM model_scorecard").to_dicts()}
    assert set(rows) == {"alpha", "beta"}
    a, b = rows["alpha"], rows["beta"]
    # WSE: means over the architectures run, each architecture listed with its judge configuration
    assert (a["wse_architectures"], a["wse_G"], a["wse_C_obs"], a["wse_R"]) == (2, 0.75, pytest.approx(0.7), 4.0)
    assert [x["arch"] for x in a["wse_by_arch"]] == ["B1", "B2+WMEM"]
    assert a["wse_by_arch"][0]["judge_config_id"] == "wse.consistency_judge:j:v1:x3"
    assert b["wse_G"] == 0.25 and b["wse_C_obs"] is None
    # NCP per narrator architecture and auditor
    assert (a["ncp_avg_turns"], a["ncp_trajectory_pct"], a["ncp_survival_at_20"]) == (10.0, 40.0, 0.5)
    assert a["ncp_by_arch"][0]["auditor_id"] == "ncp.auditor:j:v1:x1"
    # 100-Endings: alpha as forecaster, beta as judge and as generator
    assert a["endings_forecaster_mean_no_rate"] == 0.4 and a["endings_as_judge"] is None
    assert a["endings_as_forecaster"][0]["judge_config_id"] == "endings.judge:beta:v1:x1"
    assert b["endings_judge_mean_no_rate"] == 0.4 and b["endings_as_judge"][0]["forecaster"] == "alpha"
    assert b["endings_generator_mean_no_rate"] == 0.2 and b["endings_as_generator"][0]["pipeline"] == "vanilla"
    assert a["endings_generator_mean_no_rate"] is None
    # backend tokens and cost per benchmark (cache hits excluded)
    assert (a["tokens_wse"], a["tokens_ncp"], a["tokens_endings"]) == (101, 51, 31)
    assert a["cost_usd_wse"] == pytest.approx(0.01) and b["cost_usd_endings"] == pytest.approx(0.002)
    assert b["tokens_wse"] is None
    assert isinstance(wh.query("SELECT * FROM model_scorecard"), pl.DataFrame)
