"""Cheaper writes to the Dagster instance's SQLite files (issue 24 item 3: the platform's time per cell).

Dagster's SQLite storages open a new connection for every query and every event they store (a
cell run stores ~110 events, each in the run's own file and, for asset and check events, again in
`index.db`). In WAL mode (Dagster's setting) every commit then waits for an fsync
(`synchronous=FULL`, SQLite's default), and closing the last connection of a file checkpoints the
WAL and fsyncs again: ~10-20 ms per stored event on this machine, most of a cached cell's time.

`install(home)` (by `runner.execute` and each `--parallel` worker: processes that run; `wse status`
does not, so the files it stamps are final when it exits) does two things through
SQLAlchemy's public event API, only for database files under `home`:
- each new connection runs `PRAGMA synchronous=NORMAL`: the setting SQLite recommends with WAL. A
  commit survives a crash or `kill -9` of the process (it is in the WAL file); only a power loss
  or OS crash may lose the last commits, never corrupting the file (sqlite.org/wal.html). The
  connections the event log storage kept from before `install` (`wse materialize` reads the
  instance before it runs) are closed then, so they are made again with it: else every event
  stored in `index.db` waited for an fsync (~475 in a 1-cell command);
- the process keeps one idle connection open to each file it used (the most recent `KEEP` run
  files and every other file), so a query's connection is never the file's last one and closing
  it does not checkpoint; SQLite's automatic checkpoint (every 1000 WAL pages) still runs, and the
  last holder's close at exit checkpoints as before. An idle connection holds no lock: other
  processes read and write as before.
Nothing else changes: the same files, schema and rows (`tests/platform/test_instance_sqlite.py`).
"""
from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

KEEP = 8  # run files (one per run) whose holder connection stays open; older ones are closed

_state: dict = {"home": None}
_held: "OrderedDict[str, sqlite3.Connection]" = OrderedDict()
_lock = threading.Lock()
_ours: dict[str, str] = {}  # file name as SQLite reports it -> its real path if under home, else ""
_reads: dict[str, int] = {}  # reads of the holder connection since it was opened


def install(home: str | Path) -> None:
    """Apply the settings above to every SQLite file under `home` this process opens from now on."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    root = os.path.realpath(str(home)) + os.sep
    first = _state["home"] is None
    if _state["home"] != root:  # another instance (tests): the files of the previous one are let go
        release()
        _ours.clear()
    changed = _state["home"] != root
    _state["home"] = root
    if first:
        event.listen(Engine, "connect", _on_connect)
    if changed:  # the event log's connections kept from before are made again, with the setting
        from wse_platform.dagster_private import release_event_log_connections
        release_event_log_connections()


def _on_connect(dbapi_connection, connection_record) -> None:
    home = _state["home"]
    if home is None or not isinstance(dbapi_connection, sqlite3.Connection):
        return
    try:
        row = dbapi_connection.execute("PRAGMA database_list").fetchone()
    except sqlite3.Error:
        return
    raw = row[2] if row else ""
    path = _ours.get(raw)
    if path is None:  # resolved once per file name
        real = os.path.realpath(raw) if raw else ""
        path = _ours[raw] = real if real.startswith(home) else ""
    if not path:
        return
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
    _hold(path)


def _hold(path: str) -> None:
    with _lock:
        if path in _held:
            _held.move_to_end(path)
            if _reads[path] < 2:  # a file Dagster created in rollback mode and switched to WAL in its
                _reads[path] += 1  # first connection: read again to register as a user of the WAL index
                try:
                    _held[path].execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
                except sqlite3.Error:
                    pass
            return
        try:
            con = sqlite3.connect(path, timeout=30, check_same_thread=False)
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # maps the WAL index: counts as a user
        except sqlite3.Error:
            return
        _held[path] = con
        _reads[path] = 0
        runs = [p for p in _held if _is_run_file(p)]
        for old in runs[: max(0, len(runs) - KEEP)]:
            _held.pop(old).close()
            _reads.pop(old, None)


def _is_run_file(path: str) -> bool:
    name = Path(path).name
    return Path(path).parent.name == "runs" and name not in ("index.db",) and name.endswith(".db")


def held() -> list[str]:
    """The files this process keeps a connection open to (for tests and diagnostics)."""
    with _lock:
        return list(_held)


def release() -> None:
    """Close the held connections (tests; `cli.settle` before the status stamps the files; a process
    exiting closes them anyway)."""
    with _lock:
        while _held:
            _held.popitem()[1].close()
        _reads.clear()
