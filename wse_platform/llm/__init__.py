"""The one LLM call path: every agent, judge and auditor goes through `LLMClient`."""
from wse_platform.llm.backends import Backend, BackendCall, BackendResponse, ScriptedBackend
from wse_platform.llm.client import LLMClient
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Message, Sampling

__all__ = ["Backend", "BackendCall", "BackendResponse", "LLMClient", "LLMFailure", "LLMRequest", "LLMResult",
           "Message", "Sampling", "ScriptedBackend"]
