"""litellm's model map (prices, structured-output support) read as data, without importing litellm.

Importing litellm takes seconds; the direct OpenAI-compatible path (openai_http.py) only needs
two facts per model from litellm's bundled JSON map, read once per process.
"""
from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

_FILE = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def model_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / _FILE
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
    return {}


@functools.lru_cache(maxsize=256)
def model_info(model_id: str) -> dict[str, Any]:
    """The map's entry for a litellm model string (`openai/gpt-4o-mini` or `gpt-4o-mini`), or {}."""
    table = model_map()
    if model_id in table:
        return table[model_id]
    _, _, bare = model_id.partition("/")
    return table.get(bare, {}) if bare else {}


def supports_response_schema(model_id: str) -> bool:
    return bool(model_info(model_id).get("supports_response_schema"))


def cost(model_id: str, tokens_in: int, tokens_out: int) -> float | None:
    info = model_info(model_id)
    p_in, p_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if p_in is None and p_out is None:
        return None
    return tokens_in * float(p_in or 0.0) + tokens_out * float(p_out or 0.0)
