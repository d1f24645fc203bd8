"""Infrastructure failures: the environment failed, not the model.

A model failure (invalid or truncated output after retries, a provider error on one
request) is part of the benchmark and is recorded as `LLMResult.failure`. An
infrastructure failure (missing API key, authentication refused, no server reachable,
the response cache or the warehouse unreadable) says nothing about the model: the
client raises `LLMInfrastructureError`, so the asset fails, writes no metric and its
partition stays missing/stale until a run succeeds. Results are never computed from
calls that could not be made.
"""
from __future__ import annotations


class LLMInfrastructureError(RuntimeError):
    """Raised by the LLM client when calls could not be made for a reason outside the model."""


class CacheCorrupted(LLMInfrastructureError):
    """The response cache file is not a readable SQLite database (truncated, overwritten...)."""


class LLMTransportError(LLMInfrastructureError):
    """Calls whose transport failed after every retry (timeout, 429, 5xx, an answer that is not a
    completion): the server, not the model. No result; the run fails and the next run asks again."""
