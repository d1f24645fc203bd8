"""A test double: canned texts per role (or a callable) instead of a model.

Other domain tests run through the real client path (cache, validation, retries,
accounting) with this backend plugged in for a config model name:

    ScriptedBackend({"ncp.narrator": ['{"text": "..."}'], "ncp.auditor": "Y"})
    ScriptedBackend(lambda call: '{"text": "%s"}' % call.role)

Per role, a string is returned for every sample; a list is consumed in order, one
entry per sample, and its last entry repeats once exhausted; a callable gets the
`BackendCall` and returns one text or a list of n texts. An `Exception` instance as
an entry simulates a transport error (an `LLMInfrastructureError` an infrastructure
one: missing key, server down); `Cut("...")` a text cut by the token limit (finish
reason `length`). `calls` lists every call received.
"""
from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Union

from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, OnResult
from wse_platform.llm.errors import LLMInfrastructureError


class Cut(str):
    """A scripted text the backend reports as cut by max_tokens (finish reason `length`)."""

Entry = Union[str, Exception]
Script = Union[Mapping[str, Any], Callable[[BackendCall], Any]]


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, script: Script, namespace: str | None = None):
        if not callable(script) and not isinstance(script, Mapping):
            raise TypeError("ScriptedBackend(script): a mapping role -> texts, or a callable(call) -> text(s)")
        self.script = script
        self._pos: dict[str, int] = {}
        self._lock = threading.Lock()
        self.calls: list[BackendCall] = []
        self._namespace = namespace or self._default_namespace(script)

    @staticmethod
    def _default_namespace(script: Script) -> str:
        """Same script data -> same cache entries (a rerun replays); callables are per instance."""
        if callable(script) or any(callable(v) for v in script.values()):
            return f"scripted:{uuid.uuid4().hex}"
        blob = json.dumps({k: v if isinstance(v, (str, list)) else repr(v) for k, v in script.items()},
                          sort_keys=True, default=repr)
        return "scripted:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def cache_namespace(self) -> str:
        return self._namespace

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    def _next(self, role: str, call: BackendCall) -> list[Entry]:
        spec = self.script if callable(self.script) else self.script.get(role, self.script.get("*"))
        if spec is None:
            return [RuntimeError(f"ScriptedBackend has no script for role {role!r} "
                                 f"(scripted roles: {sorted(self.script)})")]
        if callable(spec):
            out = spec(call)
            return [out] if isinstance(out, (str, Exception)) else list(out)
        if isinstance(spec, (str, Exception)):
            return [spec] * call.n
        if not spec:
            return [RuntimeError(f"ScriptedBackend: empty script for role {role!r}")]
        entries = []
        for _ in range(call.n):
            i = self._pos.get(role, 0)
            entries.append(spec[min(i, len(spec) - 1)])
            self._pos[role] = i + 1
        return entries

    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        out = []
        for i, call in enumerate(calls):
            with self._lock:
                self.calls.append(call)
                entries = self._next(call.role, call)
            err = next((e for e in entries if isinstance(e, Exception)), None)
            if err is not None:
                resp = BackendResponse(error=f"{type(err).__name__}: {err}",
                                       infrastructure=isinstance(err, LLMInfrastructureError))
            else:
                texts = [str(e) for e in entries]
                prompt_words = sum(len(m.get("content", "").split()) for m in call.messages)
                resp = BackendResponse(texts=texts, tokens_in=prompt_words,
                                       tokens_out=sum(len(t.split()) for t in texts),
                                       meta={"finish_reasons": ["length" if isinstance(e, Cut) else "stop"
                                                                for e in entries]})
            out.append(resp)
            if on_result is not None:
                on_result(i, resp)
        return out
