"""Story ideas for the generated sets: free text of any length, metadata optional.

The paper feeds the 32 EQ-Bench prompts verbatim (75-560 words each) and says the pipeline
takes "a story idea of any length". So an idea IS its text; anything else (genre,
title, source, a pinned warm-up reference) is optional metadata that never reaches a prompt.

Accepted files:

- YAML: ``ideas:`` a list whose items are a string (the idea) or a mapping with ``text``
  (or ``prompt``), an optional ``id`` and ``reference`` ({title, author, file}), every other
  key kept as metadata. A mapping without text but with the structured fields
  ``genre`` / ``characters`` / ``setting`` / ``constraints`` is written out as text.
- JSONL: one idea per line, a JSON string or an object with the same keys.

Errors name the file, the idea (index and id) and the field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from wse_platform.inputs import InputFileError, check_input, load_yaml, read_input_text

TEXT_KEYS = ("text", "prompt")
STRUCTURED = ("genre", "characters", "setting", "constraints")


class IdeasError(ValueError):
    pass


@dataclass(frozen=True)
class Reference:
    """A warm-up reference: title mode (recalled), or full text read from `file`."""

    title: str
    author: str | None = None
    file: str | None = None

    @property
    def mode(self) -> str:
        return "full_text" if self.file else "title"

    @property
    def label(self) -> str:
        return f"{self.title} by {self.author}" if self.author else self.title


@dataclass(frozen=True)
class StoryIdea:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    reference: Reference | None = None   # pins the warm-up reference (else drawn from the pool)

    def render(self) -> str:
        """What the prompts get: the idea's text, verbatim."""
        return self.text


def _structured_text(item: dict[str, Any]) -> str | None:
    if not any(item.get(k) for k in STRUCTURED):
        return None
    lines = []
    for key in STRUCTURED:
        v = item.get(key)
        if v:
            lines.append(f"{key.capitalize()}: {'; '.join(map(str, v)) if isinstance(v, list) else v}")
    return "\n".join(lines)


def _reference(raw: Any, where: str, root: Path) -> Reference | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not str(raw.get("title") or "").strip():
        raise IdeasError(f"{where}.reference: needs at least a 'title'")
    unknown = set(raw) - {"title", "author", "file", "mode"}
    if unknown:
        raise IdeasError(f"{where}.reference: unknown key(s) {sorted(unknown)}")
    file = raw.get("file")
    if file:
        # a reference text is sent to the model: it must stay inside the ideas file's folder
        if Path(str(file)).is_absolute():
            raise IdeasError(f"{where}.reference.file: {file!r} is an absolute path; give a path relative to "
                             f"{root} that stays inside it")
        try:
            check_input(root / str(file), what="reference file", root=root)
        except InputFileError as err:
            raise IdeasError(f"{where}.reference.file: {err}") from None
    return Reference(str(raw["title"]), raw.get("author"), str(root / file) if file else None)


def _idea(item: Any, i: int, where: str, root: Path) -> StoryIdea:
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict):
        raise IdeasError(f"{where}: an idea must be a string or a mapping, got {type(item).__name__}")
    text = next((item[k] for k in TEXT_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    text = text or _structured_text(item)
    idea_id = str(item.get("id") or f"idea_{i:03d}")
    if not text or not text.strip():
        raise IdeasError(f"{where} ({idea_id!r}).text: empty idea (give 'text', or genre/characters/setting)")
    meta = {k: v for k, v in item.items() if k not in (*TEXT_KEYS, "id", "reference")}
    return StoryIdea(idea_id, text.strip(), meta, _reference(item.get("reference"), f"{where} ({idea_id!r})", root))


def load_ideas(path: str | Path) -> tuple[list[StoryIdea], Path]:
    """The ideas of a YAML or JSONL file, and the folder reference files resolve from."""
    path = Path(path)
    try:
        raw_text = read_input_text(path, what="ideas file")
    except InputFileError as err:
        raise IdeasError(f"cannot read story ideas: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise IdeasError(f"{path}: cannot read story ideas: {err}") from None
    if path.suffix == ".jsonl":
        items = []
        for n, line in enumerate(raw_text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise IdeasError(f"{path}:{n}: not JSON: {err}") from None
    else:
        try:
            raw = load_yaml(raw_text)
        except yaml.YAMLError as err:
            raise IdeasError(f"{path}: cannot parse story ideas: {err}") from None
        items = raw.get("ideas") if isinstance(raw, dict) else raw
        if not isinstance(items, list):
            raise IdeasError(f"{path}: expected a list under 'ideas'")
    if not items:
        raise IdeasError(f"{path}: no ideas")
    ideas, seen = [], set()
    for i, item in enumerate(items):
        idea = _idea(item, i, f"{path}: ideas[{i}]", path.parent)
        if idea.id in seen:
            raise IdeasError(f"{path}: ideas[{i}].id: duplicate id {idea.id!r}")
        seen.add(idea.id)
        ideas.append(idea)
    return ideas, path.parent
