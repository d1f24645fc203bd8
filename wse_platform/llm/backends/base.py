"""The backend interface: the client hands a backend a whole batch of calls at once.

Backends know nothing about roles, pydantic models, retries or the cache; they turn
(messages, sampling, n, schema | choices, seed) into `n` raw texts. Keeping them this
small is what lets the client own validation, caching and accounting in one place.
"""
from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wse_platform.llm.errors import LLMInfrastructureError
from wse_platform.llm.types import Message, Sampling

_SEED_MOD = 2**31 - 1


def attempt_seed(seed: int | None, request_key: str, attempt: int) -> int:
    """Seed of one attempt: a retry samples differently, a rerun samples the same.

    Without a configured seed the seed is derived from the request's content hash,
    so outputs are reproducible even with the cache bypassed.
    """
    base = seed if seed is not None else int(request_key[:8], 16)
    return (base * 1_000_003 + (attempt - 1) * 7_919) % _SEED_MOD


def sample_seed(seed: int, index: int) -> int:
    """Seed of sample `index` of an n-sample call (sample 0 keeps the call's seed)."""
    return (seed + index * 104_729) % _SEED_MOD


@dataclass(frozen=True)
class BackendCall:
    """One backend call: n samples of one prompt."""

    model_id: str
    messages: list[Message]
    sampling: Sampling            # merged over the model's defaults; `seed` is ignored, see `seed`
    n: int
    seed: int                     # seed of this attempt (see attempt_seed)
    json_schema: dict[str, Any] | None = None
    choices: list[str] | None = None
    role: str = ""                # informational (test doubles script per role)
    attempt: int = 1
    priority: int = 0             # the endpoint limiter's order only (limiter.take_hint); never sent


@dataclass
class BackendResponse:
    """`texts` has n entries unless `error` is set (transport/provider failure after retries).

    `infrastructure` marks an error that is not the model's (missing key, 401, no server
    reachable): the client raises instead of recording a failure. `meta` is cached with the
    texts; the keys the client reads are listed in META_KEYS."""

    texts: list[str] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cost_usd: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"prompt_truncated_tokens": 120}
    infrastructure: bool = False


META_KEYS = {
    "finish_reasons": "one per sample: 'stop', 'length' (cut by max_tokens), ... (None: not reported)",
    "reasoning": "one per sample: a provider's separate reasoning text (None when there is none)",
    "reasoning_tokens": "reasoning tokens the provider reported for the call",
    "endpoint": "the api_base that answered (several endpoints per model)",
    "prompt_truncated_tokens": "tokens cut from the prompt to fit the context window",
}


OnResult = Callable[[int, BackendResponse], None]


class BackendUnavailable(LLMInfrastructureError):
    """The runtime or model file is not installed: a setup problem, raised with the fix (not a failure)."""


class Backend(abc.ABC):
    """A model runtime. `name` is the backend kind recorded in llm_calls."""

    name: str = "backend"

    def cache_namespace(self) -> str:
        """Part of every cache key: answers of different runtimes never mix."""
        return self.name

    @abc.abstractmethod
    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        """Answer every call (same order). Call `on_result(i, response)` as each one completes
        so the client can cache it at once (a crash mid-batch loses nothing answered).
        Must not raise for a single bad call: return a response with `error` set."""

    def close(self) -> None:  # pragma: no cover - optional
        pass
