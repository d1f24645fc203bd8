"""Health checks (warnings): a cell that produced nothing usable, a cell whose LLM requests mostly
failed or were cut, and an empty final table do not show green (issue 13, item 3)."""
from __future__ import annotations

import polars as pl
import pytest
from dagster import AssetCheckSeverity

import assets.checks as C
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

CELL = {"model": "smollm2", "arch": "B1"}


@pytest.fixture
def wh(config_file):
    w = Warehouse(load_settings(str(config_file)).warehouse)
    w.ensure_schema()
    return w


def _trajs(lengths):
    return pl.DataFrame({"model": "smollm2", "arch": "B1", "seed_id": [f"s{i}" for i in range(len(lengths))],
                         "length": lengths, "horizon": 2})


def test_cell_with_nothing_usable_warns(wh):
    empty = C.evaluate_usable_rows(wh, "wse_trajectories", CELL)
    assert not empty.passed and empty.severity == AssetCheckSeverity.WARN and "no rows" in empty.description
    wh.replace_partition("wse_trajectories", _trajs([0, 0]), CELL)
    none = C.evaluate_usable_rows(wh, "wse_trajectories", CELL)
    assert not none.passed and "2 rows" in none.description
    wh.replace_partition("wse_trajectories", _trajs([0, 2]), CELL)
    assert C.evaluate_usable_rows(wh, "wse_trajectories", CELL).passed


def _calls(run, pk, rows):
    return pl.DataFrame([{"call_id": f"{run}-{i}", "run_id": run, "partition_key": pk, "request_key": rk,
                          "attempt": a, "valid": ok, "error_kind": kind} for i, (rk, a, ok, kind) in enumerate(rows)])


def test_share_of_failed_or_truncated_requests_above_threshold_warns(wh):
    pk = "B1|smollm2"
    rows = [("a", 1, False, "invalid_json"), ("a", 2, True, None),      # retried, then valid: not failed
            ("b", 1, False, "invalid_json"), ("b", 2, False, "invalid_json"),  # failed
            ("c", 1, True, None), ("d", 1, True, None), ("e", 1, True, None)]
    wh.insert_new("llm_calls", _calls("r1", pk, rows), "call_id")
    ok = C.evaluate_llm_failures(wh, "r1", pk)
    assert ok.passed and ok.metadata["failed_requests"].value == 1 and ok.metadata["llm_requests"].value == 5
    wh.insert_new("llm_calls", _calls("r2", pk, [("x", 1, False, "truncated"), ("y", 1, True, None)]), "call_id")
    cut = C.evaluate_llm_failures(wh, "r2", pk)
    assert not cut.passed and cut.severity == AssetCheckSeverity.WARN
    assert "50% of 2 LLM requests failed" in cut.description and "truncated" in cut.description
    assert C.evaluate_llm_failures(wh, "r2", "other|cell").passed  # scoped to the partition


def test_empty_final_table_warns(wh):
    res = C.evaluate_not_empty(wh, "wse_pareto")
    assert not res.passed and res.severity == AssetCheckSeverity.WARN and "empty" in res.description


def test_every_benchmark_has_the_health_checks(config_file):
    from wse_platform.definitions import build_definitions

    graph = build_definitions(str(config_file)).resolve_asset_graph()
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    for table in ("wse_trajectory_steps", "wse_consistency_verdicts", "ncp_episodes", "endings_stories",
                  "endings_predictions"):
        assert (table, "produced_usable_rows") in checks and (table, "llm_failures_below_threshold") in checks
    for table in ("wse_pareto", "wse_scaling_fit", "wse_architecture_contrasts", "ncp_summary",
                  "endings_corpus_tension", "llm_usage"):
        assert (table, "not_empty") in checks
    finals = {k.to_user_string() for k in graph.materializable_asset_keys
              if graph.get(k).partitions_def is None and k.to_user_string() in C.ddl_tables()}
    assert finals <= {a for a, n in checks if n == "not_empty"}


def test_one_check_step_reads_a_runs_llm_calls_once_per_partition(wh, monkeypatch):
    """A cell's tables were written by one run: their `llm_failures_below_threshold` checks, evaluated in
    one step (`counts_shared`), read that run's calls once (was: once per table, 4 per WSE cell run)."""
    pk = "B1|smollm2"
    wh.insert_new("llm_calls", _calls("r1", pk, [("a", 1, True, None), ("b", 1, False, "invalid_json")]), "call_id")
    asked: list[str] = []
    query = wh.query
    monkeypatch.setattr(wh, "query", lambda sql, params=None: (asked.append(sql), query(sql, params))[1])
    alone = [C.evaluate_llm_failures(wh, "r1", pk) for _ in range(2)]
    per_call = len(asked)
    asked.clear()
    with C.counts_shared():
        shared = [C.evaluate_llm_failures(wh, "r1", pk) for _ in range(4)]
        assert len(asked) == per_call // 2                     # the first table's queries only
        other = C.evaluate_llm_failures(wh, "r1", "other|cell")  # another partition: its own query
        assert len(asked) == per_call and other.metadata["llm_requests"].value == 0
    assert [r.metadata for r in shared] == [alone[0].metadata] * 4  # the same verdicts
    assert shared[0].metadata["failed_requests"].value == 1
    asked.clear()
    C.evaluate_llm_failures(wh, "r1", pk)                      # outside a step: read again
    assert len(asked) == per_call // 2
