"""`wse status` in well under a second when nothing it reads has changed, without importing Dagster.

A full `wse status` opens the Dagster instance and builds the definitions (~4–5 s of imports and
set-up on a 2-core machine) before it can ask anything. Its report is a function of:
- the code and the shipped files (`wse_platform/`, `assets/`, `resources/`, `sql/`,
  `dbt_like_models/`, `data/`, `workspace.yaml`) and the installed Dagster version;
- the resolved settings (config file, `WSE_*` environment variables; `WSE_CONFIG` only names the
  config file, which `wse materialize` sets for its runs) and every file or folder a
  setting names (user prompts, corpora, specs, rubric, ideas...);
- the instance's event log: every materialization and observation is written to its index shard
  (`history/runs/index.db` in the SQLite storage that `dagster.yaml` — written by us — selects);
- the warehouse file (readability, the truncation lines).
The key below is a hash of the size and modification time of each of those files (plus the
settings and the flags), so *any* change makes the next `wse status` compute in full; the report
is saved only when the key is the same before and after it was computed (no event was recorded
meanwhile). Without the index shard (an instance not laid out as expected) there is no key and
every call computes.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from wse_platform.config import REPO_ROOT, Settings
from wse_platform.inputs import files_stamp

REPORT_FILE = "wse_status_report.json"  # in DAGSTER_HOME
EVENT_INDEX = Path("history") / "runs" / "index.db"  # Dagster's SQLite event log: the asset-event index shard
CODE_PATHS = ("wse_platform", "assets", "resources", "sql", "dbt_like_models", "data", "workspace.yaml")
_FORMAT = 1
MAX_FILES = 50_000  # beyond this many files to watch, every call computes in full


def _walk(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if not f.endswith((".pyc", ".pyo")):
                    yield Path(root) / f


def _setting_paths(settings: Settings) -> list[Path]:
    """Every string in the settings that names an existing file or folder (resolved like inputs)."""
    found: list[Path] = []

    def visit(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                visit(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, str) and v and len(v) < 4096 and ("/" in v or "." in v):
            with contextlib.suppress(OSError, ValueError):
                p = settings.resolve_path(v)
                if p.exists():
                    found.append(p)

    visit(settings.model_dump(exclude={"warehouse_path", "cache_dir", "artifacts_dir", "source_file"}))
    return found


def quick_key(settings: Settings, flags: Any = None, with_settings: bool = True,
              with_events: bool = True) -> str | None:
    """The hash described above; None when the instance has no event index shard to watch.
    `with_settings=False`: without the settings and the config file (what `status_replay` keeps:
    the state of everything else); `with_events=False` (and without the settings): without the
    instance and the warehouse either — the code, Dagster, `WSE_*` and the files the settings name
    (`status_switch.keep_before`: the same code between two full checks)."""
    home = settings.dagster_home
    index = home / EVENT_INDEX
    if with_events and not index.is_file():
        return None
    files: list[Path] = []
    for root in [REPO_ROOT / rel for rel in CODE_PATHS] + _setting_paths(settings):
        for p in _walk(root):
            files.append(p)
            if len(files) > MAX_FILES:  # e.g. a setting naming a huge folder: not worth it
                return None
    if settings.source_file and with_settings:
        files.append(Path(settings.source_file))
    wh = settings.warehouse
    if with_events:
        files += [index, Path(f"{index}-wal"), Path(f"{index}-journal"), home / "dagster.yaml", wh, Path(f"{wh}.wal")]
    try:
        dagster_version = metadata.version("dagster")
    except metadata.PackageNotFoundError:
        dagster_version = None
    blob = json.dumps([_FORMAT, flags, dagster_version, settings.model_dump_json() if with_settings else None,
                       sorted((k, v) for k, v in os.environ.items() if k.startswith("WSE_") and k != "WSE_CONFIG"),
                       files_stamp(files)], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def cached_report(settings: Settings, key: str | None) -> tuple[str, str] | None:
    """(report, when it was computed) saved under `key`, if any."""
    if key is None:
        return None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads((settings.dagster_home / REPORT_FILE).read_text(encoding="utf-8"))
        if data["key"] == key:
            return str(data["text"]), str(data["at"])
    return None


def save_report(settings: Settings, key: str | None, text: str) -> None:
    if key is None:
        return
    path = settings.dagster_home / REPORT_FILE
    with contextlib.suppress(OSError):
        tmp = path.with_name(f".{REPORT_FILE}.{os.getpid()}")
        at = time.strftime("%Y-%m-%d %H:%M:%S")
        tmp.write_text(json.dumps({"key": key, "text": text, "at": at}), encoding="utf-8")
        os.replace(tmp, path)
