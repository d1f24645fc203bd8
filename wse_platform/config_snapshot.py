"""A command reads its configuration once, and every run it launches uses exactly that version.

`wse materialize` records the config fingerprints (the data versions of the config assets) at
its start, then executes its runs in-process. Each run used to reload the config file when its
modification time changed (`resources.settings.settings_for`), so an edit made while the command
ran (`wse.horizon` 2 → 3) was computed by the next run but recorded against the version read at
start; putting the old file back then showed horizon-3 tables as fresh.

`load(path)` reads the file once (its bytes hashed before and after parsing, so the settings are
those of one version of the file) and pins the settings for this process: `settings_for` returns
the pinned settings for that file until `release()` (the CLI releases at the end of every
command). Prompt files are read once per process already (`prompts._load` is cached, and the
fingerprints read them at the start of the command). `changed()` says whether the file on disk
differs from the pinned version, for a note; the runs go on with the version read at start, and
the next `wse status` shows what the edit makes stale. A new version recorded by another process
meanwhile (`wse ui`'s config_observer) stops the command before its next run (`run_guard`).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from wse_platform.config import DEFAULT_CONFIG, Settings, load_settings


@dataclass(frozen=True)
class Snapshot:
    settings: Settings
    path: Path | None  # the config file read (resolved)
    digest: str | None  # sha256 of its bytes


_PINNED: dict[str, Snapshot] = {}


def config_file(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The file `load_settings(path)` reads: `path`, else $WSE_CONFIG, else ./wse.yaml, else the default."""
    for c in (path, os.environ.get("WSE_CONFIG") or None, Path.cwd() / "wse.yaml", DEFAULT_CONFIG):
        if c and Path(c).is_file():
            return Path(c).resolve()
    return None


def _digest(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None
    except OSError:
        return None


def load(path: str | os.PathLike[str] | None = None, attempts: int = 5) -> Settings:
    """Load the config once and pin it for this process (see the module doc)."""
    file = config_file(path)
    for _ in range(attempts):
        before = _digest(file)
        settings = load_settings(path)
        after = _digest(file)
        if before == after:  # parsed from one version of the file, not from a half-written one
            break
    snap = Snapshot(settings, file, after)
    if file is not None:
        _PINNED[str(file)] = snap
    return settings


def pinned(path: str | os.PathLike[str] | None = None) -> Settings | None:
    """The settings the running command read for this config file, or None when none is pinned."""
    if not _PINNED:
        return None
    file = config_file(path)
    snap = _PINNED.get(str(file)) if file is not None else None
    return snap.settings if snap is not None else None


def changed() -> str | None:
    """A note when a pinned config file differs on disk from the version the command read."""
    for name, snap in _PINNED.items():
        if _digest(snap.path) != snap.digest:
            return (f"the config file {name} changed since this command read it; this command goes on with "
                    "the version it read at start (and records its results against that version); "
                    "`wse status` shows what the change makes stale")
    return None


def release() -> None:
    """End of a command: later reads see the file as it is."""
    _PINNED.clear()
