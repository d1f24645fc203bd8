"""100-Endings story sources: the corpus folders and the ideas file, observed per story set.

`endings_story_sources` is an observable source asset (kinds, owner; recorded like the other input
files, `assets/source_files.py`): its data version per set is a hash
of the files the set is built from (a human corpus folder, or the ideas file and the
reference stories it names), so editing a story or an idea marks exactly that set's
`endings_stories` unsynced. The check `endings_corpora_readable` lists every corpus file
that was skipped (not UTF-8, empty, missing metadata) by name.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import hashlib
from pathlib import Path

from dagster import (AssetCheckResult, AssetCheckSeverity, AssetSpec, DataVersion, MetadataValue, ObserveResult,
                     asset_check, multi_observable_source_asset)

from assets.partitions import BenchmarkPartitions, parse_endings_set
from resources.settings import settings_for
from wse_platform.config import Settings
from wse_platform.versions import hash_input
from wse_platform.endings.corpus import CorpusError, load_configured
from wse_platform.endings.pipelines import IdeasError, ideas_path, load_ideas, reference_pool

GROUP = "endings"


def _hash_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.name).encode())
        problem = hash_input(h, p) if p.is_file() else "<missing>"   # streamed; a FIFO is never read
        if problem:
            h.update(problem.encode())
    return h.hexdigest()[:16]


def corpus_path(settings: Settings, name: str) -> Path:
    corpus = next((c for c in settings.endings.corpora if c.name == name), None)
    if corpus is None:
        raise ValueError(f"endings set 'human:{name}': no corpus named {name!r} in endings.corpora")
    return settings.resolve_path(corpus.path)


def source_version(settings: Settings, set_key: str) -> str:
    """Hash of the files a set is built from."""
    parts = parse_endings_set(set_key)
    if parts["kind"] == "human":
        folder = corpus_path(settings, parts["corpus"])
        if folder.is_file():   # a JSONL / CSV corpus
            return _hash_files([folder])
        return _hash_files([p for p in folder.glob("*") if p.is_file()]) if folder.is_dir() else "missing"
    path = ideas_path(settings)
    files = [path]
    try:
        ideas, _ = load_ideas(path)
        files += [Path(i.reference.file) for i in ideas if i.reference and i.reference.file]
        files += [Path(r.file) for r in reference_pool(settings) if r.file]
    except (IdeasError, ValueError):
        pass  # the generation asset reports the error; the version still changes with the file
    return _hash_files(list(dict.fromkeys(files)))


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.endings is None:
        return []
    config_path = settings.source_file

    meta = {"config_file": MetadataValue.path(str(config_path))} if config_path else {}
    spec = AssetSpec(
        "endings_story_sources", partitions_def=parts.endings, group_name="endings_sources", kinds={"text", "yaml"},
        owners=["team:endings"], tags={"wse/file_source": "true"}, metadata=meta,
        description="The files each 100-Endings story set is built from: a human corpus folder (UTF-8 "
                    "texts + corpus.yaml) or the story-ideas file and the reference stories it names. "
                    "Data version = hash of those files (recorded per set when it changes, see "
                    "`assets/source_files.py`).")

    @multi_observable_source_asset(specs=[spec], name="observe_endings_story_sources")
    def endings_story_sources(context):
        s = settings_for(config_path)
        return ObserveResult(asset_key=spec.key, data_version=DataVersion(source_version(s, context.partition_key)))

    @asset_check(asset="endings_stories", name="endings_corpora_readable",
                 description="Every file of every configured corpus is readable: UTF-8, not empty, with "
                             "title/author/source/license in corpus.yaml. Lists skipped files by name.")
    def endings_corpora_readable():
        s = settings_for(config_path)
        problems: list[str] = []
        for c in s.endings.corpora:
            try:
                load = load_configured(s, c)
                problems += [f"{c.name}: {p}" for p in load.problems]
            except CorpusError as err:
                problems.append(f"{c.name}: {err}")
        return AssetCheckResult(
            passed=not problems, severity=AssetCheckSeverity.WARN,
            metadata={"n_problems": len(problems),
                      "problems": MetadataValue.md("\n".join(f"- `{p}`" for p in problems) or "_(none)_")})

    return [endings_story_sources, endings_corpora_readable]
