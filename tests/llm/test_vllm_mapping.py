"""Our mapping of requests onto vLLM's offline API, checked against a fake `vllm` module.

vLLM needs a GPU, so this does not run vLLM: it checks that we build `vllm.LLM`,
`SamplingParams` and `StructuredOutputsParams` (vLLM >= 0.12 names) as intended and
send the whole batch in one `LLM.chat` call.
"""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.backends import attempt_seed


@dataclass
class FakeStructuredOutputsParams:
    json: dict | None = None
    choice: list | None = None


@dataclass
class FakeSamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    min_p: float = 0.0
    max_tokens: int = 16
    seed: int | None = None
    structured_outputs: FakeStructuredOutputsParams | None = None


@dataclass
class FakeLLM:
    kwargs: dict
    chats: list = field(default_factory=list)

    def chat(self, conversations, sampling_params, use_tqdm=True, chat_template_kwargs=None):
        self.chats.append((conversations, sampling_params, chat_template_kwargs))
        outs = []
        for conv, sp in zip(conversations, sampling_params):
            if sp.structured_outputs and sp.structured_outputs.choice:
                texts = [sp.structured_outputs.choice[0]] * sp.n
            elif sp.structured_outputs and sp.structured_outputs.json:
                texts = ['{"verdict": "fine"}'] * sp.n
            else:
                texts = [f"echo {conv[-1]['content']}"] * sp.n
            outs.append(types.SimpleNamespace(
                prompt_token_ids=[1, 2, 3],
                outputs=[types.SimpleNamespace(text=t, token_ids=[7, 8]) for t in texts]))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    engines = []
    mod = types.ModuleType("vllm")
    mod.SamplingParams = FakeSamplingParams
    mod.LLM = lambda **kw: engines.append(FakeLLM(kw)) or engines[-1]
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = FakeStructuredOutputsParams
    mod.sampling_params = sp
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    import wse_platform.llm.backends.vllm_backend as vb
    monkeypatch.setattr(vb, "_ENGINES", {})
    return engines


class Verdict(BaseModel):
    verdict: str


def test_batch_maps_to_one_chat_call_with_structured_outputs(fake_vllm, tmp_path):
    settings = make_settings(tmp_path, qwen={
        "backend": "vllm", "model_id": "Qwen/Qwen3-8B", "revision": "abc123", "quantization": "fp8",
        "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 100, "min_p": 0.05, "seed": 11},
        "extra": {"tensor_parallel_size": 2, "enable_thinking": False}})
    client = LLMClient(settings)
    msgs = [{"role": "user", "content": "hi"}]
    results = client.complete_many([
        LLMRequest(role="j", model="qwen", messages=msgs, output_model=Verdict),
        LLMRequest(role="c", model="qwen", messages=msgs, choices=["Y", "N"], n=3),
        LLMRequest(role="t", model="qwen", messages=msgs, sampling={"temperature": 0.0}),
    ])
    assert [r.ok for r in results] == [True, True, True]
    assert results[0].output == Verdict(verdict="fine") and results[1].outputs == ["Y", "Y", "Y"]
    assert results[2].output == "echo hi" and results[2].tokens_in == 3 and results[2].tokens_out == 2

    (engine,) = fake_vllm
    assert engine.kwargs == {"model": "Qwen/Qwen3-8B", "enable_prefix_caching": True, "revision": "abc123",
                             "quantization": "fp8", "tensor_parallel_size": 2}
    assert len(engine.chats) == 1  # the whole batch in one engine call
    convs, params, template_kwargs = engine.chats[0]
    assert len(convs) == 3 and template_kwargs == {"enable_thinking": False}
    j, c, t = params
    assert j.structured_outputs == FakeStructuredOutputsParams(json=Verdict.model_json_schema())
    assert c.structured_outputs == FakeStructuredOutputsParams(choice=["Y", "N"]) and c.n == 3
    assert (j.temperature, j.top_p, j.min_p, j.max_tokens) == (0.6, 0.95, 0.05, 100)
    assert t.temperature == 0.0 and t.structured_outputs is None
    assert j.seed == c.seed == t.seed == attempt_seed(11, "unused", 1)  # the configured seed, attempt 1


def test_vllm_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    settings = make_settings(tmp_path, big={"backend": "vllm", "model_id": "Qwen/Qwen3-32B"})
    with pytest.raises(RuntimeError, match=r"wse-platform\[vllm\]"):
        LLMClient(settings).complete(LLMRequest(role="t", model="big", messages=[{"role": "user", "content": "x"}]))


@pytest.mark.parametrize("mode,flag", [("off", False), ("on", True), ("high", True)])
def test_reasoning_mode_maps_to_enable_thinking_and_is_model_identity(fake_vllm, tmp_path, mode, flag):
    settings = make_settings(tmp_path, qwen={"backend": "vllm", "model_id": "Qwen/Qwen3-8B", "reasoning": mode,
                                             "extra": {"enable_thinking": not flag}})  # `reasoning` wins
    client = LLMClient(settings)
    client.complete(LLMRequest(role="t", model="qwen", messages=[{"role": "user", "content": "hi"}]))
    (engine,) = fake_vllm
    assert engine.chats[0][2] == {"enable_thinking": flag}
    assert settings.models["qwen"].identity()["reasoning"] == mode
    assert "reasoning" not in make_settings(tmp_path).models["smollm2"].identity()  # unset: identity unchanged

