"""The one LLM call path. (Being implemented: client, cache, backends.)"""
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, Message, Sampling

__all__ = ["LLMFailure", "LLMRequest", "LLMResult", "Message", "Sampling"]
