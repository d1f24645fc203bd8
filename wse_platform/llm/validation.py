"""Turn one raw sample into what the caller asked for, or say precisely why not.

Grammar-constrained backends produce bare JSON; providers reached through
"instruct + parse" may wrap it in prose or a code fence, so JSON is also looked
for inside a fence or between the outermost braces before giving up.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_STRIP = " \t\r\n\"'`.*"


def is_text_format(output_model: type[BaseModel]) -> bool:
    """An output class read from a line format, not JSON: it has `from_text(text) -> instance`
    (raising ValueError when the text does not follow the format). No JSON schema is sent."""
    return callable(getattr(output_model, "from_text", None))


@lru_cache(maxsize=None)
def schema_of(output_model: type[BaseModel]) -> tuple[dict[str, Any] | None, str]:
    """JSON schema of an output class and its canonical JSON text, computed once per class
    (a line-format class: no schema, its qualified name keys the cache)."""
    if is_text_format(output_model):
        return None, f"text-format:{output_model.__module__}.{output_model.__qualname__}"
    schema = output_model.model_json_schema()
    return schema, json.dumps(schema, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Parsed:
    ok: bool
    value: Any = None
    error_kind: str | None = None
    message: str = ""


def _json_candidates(text: str) -> list[str]:
    out = [text]
    out += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        out.append(text[start:end + 1])
    return out


def parse_json(text: str, output_model: type[BaseModel]) -> Parsed:
    if not text.strip():
        return Parsed(False, error_kind="empty_output", message="empty output")
    schema_error: str | None = None
    for candidate in _json_candidates(text.strip()):
        try:
            # strict=False: raw newlines/tabs inside strings are accepted (small models and some
            # grammars emit them); the content is kept as written, nothing is defaulted.
            data = json.loads(candidate, strict=False)
        except ValueError:
            continue
        try:
            return Parsed(True, value=output_model.model_validate(data))
        except ValidationError as err:
            schema_error = f"{output_model.__name__}: {err.errors()[0]['loc']} {err.errors()[0]['msg']}"
    if schema_error is not None:
        return Parsed(False, error_kind="schema_violation", message=schema_error)
    return Parsed(False, error_kind="invalid_json", message="output is not JSON")


def parse_choice(text: str, choices: list[str]) -> Parsed:
    """Exact choice, else case-insensitive, else a reply that starts with exactly one choice."""
    clean = text.strip(_STRIP)
    if not clean:
        return Parsed(False, error_kind="empty_output", message="empty output")
    if clean in choices:
        return Parsed(True, value=clean)
    lower = {c.lower(): c for c in choices}
    if clean.lower() in lower:
        return Parsed(True, value=lower[clean.lower()])
    starts = [c for c in choices
              if re.match(re.escape(c.lower()) + r"(?![\w])", clean.lower())]
    if len(starts) == 1:
        return Parsed(True, value=starts[0])
    return Parsed(False, error_kind="invalid_choice", message=f"{clean[:60]!r} is not one of {choices}")


def parse_text(text: str) -> Parsed:
    if not text.strip():
        return Parsed(False, error_kind="empty_output", message="empty output")
    return Parsed(True, value=text)


def parse_text_format(text: str, output_model: type[BaseModel]) -> Parsed:
    if not text.strip():
        return Parsed(False, error_kind="empty_output", message="empty output")
    try:
        return Parsed(True, value=output_model.from_text(text))  # type: ignore[attr-defined]
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        return Parsed(False, error_kind="schema_violation", message=f"{output_model.__name__}: {err}")


def parse_sample(text: str, output_model: type[BaseModel] | None, choices: list[str] | None) -> Parsed:
    if output_model is not None and is_text_format(output_model):
        return parse_text_format(text, output_model)
    if output_model is not None:
        return parse_json(text, output_model)
    if choices is not None:
        return parse_choice(text, choices)
    return parse_text(text)


_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def split_reasoning(text: str) -> tuple[str, str | None]:
    """(answer, reasoning): a `<think>…</think>` block is never part of the answer.

    Handles a leading block, a block whose opening tag was in the prompt (Qwen3's chat
    template can add it: text then `</think>`), and an unclosed block (reasoning cut by the
    token limit: the answer is empty)."""
    stripped = text.lstrip()
    if stripped.startswith(_THINK_OPEN):
        body = stripped[len(_THINK_OPEN):]
        end = body.find(_THINK_CLOSE)
        if end < 0:
            return "", body.strip()
        return body[end + len(_THINK_CLOSE):].lstrip(), body[:end].strip()
    end = text.find(_THINK_CLOSE)
    if end >= 0 and _THINK_OPEN not in text[:end]:
        return text[end + len(_THINK_CLOSE):].lstrip(), text[:end].strip()
    return text, None
