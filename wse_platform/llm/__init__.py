"""The one LLM call path: every agent, judge and auditor goes through `LLMClient`."""
import os

# litellm fetches its model cost map from the network at import unless told not to (seconds lost
# offline); set before any module (the client, token counters) imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from wse_platform.llm.accounting import usage_summary  # noqa: E402
from wse_platform.llm.backends import Backend, BackendCall, BackendResponse, ScriptedBackend  # noqa: E402
from wse_platform.llm.client import LLMClient  # noqa: E402
from wse_platform.llm.errors import CacheCorrupted, LLMInfrastructureError  # noqa: E402
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Message, Sampling  # noqa: E402

__all__ = ["Backend", "BackendCall", "BackendResponse", "CacheCorrupted", "LLMClient", "LLMFailure",
           "LLMInfrastructureError", "LLMRequest", "LLMResult", "Message", "Sampling", "ScriptedBackend",
           "usage_summary"]
