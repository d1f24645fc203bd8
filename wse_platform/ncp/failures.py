"""Episodes without a result (a call still failing after retries) and their retry by the next run.

The reference runner stops an episode whose call fails its retry budget and writes no result file,
so a rerun plays it again. Here the failure is kept in `ncp_failed_episodes` (replaced with each
run of the cell, one `analysis` per episode table: live cells, re-audit, ablation) and the next
run plays every episode again (answers come from the cache). A failed call's answers are cached
too (paid answers are never lost), so replaying the same attempts would fail the same way: the
next run gives each request more attempts (one more round of the client's budget per earlier run
with failures), so the failing request gets fresh, differently seeded attempts while every
request that succeeded stops at its cached answer.

Transport failures (`LLMTransportError`: timeouts, 429/5xx, an answer that is not a completion,
after the backend's retries) are caught per episode (`each_episode`): that episode has no result
(kind `transport`) and the other episodes go on. Unless the server is down: when every episode
that sent a request to the server in this run (episodes answered wholly from the cache left
aside) failed on transport, the run fails as an infrastructure failure (issue 23: the command
stops, no aggregate is built over it). A refused connection is `LLMInfrastructureError`, never
caught here.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from wse_platform import flow
from wse_platform.llm.client import MAX_ATTEMPTS
from wse_platform.llm.errors import LLMTransportError

T = TypeVar("T")

# `ncp_failed_episodes.analysis`: the table the episode's result would be in
ANALYSIS_CELLS, ANALYSIS_REAUDIT, ANALYSIS_ABLATION = "ncp_episodes", "ncp_reaudit_episodes", "ncp_ablation_episodes"


def retry_round(warehouse: Any, key: Mapping[str, Any]) -> int:
    """0 when the last run of this partition left no episode without a result, else that run's round + 1."""
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


@contextmanager
def attempts_for_retry(client: Any, round_: int) -> Iterator[None]:
    """`extend_attempts_for_retry` for one analysis of a session (the client's budget is restored after)."""
    before = getattr(client, "max_attempts", None)
    extend_attempts_for_retry(client, round_)
    try:
        yield
    finally:
        if hasattr(client, "max_attempts"):
            client.max_attempts = before


class EpisodeCalls:
    """The client as one episode uses it: counts the requests the server answered for this episode
    (cache hits left out) and notes the request whose transport failed."""

    def __init__(self, client: Any):
        self._client = client
        self.fresh = 0
        self.transport: tuple[str, int, LLMTransportError] | None = None  # (role, turn, error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def complete(self, req: Any) -> Any:
        return self.complete_many([req])[0]

    def complete_many(self, reqs: list) -> list:
        try:
            results = self._client.complete_many(reqs)
        except LLMTransportError as err:
            roles = sorted({r.role for r in reqs})
            turns = [int(r.tags["turn"]) for r in reqs if str(r.tags.get("turn", "")).isdigit()]
            self.transport = (",".join(roles), min(turns) if turns else 0, err)
            raise
        self.fresh += sum(not getattr(r, "cache_hit", False) for r in results)
        return results

    @property
    def reached_server(self) -> bool:
        return self.fresh > 0 or self.transport is not None


def each_episode(client: Any, items: Sequence[T], play: Callable[[Any, T], list], failed_run: Callable[[T], Any],
                 *, models: Sequence[str | None] = (), on_done: Callable[[int, int], None] | None = None) -> list:
    """`play(client, item)` (a list of `EpisodeRun`) for every item, each on its own (`flow.each`); an
    item whose transport failed becomes `failed_run(item)` marked FAILED with kind `transport`.
    Raises `LLMTransportError` when every item that reached the server failed on transport."""
    def one(c: Any, item: T) -> tuple[list, EpisodeCalls]:
        calls = EpisodeCalls(c)
        try:
            return play(calls, item), calls
        except LLMTransportError as err:
            role, turn, _ = calls.transport or ("(unknown)", 0, err)
            run = failed_run(item)
            run.fail_with(role, f"transport: {err}", turn, None, kind="transport")
            return [run], calls

    parts = flow.each(client, list(items), one, models=list(models), on_done=on_done)
    reached = [calls for _, calls in parts if calls.reached_server]
    if reached and all(c.transport is not None for c in reached):
        first = reached[0].transport
        assert first is not None
        raise LLMTransportError(
            f"every episode that sent a request to the server failed on transport ({len(reached)} of "
            f"{len(parts)} episodes; {len(parts) - len(reached)} answered from the cache): the endpoint is down, "
            f"not the model. No result is written; the next run asks again. First failure ({first[0]}, turn "
            f"{first[1]}): {first[2]}") from first[2]
    return [run for runs, _ in parts for run in runs]
