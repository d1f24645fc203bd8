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
