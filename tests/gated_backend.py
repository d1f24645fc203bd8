"""A scripted backend with a hook that runs outside the backend's lock, before each call is answered:
a slow server for the continuous-flow tests (tests/*/test_flow*.py)."""
from __future__ import annotations

from wse_platform.llm import ScriptedBackend


class GatedBackend(ScriptedBackend):
    """`before(call)` may block (wait for an event, sleep) without holding up other threads' calls."""

    def __init__(self, script, before, namespace: str = "gated"):
        super().__init__(script, namespace=namespace)
        self.before = before

    def generate(self, calls, on_result=None):
        out = []
        for i, call in enumerate(calls):
            self.before(call)
            resp = super().generate([call])[0]
            out.append(resp)
            if on_result is not None:
                on_result(i, resp)
        return out
