"""Faster grammar-constrained sampling for llama-cpp-python: check the sampled token, not the vocabulary.

llama-cpp-python puts the grammar sampler in front of top-k, so every output token runs the
grammar over all ~49k vocabulary entries: with a JSON-schema grammar that was 10.7 tokens/s
against ~100 unconstrained on SmolLM2 (issue 13). llama.cpp's own sampler (`common_sampler`,
used by llama-server) avoids this: sample with the ordinary chain, ask the grammar about that
one token, and only when the grammar rejects it mask the whole vocabulary and sample again.
This module does the same through llama.cpp's public C API (ctypes bindings shipped with
llama-cpp-python); it plugs into `Llama.generate` by replacing `_init_sampler` for the duration
of one call (`grammar_check_sampling`), the one place we touch a private name of llama-cpp-python.

Every emitted token is still accepted by the grammar, so outputs have the same shape; only the
sampling distribution differs slightly from masking first (a token the model prefers anyway is
kept), exactly as in llama.cpp's server. Validation after decoding is unchanged.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

SAMPLER_TAG = "gcheck2"  # part of the embedded cache namespace: answers differ from mask-first sampling

TOP_N = 128  # candidates the grammar sees first when the sampled token is rejected
_TOKEN_DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class GrammarCheckSampler:
    """Drop-in for llama-cpp-python's `LlamaSampler` in `Llama.generate` (`sample(ctx, idx)`).

    `base` is the ordinary chain (penalties, top-k/p, min-p, temperature, dist) built without
    the grammar; the grammar is a separate llama.cpp sampler that only sees tokens to check."""

    def __init__(self, llm: Any, base: Any, grammar: Any):
        import llama_cpp.llama_cpp as C

        self._C = C
        self.base = base
        self.grammar = C.llama_sampler_init_grammar(llm._model.vocab, grammar._grammar.encode("utf-8"),
                                                    grammar._root.encode("utf-8"))
        if not self.grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self.n_vocab = int(llm.n_vocab())
        self._ids = np.arange(self.n_vocab, dtype=np.int32)
        self._cands = np.zeros(self.n_vocab, dtype=_TOKEN_DTYPE)
        self._one = C.llama_token_data()
        self.checked = 0      # tokens sampled (statistics for tests and benches)
        self.resampled = 0    # tokens the grammar rejected, sampled again among allowed ones
        self.full_masks = 0   # ... of which needed the grammar over the whole vocabulary
        self._top = np.zeros(TOP_N, dtype=_TOKEN_DTYPE)

    def _all_candidates(self, ctx: Any, idx: int) -> Any:
        C = self._C
        logits = np.ctypeslib.as_array(C.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        self._cands["id"] = self._ids
        self._cands["logit"] = logits
        self._cands["p"] = 0.0
        return C.llama_token_data_array(data=self._cands.ctypes.data_as(C.llama_token_data_p),
                                        size=self.n_vocab, selected=-1, sorted=False)

    def _grammar_allows(self, token: int) -> bool:
        C = self._C
        self._one.id, self._one.logit, self._one.p = token, 1.0, 0.0
        one = C.llama_token_data_array(data=ctypes.pointer(self._one), size=1, selected=-1, sorted=False)
        C.llama_sampler_apply(self.grammar, ctypes.byref(one))
        return not math.isinf(self._one.logit)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        C = self._C
        cur = self._all_candidates(ctx, idx)
        C.llama_sampler_apply(self.base.sampler, ctypes.byref(cur))
        token = int(cur.data[cur.selected].id)
        self.checked += 1
        if not self._grammar_allows(token):
            self.resampled += 1
            token = self._resample(ctx, idx)
        C.llama_sampler_accept(self.base.sampler, token)
        C.llama_sampler_accept(self.grammar, token)
        return token

    def _resample(self, ctx: Any, idx: int) -> int:
        """A grammar-allowed token: among the TOP_N most likely tokens when any is allowed (the
        grammar then runs on TOP_N entries, not the vocabulary), else over the whole vocabulary."""
        C = self._C
        cur = self._all_candidates(ctx, idx)
        top = np.argpartition(self._cands["logit"], -TOP_N)[-TOP_N:]
        self._top[:] = self._cands[top]
        small = C.llama_token_data_array(data=self._top.ctypes.data_as(C.llama_token_data_p), size=TOP_N,
                                         selected=-1, sorted=False)
        C.llama_sampler_apply(self.grammar, ctypes.byref(small))
        if np.isfinite(self._top["logit"]).any():
            cur = small
        else:
            self.full_masks += 1
            C.llama_sampler_apply(self.grammar, ctypes.byref(cur))
        C.llama_sampler_apply(self.base.sampler, ctypes.byref(cur))
        return int(cur.data[cur.selected].id)

    def close(self) -> None:
        if self.grammar:
            self._C.llama_sampler_free(self.grammar)
            self.grammar = None
        self.base.close()

    def __del__(self) -> None:  # noqa: D105
        with contextlib.suppress(Exception):
            self.close()


@contextlib.contextmanager
def grammar_check_sampling(llm: Any, stats: dict[str, int] | None = None) -> Iterator[None]:
    """Within the block, `llm` samples grammar-constrained calls with `GrammarCheckSampler`.

    Replaces the instance's `_init_sampler` (a private method of llama-cpp-python's `Llama`)
    and restores it on exit; calls without a grammar are untouched. `stats` (if given) receives
    how many tokens were checked and how many had to be re-sampled."""
    original = llm._init_sampler
    made: list[GrammarCheckSampler] = []

    def init_sampler(*args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        base = original(*args, grammar=None, **kwargs)
        if grammar is None:
            return base
        made.append(GrammarCheckSampler(llm, base, grammar))
        return made[-1]

    llm._init_sampler = init_sampler
    try:
        yield
    finally:
        del llm._init_sampler
        llm._sampler = None
        if stats is not None:
            stats["checked"] = stats.get("checked", 0) + sum(s.checked for s in made)
            stats["resampled"] = stats.get("resampled", 0) + sum(s.resampled for s in made)
            stats["full_masks"] = stats.get("full_masks", 0) + sum(s.full_masks for s in made)
        for s in made:
            s.close()
