"""Durable, content-addressed response cache shared by every run on the machine.

One SQLite file in WAL mode: readers never block writers, several processes can
write at once (`busy_timeout` queues them), `INSERT OR IGNORE` makes a duplicate
answer harmless (first writer wins, and the content key makes both identical in
meaning). `synchronous=NORMAL` avoids an fsync per answer; a crashed process loses
nothing that was committed, a power cut at most the last few answers.

A file that is not a readable SQLite database (truncated, overwritten by text) raises
`CacheCorrupted` naming the file and the fix (move it aside; `wse doctor --move-broken-cache`
does it), never a bare sqlite error deep inside a run. A full or read-only disk (or folder, or
file) raises `CacheUnusable` naming that cause instead (`wse_platform.diskcheck`): the file is
healthy, and moving it aside would throw the cached answers away.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wse_platform.llm.errors import CacheCorrupted
from wse_platform.procs import pid_alive

_CHUNK = 500  # keys per SELECT ... IN (...)
CLAIM_MAX_AGE_S = 3600.0  # a claim older than this is taken over even if its process still runs
# claim owners of this process that are still asking; a claim of this process by an owner not listed
# here was left by a client that failed (e.g. its disk filled before it could drop the claim)
LIVE_OWNERS: set[str] = set()


def corrupted(path: Path, err: Exception) -> CacheCorrupted:
    """The error for a cache that cannot be used: a full or read-only disk is named as such
    (`CacheUnusable`: the file is healthy, moving it aside would throw the answers away); else a
    file that is not a readable SQLite database, and how to continue."""
    from wse_platform.diskcheck import diagnose
    problem = diagnose(path, err, "the LLM response cache", "cache_dir (or WSE_CACHE_DIR)")
    if problem is None and not path.exists():
        problem = (f"the LLM response cache {path} cannot be created ({type(err).__name__}: {err}).\n"
                   f"  fix: check that {path.parent} is a writable folder, or set cache_dir (or WSE_CACHE_DIR) "
                   "to one, then rerun")
    if problem is not None:
        return CacheUnusable(problem)
    return CacheCorrupted(
        f"the LLM response cache {path} is not a readable SQLite database ({type(err).__name__}: {err}). "
        "It was probably truncated or overwritten. The cache only saves repeated calls, so it is safe to "
        f"move it aside and continue without it: `wse doctor --move-broken-cache` (or `mv {path} "
        f"{path}.broken`), then rerun; answers not found are requested again.")


from wse_platform.llm.errors import LLMInfrastructureError  # noqa: E402 (kept apart from the imports above)


class CacheUnusable(LLMInfrastructureError):
    """The cache cannot be written or created because of its disk (full, read-only): the file is intact."""


@functools.lru_cache(maxsize=1)
def _hostname() -> str:
    """This machine's name, for the claims (asked once per process, not per claim)."""
    import socket
    return socket.gethostname()


