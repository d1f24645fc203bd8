"""Human story corpora in the shapes the paper's corpora come in.

- a folder of UTF-8 ``.txt`` files plus a ``corpus.yaml`` naming the corpus, its quality tier
  and, per file name, the story's title, author, source and license::

      corpus: public_domain
      quality_tier: human
      stories:
        araby.txt: {title: Araby, author: James Joyce, source: "...", license: "..."}

- a ``.jsonl`` file (one JSON object per story) or a ``.csv`` file (header row), with a text
  column and optional id / title / author / metadata columns (TMAS, WritingPrompts/Ghostbuster
  and EQ-Bench output dumps have this shape); name and quality tier come from the config.

One bad record (not UTF-8, empty, no metadata entry) must not cost the others: it is reported
by name as a `CorpusProblem` and skipped. Stories that are not prose (control characters such
as NUL, fewer than 2 sentences) or outside the word range are kept as rows with
``included=False`` and the reason. Sampling to n stories is random with a fixed seed (the
paper samples 100 per corpus), never "the shortest n".

Inputs stay inside what the config names and are bounded (`wse_platform/inputs.py`): a story
file of a folder that is a symlink leaving the folder, a FIFO or a file above the size limit is a
`CorpusProblem` (never read); a JSONL / CSV file is streamed record by record. The cheap filters
come first: the word range, then the seeded sample, and the prose check (a per-character scan)
only on the stories drawn — a drawn story that is not prose is excluded with that reason and
replaced by a further draw from the same seeded generator. Excluded stories keep no text.
"""
from __future__ import annotations

import csv
import json
import random
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from wse_platform.inputs import MAX_CORPUS_BYTES, InputFileError, load_yaml, open_input_text, read_input_bytes
from wse_platform.metrics.endings import split_sentences

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
    metadata: dict[str, Any] = field(default_factory=dict)


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


_ALLOWED_CONTROL = set("\n\r\t\f")
MIN_SENTENCES = 2


def prose_problem(text: str) -> str | None:
    """Why `text` is not prose a reader could forecast (None when it is).

    Control characters (NUL and the other Unicode Cc characters except newline, tab, carriage
    return and form feed) mean a binary or corrupted file; fewer than 2 sentences, or no
    letters at all, mean there is no story to cut into positions.
    """
    bad = [ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROL]
    if bad:
        return f"{len(bad)} control character(s), e.g. U+{ord(bad[0]):04X}"
    if not any(ch.isalpha() for ch in text):
        return "no letters"
    n = len([x for x in split_sentences(text) if any(ch.isalpha() for ch in x)])
    if n < MIN_SENTENCES:
        return f"{n} sentence(s), at least {MIN_SENTENCES} needed"
    return None


def _in_range(story: "HumanStory", min_words: int, max_words: int) -> bool:
    """Mark `story` excluded when outside the word range; True when in range."""
    if story.n_words < min_words:
        story.included, story.exclusion_reason = False, f"too short: {story.n_words} words < min_words {min_words}"
    elif story.n_words > max_words:
        story.included, story.exclusion_reason = False, f"too long: {story.n_words} words > max_words {max_words}"
    return story.included


def select_stories(stories: list["HumanStory"], min_words: int, max_words: int, n: int | None, seed: int) -> None:
    """The word range, then the seeded sample of n, then the prose check on the drawn stories only;
    a drawn story that is not prose is replaced by a further draw (same generator), so the sample
    still holds n prose stories when the corpus has them. Excluded stories drop their text."""
    pool = sorted((s for s in stories if s.included and _in_range(s, min_words, max_words)),
                  key=lambda s: s.story_id)
    rng = random.Random(seed)
    remaining, kept = pool, 0
    while remaining and (n is None or kept < n):
        want = len(remaining) if n is None else n - kept
        drawn = remaining if want >= len(remaining) else rng.sample(remaining, want)
        drawn_ids = {id(s) for s in drawn}
        remaining = [s for s in remaining if id(s) not in drawn_ids]
        for story in drawn:
            problem = prose_problem(story.text)
            if problem:
                story.included, story.exclusion_reason = False, f"not prose: {problem}"
            else:
                kept += 1
    for s in remaining:
        s.included, s.exclusion_reason = False, f"not in the random sample of {n} (seed {seed})"
    for s in stories:
        if not s.included:
            s.text = ""


def _read_metadata(folder: Path) -> dict:
    meta_path = folder / METADATA_FILE
    if not meta_path.exists():
        raise CorpusError(f"{meta_path}: corpus metadata file is missing (needs corpus, quality_tier, stories)")
    try:
        meta = load_yaml(read_input_bytes(meta_path, what="corpus metadata file", root=folder).decode("utf-8")) or {}
    except InputFileError as err:
        raise CorpusError(str(err)) from None
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
    *,
    fmt: str | None = None,
    seed: int = 0,
    columns: dict[str, Any] | None = None,
) -> CorpusLoad:
    """Read a corpus (folder of .txt, .jsonl or .csv); bad records become `problems`.

    `name` / `quality_tier` (from the config) override the metadata file's. `max_stories`
    keeps a random sample (seed `seed`) of the in-range stories; the others are marked
    excluded with the reason. `columns` names the JSONL/CSV columns (text_column,
    id_column, title_column, author_column, metadata_columns).
    """
    path = Path(folder)
    fmt = fmt or ("jsonl" if path.suffix == ".jsonl" else "csv" if path.suffix == ".csv" else "folder")
    if fmt == "folder":
        out = _load_folder(path, name, quality_tier)
    else:
        out = _load_table(path, fmt, name or path.stem, quality_tier or "human", columns or {}, min_words, max_words)
    select_stories(out.stories, min_words, max_words, max_stories, seed)
    return out


