"""The options each backend reads from `models.<name>.extra`: the one list config validation checks.

`extra` is part of a model's identity (it changes answers, so it marks cells stale); an unknown
key such as `n_ctxx` would be ignored by the backend yet still invalidate every cell of the
model. Config validation therefore rejects any key not listed here. When a backend starts
reading a new key, add it here (and only here).
"""
from __future__ import annotations

# vLLM: `extra` goes to `vllm.LLM(...)` (engine arguments), except the chat-template keys.
VLLM_CHAT_TEMPLATE_OPTIONS = frozenset({"enable_thinking"})
VLLM_ENGINE_OPTIONS = frozenset({
    "tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "dtype", "kv_cache_dtype", "trust_remote_code", "enforce_eager", "download_dir",
    "tokenizer", "tokenizer_mode", "tokenizer_revision", "seed", "swap_space", "cpu_offload_gb",
    "enable_chunked_prefill", "enable_prefix_caching", "load_format", "distributed_executor_backend",
    "hf_overrides", "max_logprobs", "disable_custom_all_reduce", "limit_mm_per_prompt",
})

BACKEND_OPTIONS: dict[str, frozenset[str]] = {
    "embedded": frozenset({"n_ctx", "n_threads", "model_path", "repeat_penalty", "grammar_max_string_chars"}),
    # tokenizer: read by 100-Endings position counting (wse_platform/endings/tokens.py), not the backend
    "litellm": frozenset({"structured_output", "max_retries", "retry_base_s", "timeout_s", "tokenizer"}),
    "vllm": VLLM_ENGINE_OPTIONS | VLLM_CHAT_TEMPLATE_OPTIONS,
}


def unknown_options(backend: str, extra: dict) -> list[str]:
    """Keys of `extra` that `backend` does not read (sorted)."""
    known = BACKEND_OPTIONS.get(backend, frozenset())
    return sorted(str(k) for k in extra if k not in known)
