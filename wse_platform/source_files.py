"""The input files each benchmark is built from, and their content versions (no Dagster here).

`assets/source_files.py` makes each group of files an observable source asset whose data version
is `content_version` of its files, upstream of the asset that reads them, so an edited play marks
the worlds, the seeds and every cell built from them stale (and `wse status` names the file).
Hashing reads the files (~5 MB in all, a few ms); paths are hashed relative to the data folder, so
moving the checkout changes nothing.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wse_platform import config

DIGEST = 16  # hex characters kept of each sha256


def data_dir() -> Path:
    """The shipped data folder (read at call time, so tests can point it at a copy)."""
    return config.DATA_DIR


def _all(folder: str) -> Callable[[Path], list[Path]]:
    return lambda root: sorted(p for p in (root / folder).rglob("*") if p.is_file())


def _dracor(root: Path) -> list[Path]:
    from wse_platform.wse.worlds import DRACOR_PLAYS

    return sorted(root / "dracor" / src.file for src in DRACOR_PLAYS)


def _ncp(root: Path) -> list[Path]:
    dataset = root / "ncp_bench" / "dataset"
    return sorted([dataset / "index.yaml", *(dataset / "specs").glob("*.yaml")])


@dataclass(frozen=True)
class FileSource:
    key: str
    benchmark: str            # wse | ncp
    kinds: frozenset[str]
    description: str
    files: Callable[[Path], list[Path]]   # data folder -> the files read


FILE_SOURCES: tuple[FileSource, ...] = (
    FileSource("wse_dracor_plays", "wse", frozenset({"tei", "xml"}),
               "The seven DraCor TEI plays (data/dracor, CC0) the DraCor InitialWorlds are frozen from.", _dracor),
    FileSource("wse_smallville_personas", "wse", frozenset({"json"}),
               "The 25 Smallville personas and the town map (data/smallville, Apache-2.0) of the Smallville "
               "InitialWorld.", _all("smallville")),
    FileSource("wse_bianjing_world", "wse", frozenset({"json"}),
               "Our Bianjing-1100 world file (data/bianjing/world.json), the ITP InitialWorld.",
               lambda root: [root / "bianjing" / "world.json"]),
    FileSource("ncp_spec_files", "ncp", frozenset({"yaml"}),
               "The 100 released NCP-Bench spec files with their synopses, and index.yaml (data/ncp_bench/dataset, "
               "MIT): what `ncp_specs` validates and stores, and what spec extraction reads the synopses from.",
               _ncp),
)


def file_digests(source: FileSource, root: Path | None = None) -> dict[str, str]:
    """Relative path -> content digest of each file of `source` ("missing" for an absent one)."""
    root = root or data_dir()
    out = {}
    for p in source.files(root):
        rel = p.relative_to(root).as_posix()
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()[:DIGEST] if p.is_file() else "missing"
    return out


def content_version(digests: dict[str, str]) -> str:
    """The data version of a set of files: a hash of their relative paths and contents."""
    h = hashlib.sha256()
    for rel in sorted(digests):
        h.update(f"{rel}\0{digests[rel]}\n".encode())
    return h.hexdigest()[:DIGEST]


def describe_file_changes(before: dict[str, str] | None, after: dict[str, str]) -> list[str]:
    """What changed between two digest maps, one line per file: `dracor/shakedracor/hamlet.xml: edited`."""
    if before is None:
        return ["(first version)"]
    lines = [f"{rel}: {'added' if rel not in before else 'removed' if after[rel] == 'missing' else 'edited'}"
             for rel in sorted(after) if before.get(rel) != after[rel]]
    return lines + [f"{rel}: removed" for rel in sorted(before) if rel not in after]