def content_key(*parts: Any) -> str:
    """sha256 of the canonical JSON of `parts` (dict keys sorted, no whitespace)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def dumps(value: dict[str, Any]) -> str:
    """A stored answer's JSON text (compact, UTF-8 as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class ResponseCache:
    FILE_NAME = "responses.sqlite"

    def __init__(self, directory: str | Path, busy_timeout_s: float = 120.0):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / self.FILE_NAME
        self._lock = threading.Lock()
        self._claim_gate = threading.Lock()     # claim(): one thread makes the waiting claims at a time
        self._pending_lock = threading.Lock()
        self._pending: list[list[Any]] = []     # [keys, owner, result] of claims not made yet
        self._con = self._open(busy_timeout_s)

    def _open(self, busy_timeout_s: float) -> sqlite3.Connection:
        try:
            return self._connect(busy_timeout_s)
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                raise
            raise corrupted(self.path, err) from err

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                con = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None,
                                      check_same_thread=False)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
                con.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                            "created_at REAL NOT NULL)")
                con.execute("CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                            "host TEXT NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL)")
                con.execute("SELECT count(*) FROM (SELECT key FROM responses LIMIT 1)").fetchone()
                return con
            except sqlite3.OperationalError as err:  # two processes creating the file at once
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(keys)
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                try:
                    rows = self._con.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})",
                                             chunk).fetchall()
                    for k, v in rows:
                        found[k] = json.loads(v)
                except (sqlite3.DatabaseError, ValueError) as err:
                    if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                        raise
                    raise corrupted(self.path, err) from err
        return found

    def get(self, key: str) -> dict[str, Any] | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, value: dict[str, Any], replace: bool = False) -> None:
        """Store an answer; an existing one is kept unless `replace` (a --no-cache run refreshes)."""
        blob = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock:
            try:
                self._con.execute(f"{verb} INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                                  (key, blob, time.time()))
            except sqlite3.DatabaseError as err:
                if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                    raise
                raise corrupted(self.path, err) from err

    def put_many(self, items: list[tuple[str, dict[str, Any] | str, bool]], release: Iterable[str] = (),
                 owner: str | None = None, releases: Iterable[tuple[str, str]] = ()) -> None:
        """Store answers `(key, value, replace)` in one transaction, and drop `owner`'s claims on `release`
        and the claims `(key, owner)` of `releases`. A value given as a string is its JSON already
        (`dumps`: the client serializes an answer once, for the journal and the cache)."""
        now = time.time()
        rows = [(k, v if isinstance(v, str) else dumps(v), now, r) for k, v, r in items]
        drop = [(k, owner) for k in release] if owner else []
        drop += releases
        with self._lock:
            try:
                self._con.execute("BEGIN IMMEDIATE")
                try:
                    self._con.executemany("INSERT OR IGNORE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                                          [r[:3] for r in rows if not r[3]])
                    self._con.executemany("INSERT OR REPLACE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                                          [r[:3] for r in rows if r[3]])
                    if drop:
                        self._con.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", drop)
                    self._con.execute("COMMIT")
                except BaseException:
                    self._con.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as err:
                raise self._write_error(err) from err

    def _write_error(self, err: sqlite3.DatabaseError) -> Exception:
        text = str(err).lower()
        if isinstance(err, sqlite3.OperationalError) and "locked" in text:
            return err
        if isinstance(err, sqlite3.OperationalError) and any(w in text for w in ("full", "readonly", "read-only",
                                                                                   "disk i/o", "unable to open")):
            from wse_platform.llm.errors import LLMInfrastructureError
            return LLMInfrastructureError(
                f"could not write the LLM response cache {self.path} ({type(err).__name__}: {err}); the file is "
                "not damaged. Free space on that disk (or make it writable) and rerun: the answers already "
                f"received are kept in {self.directory / 'journal'} and are stored when the next run starts.")
        return corrupted(self.path, err)

    # ---- one request in flight per key across processes --------------------------------
    def claim(self, keys: list[str], owner: str) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
        """Answers already stored, keys now claimed by `owner`, keys claimed by another live client.

        A claim of a process that is gone (same host, pid not running) or older than CLAIM_MAX_AGE_S
        is taken over. Claims made by several threads at once are combined: the thread that gets the
        gate makes every claim waiting by then, one after another in one transaction (the same outcome
        as one transaction each, in that order; issue 24: a client's trajectory threads at 256 slots
        each waited for the others' transactions). If that transaction fails, the failing thread
        raises and the others' claims are made again by the next one."""
        req: list[Any] = [keys, owner, None]
        with self._pending_lock:
            self._pending.append(req)
        with self._claim_gate:
            if req[2] is None:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                try:
                    results = self._claim_batch([(r[0], r[1]) for r in batch])
                except BaseException:
                    with self._pending_lock:
                        self._pending[:0] = [r for r in batch if r is not req]
                    raise
                for r, res in zip(batch, results):
                    r[2] = res
        return req[2]

    def _claim_batch(self, requests: list[tuple[list[str], str]]) -> list[tuple[dict[str, dict[str, Any]], list[str],
                                                                                  list[str]]]:
        import os
        host, pid, now = _hostname(), os.getpid(), time.time()
        out = []
        with self._lock:
            try:
                self._con.execute("BEGIN IMMEDIATE")
                try:
                    for keys, owner in requests:
                        hits: dict[str, dict[str, Any]] = {}
                        mine: list[str] = []
                        others: list[str] = []
                        for i in range(0, len(keys), _CHUNK):
                            chunk = keys[i:i + _CHUNK]
                            marks = ",".join("?" * len(chunk))
                            for k, v in self._con.execute(
                                    f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk).fetchall():
                                hits[k] = json.loads(v)
                            held = {k: (o, h, p, at) for k, o, h, p, at in self._con.execute(
                                f"SELECT key, owner, host, pid, at FROM claims WHERE key IN ({marks})",
                                chunk).fetchall()}
                            take = []
                            for k in chunk:
                                if k in hits:
                                    continue
                                h = held.get(k)
                                if h is None or h[0] == owner or (h[1] == host and not pid_alive(h[2])) \
                                        or (h[2] == pid and h[1] == host and h[0] not in LIVE_OWNERS) \
                                        or now - h[3] > CLAIM_MAX_AGE_S:
                                    take.append((k, owner, host, pid, now))
                                    mine.append(k)
                                else:
                                    others.append(k)
                            self._con.executemany("INSERT OR REPLACE INTO claims (key, owner, host, pid, at) "
                                                  "VALUES (?, ?, ?, ?, ?)", take)
                        out.append((hits, mine, others))
                    self._con.execute("COMMIT")
                except BaseException:
                    self._con.execute("ROLLBACK")
                    raise
            except (sqlite3.DatabaseError, ValueError) as err:
                raise self._write_error(err) if isinstance(err, sqlite3.DatabaseError) else corrupted(self.path, err) \
                    from err
        return out

    def release_claims(self, owner: str, keys: Iterable[str] | None = None) -> None:
        with self._lock:
            try:
                if keys is None:
                    self._con.execute("DELETE FROM claims WHERE owner = ?", (owner,))
                else:
                    self._con.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k, owner) for k in keys])
            except sqlite3.DatabaseError as err:
                log_error = self._write_error(err)
                if isinstance(log_error, sqlite3.OperationalError):
                    raise
                # a claim left behind is taken over once this process is gone: nothing is lost

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]

    def integrity_ok(self) -> bool:
        with self._lock:
            return self._con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        with self._lock:
            self._con.close()


def move_aside(path: Path) -> Path | None:
    """Rename a broken cache file (and its WAL/SHM companions) to `<name>.broken-<time>`."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target


def check_cache_file(path: Path) -> str | None:
    """None when the cache file is absent or readable, else what is wrong (for `wse doctor`)."""
    if not path.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            ok = con.execute("PRAGMA quick_check").fetchone()[0]
            con.execute("SELECT count(*) FROM responses").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        return f"{type(err).__name__}: {err}"
    return None if ok == "ok" else f"integrity check: {ok}"
