"""The one LLM call path: every agent, judge and auditor goes through `LLMClient`.

Names are imported on first use (PEP 562): `wse_platform.config` imports a light submodule of
this package, and loading the settings should not import polars, the client and its backends."""
import importlib
import os

# litellm fetches its model cost map from the network at import unless told not to (seconds lost
# offline); set before any module (the client, token counters) imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_EXPORTS = {
    "usage_summary": "wse_platform.llm.accounting",
    "Backend": "wse_platform.llm.backends", "BackendCall": "wse_platform.llm.backends",
    "BackendResponse": "wse_platform.llm.backends", "ScriptedBackend": "wse_platform.llm.backends",
    "LLMClient": "wse_platform.llm.client",
    "CacheCorrupted": "wse_platform.llm.errors", "LLMInfrastructureError": "wse_platform.llm.errors",
    "LLMTransportError": "wse_platform.llm.errors",
    "LLMFailure": "wse_platform.llm.types", "LLMRequest": "wse_platform.llm.types", "LLMResult": "wse_platform.llm.types",
    "Message": "wse_platform.llm.types", "Sampling": "wse_platform.llm.types",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
