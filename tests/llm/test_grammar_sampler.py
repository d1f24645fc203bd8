"""The check-the-sampled-token grammar path (issue 13): same shapes as masking the vocabulary, cheaper."""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from tests.llm.conftest import needs_llama
from wse_platform.llm.backends import BackendCall
from wse_platform.llm.backends.embedded import EmbeddedBackend
from wse_platform.llm.backends.grammar_sampler import SAMPLER_TAG
from wse_platform.llm.validation import schema_of

pytestmark = needs_llama


class Beat(BaseModel):
    place: Literal["hall", "tower", "cellar"]
    tension: Literal["low", "medium", "high"]
    hint: str


def _call(settings, **kw) -> BackendCall:
    sampling = settings.model("smollm2").sampling.model_copy(update={"max_tokens": 48})
    return BackendCall(model_id="SmolLM2-135M-Instruct.Q4_1.gguf", n=1, seed=3, sampling=sampling,
                       messages=[{"role": "user", "content": "Describe the next story beat."}], **kw)


def test_every_token_is_grammar_checked_and_rejections_are_resampled(settings):
    backend = EmbeddedBackend(settings.model("smollm2"))
    assert backend.grammar_sampling == "check" and SAMPLER_TAG in backend.cache_namespace()
    # a closed choice the model would never start with on its own: its first sampled token is
    # rejected, so the answer is only right if the re-sampling path works
    resp = backend.generate([_call(settings, choices=["zygomorphic-quartz"])])[0]
    assert resp.error is None and resp.texts == ["zygomorphic-quartz"]
    assert backend.grammar_stats["resampled"] >= 1
    assert backend.grammar_stats["checked"] >= resp.tokens_out

    resp = backend.generate([_call(settings, json_schema=schema_of(Beat)[0])])[0]
    if resp.tokens_out < 48:  # finished within max_tokens: the grammar held to the end
        Beat.model_validate_json(resp.texts[0])
    else:
        assert resp.texts[0].startswith("{")
    # the llama-cpp-python hook is removed after each call
    assert "_init_sampler" not in vars(backend.llama())


def test_mask_and_check_give_the_same_shapes(settings):
    backend = EmbeddedBackend(settings.model("smollm2"))
    call = _call(settings, json_schema=schema_of(Beat)[0])
    shapes = {}
    for mode in ("mask", "check"):
        backend.grammar_sampling = mode
        resp = backend.generate([call])[0]
        assert resp.error is None
        if resp.tokens_out < 48:
            shapes[mode] = sorted(json.loads(resp.texts[0]))
    assert all(keys == ["hint", "place", "tension"] for keys in shapes.values())
    check_ns = backend.cache_namespace()  # the two samplers give different answers: never share a cache entry
    backend.grammar_sampling = "mask"
    assert backend.cache_namespace() != check_ns


def test_free_text_calls_are_untouched(settings):
    backend = EmbeddedBackend(settings.model("smollm2"))
    resp = backend.generate([_call(settings)])[0]
    assert resp.error is None and resp.texts[0]
    assert backend.grammar_stats == {}
