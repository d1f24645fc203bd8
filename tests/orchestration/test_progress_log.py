"""Runs log progress (done/total, failures, ETA) every N LLM requests, not one silent line (issue 13)."""
from __future__ import annotations

import logging

from wse_platform.llm.progress import LOG_EVERY_N, BatchProgress


def test_progress_lines_every_n_requests_with_failures_and_eta(caplog):
    caplog.set_level(logging.INFO, logger="wse_platform.llm")
    p = BatchProgress(200, "LLM wse.narrator", enabled=True)
    for i in range(200):
        p.advance(failed=i % 10 == 0)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) >= 200 // LOG_EVERY_N  # not one line per 10 % only
    assert "30/200 requests, 3 failed" in "\n".join(lines)
    assert all("ETA" in line for line in lines)


def test_small_batches_of_slow_calls_log_each_slow_request(caplog):
    """A cell made of one-request batches (a CPU model, one call per agent and step) still logs:
    a request finishing `slow_s` after the batch started or the last line gets its own line."""
    caplog.set_level(logging.INFO, logger="wse_platform.llm")
    fast = BatchProgress(2, "LLM wse.story_agent", enabled=True, slow_s=60.0)
    fast.advance()
    fast.advance()
    assert caplog.records == []          # quick small batches stay quiet
    slow = BatchProgress(2, "LLM wse.story_agent", enabled=True, slow_s=0.0)
    slow.advance(failed=True)
    slow.advance()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "1/2 requests, 1 failed" in lines[0] and "ETA" in lines[1]
    quiet = BatchProgress(2, "LLM x", enabled=False, slow_s=0.0)
    quiet.advance()
    assert len(caplog.records) == 2      # progress=False silences it
