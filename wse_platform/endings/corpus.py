"""Human story corpora: a folder of UTF-8 ``.txt`` files plus a ``corpus.yaml``.

``corpus.yaml`` names the corpus, its quality tier and, per file name, the
story's title, author, source and license::

    corpus: public_domain
    quality_tier: human
    stories:
      araby.txt: {title: Araby, author: James Joyce, source: "...", license: "..."}

One bad file (not UTF-8, empty, no metadata entry) must not cost the others:
it is reported by name as a `CorpusProblem` and skipped. Stories outside the
word range are kept as rows with ``included=False`` and the reason, so a
table shows what was measured and what was not, and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

METADATA_FILE = "corpus.yaml"
REQUIRED_FIELDS = ("title", "author", "source", "license")


class CorpusError(ValueError):
    """The corpus as a whole cannot be read (missing folder or unreadable corpus.yaml)."""


@dataclass(frozen=True)
class CorpusProblem:
    """A file that was skipped, named so the user can fix it."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class HumanStory:
    story_id: str
    corpus: str
    quality_tier: str
    file: str
    title: str
    author: str
    source: str
    license: str
    text: str
    n_words: int
    included: bool = True
    exclusion_reason: str | None = None


@dataclass
class CorpusLoad:
    corpus: str
    quality_tier: str
    stories: list[HumanStory] = field(default_factory=list)
    problems: list[CorpusProblem] = field(default_factory=list)

    @property
    def included(self) -> list[HumanStory]:
        return [s for s in self.stories if s.included]


def count_words(text: str) -> int:
    """Whitespace-separated words (the count `data/SOURCES.md` reports)."""
    return len(text.split())


def _read_metadata(folder: Path) -> dict:
    meta_path = folder / METADATA_FILE
    if not meta_path.exists():
        raise CorpusError(f"{meta_path}: corpus metadata file is missing (needs corpus, quality_tier, stories)")
    try:
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise CorpusError(f"{meta_path}: cannot parse: {err}") from None
    if not isinstance(meta, dict):
        raise CorpusError(f"{meta_path}: top level must be a mapping")
    stories = meta.get("stories") or {}
    if not isinstance(stories, dict):
        raise CorpusError(f"{meta_path}: 'stories' must map file names to metadata")
    return meta


def load_corpus(
    folder: str | Path,
    name: str | None = None,
    quality_tier: str | None = None,
    min_words: int = 500,
    max_words: int = 5000,
    max_stories: int | None = None,
) -> CorpusLoad:
    """Read every ``*.txt`` in `folder`; bad files become `problems`, not exceptions.

    `name` / `quality_tier` (from the config) override the metadata file's. The
    optional `max_stories` cap (demo scale) keeps the shortest included stories,
    so a demo run is as cheap as possible; the rest are marked excluded with the reason.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"{folder}: corpus folder does not exist")
    meta = _read_metadata(folder)
    corpus = name or meta.get("corpus") or folder.name
    tier = quality_tier or meta.get("quality_tier") or "human"
    entries: dict = meta.get("stories") or {}
    out = CorpusLoad(corpus=corpus, quality_tier=tier)

    files = sorted(folder.glob("*.txt"))
    for path in files:
        story = _load_one(path, entries.get(path.name), corpus, tier, out.problems)
        if story is None:
            continue
        if story.n_words < min_words:
            story.included, story.exclusion_reason = False, f"too short: {story.n_words} words < min_words {min_words}"
        elif story.n_words > max_words:
            story.included, story.exclusion_reason = False, f"too long: {story.n_words} words > max_words {max_words}"
        out.stories.append(story)

    present = {p.name for p in files}
    for listed in sorted(set(entries) - present):
        out.problems.append(CorpusProblem(listed, f"listed in {METADATA_FILE} but no such file in {folder}"))

    if max_stories is not None:
        kept = sorted(out.included, key=lambda s: (s.n_words, s.file))[:max_stories]
        keep_ids = {s.story_id for s in kept}
        for s in out.included:
            if s.story_id not in keep_ids:
                s.included, s.exclusion_reason = False, f"beyond max_human_stories={max_stories} (shortest kept)"
    return out


def _load_one(path: Path, entry: object, corpus: str, tier: str,
              problems: list[CorpusProblem]) -> HumanStory | None:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        problems.append(CorpusProblem(path.name, f"not UTF-8 ({err.reason} at byte {err.start})"))
        return None
    text = text.lstrip("\ufeff").replace("\r\n", "\n").strip()
    if not text:
        problems.append(CorpusProblem(path.name, "empty file"))
        return None
    if not isinstance(entry, dict):
        problems.append(CorpusProblem(path.name, f"no metadata entry under 'stories' in {METADATA_FILE}"))
        return None
    missing = [f for f in REQUIRED_FIELDS if not str(entry.get(f) or "").strip()]
    if missing:
        problems.append(CorpusProblem(path.name, f"metadata in {METADATA_FILE} lacks {missing}"))
        return None
    return HumanStory(
        story_id=f"human:{corpus}/{path.stem}", corpus=corpus, quality_tier=tier, file=path.name,
        title=str(entry["title"]), author=str(entry["author"]), source=str(entry["source"]),
        license=str(entry["license"]), text=text, n_words=count_words(text),
    )


def story_rows(load: CorpusLoad, set_key: str, same_model_judge: bool) -> list[dict]:
    """`endings_stories` rows of a human corpus (excluded stories kept, with their reason)."""
    return [{
        "story_id": s.story_id, "set_key": set_key, "corpus": s.corpus, "quality_tier": s.quality_tier,
        "generator_model": None, "pipeline": None, "title": s.title, "author": s.author, "source": s.source,
        "license": s.license, "file": s.file, "n_words": s.n_words, "text": s.text, "included": s.included,
        "exclusion_reason": s.exclusion_reason, "same_model_judge": same_model_judge,
    } for s in load.stories]
