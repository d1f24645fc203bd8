"""Episodes without a result (a call still failing after retries) and their retry by the next run.

The reference runner stops an episode whose call fails its retry budget and writes no result file,
so a rerun plays it again. Here the failure is kept in `ncp_failed_episodes` (replaced with each
run of the cell) and the next run of the cell plays every episode again (answers come from the
cache). A failed call's answers are cached too (paid answers are never lost), so replaying the
same attempts would fail the same way: the next run gives each request more attempts (one more
round of the client's budget per earlier run with failures), so the failing request gets fresh,
differently seeded attempts while every request that succeeded stops at its cached answer.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wse_platform.llm.client import MAX_ATTEMPTS


def retry_round(warehouse: Any, key: Mapping[str, Any]) -> int:
    """0 when the last run of this cell left no episode without a result, else that run's round + 1."""
    where = " AND ".join(f"{k} = ?" for k in key)
    try:
        df = warehouse.query(f"SELECT max(retry_round) AS r FROM ncp_failed_episodes WHERE {where}",
                             list(key.values()))
    except Exception:  # noqa: BLE001 - a warehouse without the table (older file) has no failures recorded
        return 0
    last = df["r"][0] if df.height else None
    return 0 if last is None else int(last) + 1


def extend_attempts_for_retry(client: Any, round_: int) -> None:
    """Round r gives every request (r + 1) times the client's attempt budget: cached attempts are replayed,
    the failing request gets fresh ones."""
    if round_ <= 0 or not hasattr(client, "max_attempts"):
        return
    client.max_attempts = (client.max_attempts or MAX_ATTEMPTS) * (round_ + 1)