def _load_folder(folder: Path, name: str | None, quality_tier: str | None) -> CorpusLoad:
    if not folder.is_dir():
        raise CorpusError(f"{folder}: corpus folder does not exist")
    meta = _read_metadata(folder)
    corpus = name or meta.get("corpus") or folder.name
    tier = quality_tier or meta.get("quality_tier") or "human"
    entries: dict = meta.get("stories") or {}
    out = CorpusLoad(corpus=corpus, quality_tier=tier)
    files = sorted(folder.glob("*.txt"))
    for path in files:
        story = _load_one(path, entries.get(path.name), corpus, tier, out.problems, folder)
        if story is not None:
            out.stories.append(story)
    present = {p.name for p in files}
    for listed in sorted(set(entries) - present):
        out.problems.append(CorpusProblem(listed, f"listed in {METADATA_FILE} but no such file in {folder}"))
    return out


def _records(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    """The records of a JSONL / CSV corpus, streamed (the file is never held whole)."""
    try:
        stream = open_input_text(path, what="corpus file", max_bytes=MAX_CORPUS_BYTES)
        with stream as fh:
            if fmt == "csv":
                yield from csv.DictReader(_no_bom(fh))
                return
            for n, line in enumerate(_no_bom(fh), 1):
                if line.strip():
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as err:
                        rec = {"__error__": f"line {n}: not JSON ({err.msg})"}
                    yield rec if isinstance(rec, dict) else {"__error__": f"line {n}: not a JSON object"}
    except InputFileError as err:
        raise CorpusError(str(err)) from None
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path}: not UTF-8 ({err.reason})") from None


def _no_bom(lines: Iterable[str]) -> Iterator[str]:
    first = True
    for line in lines:
        yield line.lstrip("\ufeff") if first else line
        first = False


def _load_table(path: Path, fmt: str, corpus: str, tier: str, cols: dict[str, Any], min_words: int = 0,
                max_words: int | None = None) -> CorpusLoad:
    """JSONL / CSV: one record per story; `cols` maps the config's *_column keys. A story outside
    [min_words, max_words] is marked excluded as it is read and keeps no text."""
    text_col = cols.get("text_column") or "text"
    id_col, title_col, author_col = cols.get("id_column"), cols.get("title_column"), cols.get("author_column")
    meta_cols = list(cols.get("metadata_columns") or [])
    out = CorpusLoad(corpus=corpus, quality_tier=tier)
    seen: set[str] = set()
    for i, rec in enumerate(_records(path, fmt)):
        where = f"{path.name}[{i}]"
        if "__error__" in rec:
            out.problems.append(CorpusProblem(where, rec["__error__"]))
            continue
        text = rec.get(text_col)
        if not isinstance(text, str) or not text.strip():
            out.problems.append(CorpusProblem(where, f"no text in column {text_col!r}"))
            continue
        sid = str(rec.get(id_col) if id_col and rec.get(id_col) not in (None, "") else i)
        if sid in seen:
            out.problems.append(CorpusProblem(where, f"duplicate id {sid!r} (column {id_col!r})"))
            continue
        seen.add(sid)
        text = text.lstrip("\ufeff").replace("\r\n", "\n").strip()
        out.stories.append(HumanStory(
            story_id=f"human:{corpus}/{sid}", corpus=corpus, quality_tier=tier, file=where,
            title=str(rec.get(title_col) or "") if title_col else "", author=str(rec.get(author_col) or "")
            if author_col else "", source=path.name, license=str(rec.get("license") or ""),
            text=text, n_words=count_words(text), metadata={c: rec.get(c) for c in meta_cols if c in rec}))
        if max_words is not None and not _in_range(out.stories[-1], min_words, max_words):
            out.stories[-1].text = ""
    return out


def _load_one(path: Path, entry: object, corpus: str, tier: str,
              problems: list[CorpusProblem], folder: Path) -> HumanStory | None:
    try:
        text = read_input_bytes(path, what="story file", root=folder).decode("utf-8")
    except InputFileError as err:
        problems.append(CorpusProblem(path.name, str(err)))
        return None
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
        "license": s.license, "file": s.file, "n_words": s.n_words,
        "text": s.text if s.included else None,   # no text of excluded inputs is stored
        "included": s.included,
        "exclusion_reason": s.exclusion_reason, "same_model_judge": same_model_judge,
        "metadata_json": json.dumps(s.metadata, default=str) if s.metadata else None,
    } for s in load.stories]


def load_configured(settings: Any, cfg: Any) -> CorpusLoad:
    """Load the corpus `cfg` (a `CorpusConfig`) as the configuration says: format, columns,
    word range (per corpus, else `endings.min_words/max_words`), seeded sample
    (`sample`, else the scale cap `endings.max_human_stories`)."""
    e = settings.endings
    return load_corpus(
        settings.resolve_path(cfg.path), cfg.name, cfg.quality_tier,
        e.min_words if cfg.min_words is None else cfg.min_words,
        e.max_words if cfg.max_words is None else cfg.max_words,
        cfg.sample if cfg.sample is not None else e.max_human_stories,
        fmt=cfg.format, seed=cfg.seed,
        columns={"text_column": cfg.text_column, "id_column": cfg.id_column, "title_column": cfg.title_column,
                 "author_column": cfg.author_column, "metadata_columns": cfg.metadata_columns})
