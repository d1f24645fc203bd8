"""The one LLM call path: every agent, judge and auditor goes through `LLMClient`."""
import os

# litellm fetches its model cost map from the network at import unless told not to (seconds lost
# offline); set before any module (the client, token counters) imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from wse_platform.llm.backends import Backend, BackendCall, BackendResponse, ScriptedBackend
from wse_platform.llm.client import LLMClient
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Message, Sampling

__all__ = ["Backend", "BackendCall", "BackendResponse", "LLMClient", "LLMFailure", "LLMRequest", "LLMResult",
           "Message", "Sampling", "ScriptedBackend"]
