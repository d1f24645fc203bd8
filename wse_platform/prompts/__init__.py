"""One prompt per role, versioned, stored as files a user can replace.

A prompt file is ``<benchmark>/<name>.<version>.md`` for role ``<benchmark>.<name>``::

    ---
    role: wse.story_agent
    version: v1
    ---
    ## system
    ...text with ${placeholders}...
    ## user
    ...

Placeholders use ``${name}`` (string.Template), so JSON braces need no escaping.
A folder given as ``prompts_dir`` in the config (or $WSE_PROMPTS_DIR) is searched
first, with the same layout, so a user can override any template.
"""
from __future__ import annotations

import hashlib
import os
import re
import string
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import yaml

SHIPPED_DIR = Path(__file__).resolve().parent
_SECTION = re.compile(r"^##\s+(system|user|assistant)\s*$", re.MULTILINE)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    role: str
    version: str
    path: str
    sections: tuple[tuple[str, str], ...]  # (message role, template text)

    @property
    def id(self) -> str:
        return f"{self.role}@{self.version}"

    @property
    def sha(self) -> str:
        """Hash of the template content: changes whenever the wording changes."""
        blob = "\n".join(f"{r}\n{t}" for r, t in self.sections).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def placeholders(self) -> set[str]:
        return set(self._compiled[0])

    @cached_property
    def _compiled(self) -> tuple[frozenset[str], tuple[tuple[str, tuple[tuple[bool, str], ...] | None], ...]]:
        """The placeholder names and each section split once into (is_name, literal or name) pieces, in
        the order `string.Template.substitute` fills them (`$$` is a literal `$`); a section with an
        invalid `$` is None and rendered by `string.Template` itself (which raises as before). Computed
        once per prompt (a frozen dataclass: kept in the instance's __dict__), not per request."""
        names: set[str] = set()
        sections = []
        for role, text in self.sections:
            pieces: list[tuple[bool, str]] | None = []
            pos = 0
            for m in string.Template.pattern.finditer(text):
                name = m.group("named") or m.group("braced")
                if name:
                    names.add(name)
                if pieces is None:
                    continue
                if m.start() > pos:
                    pieces.append((False, text[pos:m.start()]))
                if name is not None:
                    pieces.append((True, name))
                elif m.group("escaped") is not None:
                    pieces.append((False, string.Template.delimiter))
                else:   # invalid: string.Template raises the error naming line and column
                    pieces = None
                    continue
                pos = m.end()
            if pieces is not None and pos < len(text):
                pieces.append((False, text[pos:]))
            sections.append((role, tuple(pieces) if pieces is not None else None))
        return frozenset(names), tuple(sections)

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing value is an error naming it."""
        names, sections = self._compiled
        missing = names - values.keys()
        if missing:
            raise PromptError(f"prompt {self.id} ({self.path}) needs values for {sorted(missing)}")
        filled = {k: str(values[k]) for k in names}
        out = []
        for (role, pieces), (_, text) in zip(sections, self.sections):
            if pieces is None:
                content = string.Template(text).substitute({k: str(v) for k, v in values.items()})
            else:
                content = "".join(filled[x] if is_name else x for is_name, x in pieces)
            out.append({"role": role, "content": content})
        return out


def _search_dirs(extra: str | os.PathLike[str] | None) -> list[Path]:
    dirs = []
    for d in (extra, os.environ.get("WSE_PROMPTS_DIR")):
        if d:
            dirs.append(Path(d))
    dirs.append(SHIPPED_DIR)
    return dirs


def parse_prompt_file(path: Path, root: Path | None = None) -> Prompt:
    """A prompt file (a regular file inside `root`, the prompts folder it was found in, when given)."""
    from wse_platform.inputs import InputFileError, load_yaml, read_input_text
    try:
        text = read_input_text(path, what="prompt file", root=root)
    except InputFileError as err:
        raise PromptError(str(err)) from None
    if not text.startswith("---"):
        raise PromptError(f"{path}: prompt file must start with a '---' front-matter block")
    try:
        _, front, body = text.split("---", 2)
        meta = load_yaml(front) or {}
    except (ValueError, yaml.YAMLError) as err:
        raise PromptError(f"{path}: bad front matter: {err}") from None
    for key in ("role", "version"):
        if key not in meta:
            raise PromptError(f"{path}: front matter lacks '{key}'")
    parts = _SECTION.split(body)
    sections = tuple((parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2))
    if not sections:
        raise PromptError(f"{path}: no '## system' / '## user' sections")
    return Prompt(role=str(meta["role"]), version=str(meta["version"]), path=str(path), sections=sections)


@lru_cache(maxsize=512)
def _load(role: str, version: str, extra_dir: str | None) -> Prompt:
    bench, _, name = role.partition(".")
    if not name:
        raise PromptError(f"role {role!r} must look like '<benchmark>.<name>'")
    rel = Path(bench) / f"{name}.{version}.md"
    for d in _search_dirs(extra_dir):
        candidate = d / rel
        if candidate.exists():
            prompt = parse_prompt_file(candidate, root=d)
            if prompt.role != role or prompt.version != version:
                raise PromptError(f"{candidate}: front matter says {prompt.id}, expected {role}@{version}")
            return prompt
    raise PromptError(f"no prompt file for role {role!r} version {version!r} (looked for {rel} in "
                      f"{[str(d) for d in _search_dirs(extra_dir)]})")


def get_prompt(role: str, version: str = "v1", prompts_dir: str | None = None) -> Prompt:
    return _load(role, version, prompts_dir)


def clear_cache() -> None:
    _load.cache_clear()
