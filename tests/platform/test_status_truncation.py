"""`wse status` shows the share of truncated LLM calls (issue 12), read from `llm_calls` rows
written by the accounting writer; nothing is printed when the warehouse has no LLM calls."""
from __future__ import annotations

from datetime import datetime

from wse_platform.llm.accounting import write_call_records
from wse_platform.llm.truncation_report import truncation_lines
from wse_platform.warehouse import Warehouse


def _rec(i: int, role: str, model: str, error_kind: str | None = None, finish: str = "stop") -> dict:
    return {"call_id": f"c{i}", "run_id": "r1", "role": role, "model": model, "backend": "scripted",
            "request_key": f"k{i}", "attempt": 1, "n_samples": 1, "tokens_in": 10, "tokens_out": 5,
            "latency_s": 0.1, "cache_hit": False, "valid": error_kind is None, "error_kind": error_kind,
            "created_at": datetime(2026, 12, 1), "finish_reason": finish}


def _records() -> list[dict]:
    recs = [_rec(i, "wse.consistency_judge", "m1") for i in range(6)]  # 6 calls, none truncated
    recs += [_rec(10 + i, "endings.judge", "m2", "truncated" if i < 2 else None,
                  "length" if i < 2 else "stop") for i in range(4)]  # 2 of 4 truncated
    recs += [_rec(20, "ncp.auditor", "m1", "invalid_json")]  # a failure of another kind
    return recs


def test_truncated_share_per_benchmark_and_worst_role_model(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    assert write_call_records(wh, _records()) == 11
    lines = truncation_lines(wh.path)
    assert lines[0] == "LLM calls: 11, truncated 18.2 % (2); answers cut by max_tokens 18.2 %"
    assert lines[1] == "  truncated by benchmark: endings 50.0 % of 4, ncp 0.0 % of 1, wse 0.0 % of 6"
    assert lines[2].startswith("  most truncated: endings.judge / m2 50.0 % of 4")


def test_no_block_without_llm_calls(tmp_path):
    assert truncation_lines(tmp_path / "absent.duckdb") == []
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    assert truncation_lines(wh.path) == []  # table exists, no rows
    write_call_records(wh, [_rec(1, "wse.richness_judge", "m1")])
    assert truncation_lines(wh.path)[0].startswith("LLM calls: 1, truncated 0.0 % (0)")
    assert len(truncation_lines(wh.path)) == 2  # no "most truncated" line when nothing was cut


def test_busy_warehouse_is_said_not_waited_for(tmp_path):
    from filelock import FileLock

    wh = Warehouse(tmp_path / "wh.duckdb")
    write_call_records(wh, _records())
    with FileLock(str(wh.path) + ".lock"):  # a run holding the warehouse
        assert truncation_lines(wh.path, lock_timeout=0.2) == [
            "LLM calls: not read (the warehouse is busy or unreadable; see `llm_usage` later)"]
    assert truncation_lines(wh.path)[0].startswith("LLM calls: 11,")


def test_wse_status_prints_the_block(config_file, capsys):
    from resources.settings import settings_for
    from wse_platform import cli

    write_call_records(Warehouse(settings_for(str(config_file)).warehouse), _records())
    assert cli.main(["--config", str(config_file), "status"]) == 0
    out = capsys.readouterr().out
    assert "LLM calls: 11, truncated 18.2 % (2)" in out
    assert "most truncated: endings.judge / m2 50.0 % of 4" in out
