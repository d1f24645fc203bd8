"""The answer journal: what the client received is on disk before anything else can fail.

Each client appends to its own file `<cache_dir>/journal/<host>-<pid>-<random>.jsonl`, holding an
exclusive `flock` on it while it lives. Every answer a backend returns is written there first (one
`write`, before the cache, validation or accounting see it), and so is every call record. The
response cache and `llm_calls` are then written in batches. When both have everything, the file is
emptied; otherwise it stays behind, and the next client that starts (any process with the same
cache folder and a warehouse to write to) finds it unlocked (its owner is gone) and replays it:
answers into the cache, records into `llm_calls` (idempotent by `call_id`), then deletes it.

A full disk: the file reserves its space in advance (`posix_fallocate`, RESERVE bytes at a time,
renewed when half is used). When the reservation cannot be renewed, answers still in flight land
in the space already reserved, and `low_space` tells the client to stop the run (infrastructure).
`fsync` runs at least every SYNC_INTERVAL_S and whenever the client flushes: a killed process
loses nothing it wrote (the kernel keeps it); a power cut loses at most that interval.

Exit: the fsync thread is a daemon thread, and Python stops daemon threads where they stand once the
interpreter finalizes: one stopped inside an fsync would hold the file's lock for ever, and a client
dropped at exit (its `__del__` closes the journal) would wait for it for ever. So an `atexit` hook
(it runs before that stop) ends every fsync thread, and `close` never waits for the lock once the
interpreter is finalizing (no other thread can run by then).
"""
from __future__ import annotations

import atexit
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("wse_platform.llm")

RESERVE = 4 << 20
SYNC_INTERVAL_S = 0.05
_OPEN: "weakref.WeakSet[Journal]" = weakref.WeakSet()  # the journals of this process (see Exit above)


class Journal:
    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:10]}.jsonl"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._offset = 0
        self._reserved = 0
        self.low_space: str | None = None
        self._dirty = False
        self._io = threading.Lock()  # the fd is not closed under a running fsync
        self._closed = threading.Event()
        self._syncer: threading.Thread | None = None
        self._reserve()
        _OPEN.add(self)

    def _reserve(self) -> None:
        try:
            os.posix_fallocate(self._fd, 0, self._offset + RESERVE)
            self._reserved = self._offset + RESERVE
        except OSError as err:
            if err.errno in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", -1)):
                self._reserved = 1 << 62  # no preallocation here: plain appends
                return
            self.low_space = f"no space left to journal LLM answers at {self.directory} ({err.strerror or err})"
            log.error("%s; the run stops after this batch, the answers received so far are kept", self.low_space)

    def append(self, entries: Iterable[dict[str, Any] | str]) -> None:
        """Write entries (one JSON line each; a string is the entry's JSON already) in one system call;
        raises OSError when even that fails."""
        data = "".join((e if isinstance(e, str) else json.dumps(e, separators=(",", ":"), ensure_ascii=False,
                                                                 default=_default)) + "\n" for e in entries).encode()
        os.pwrite(self._fd, data, self._offset)
        self._offset += len(data)
        self._dirty = True
        if self.low_space is None and self._reserved - self._offset < RESERVE // 2:
            self._reserve()
        if self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, name="wse-llm-journal", daemon=True)
            self._syncer.start()

    def _sync_loop(self) -> None:
        """fsync off the caller's thread (the backends' event loop must not wait for the disk)."""
        while not self._closed.wait(SYNC_INTERVAL_S):
            try:
                with self._io:
                    if self._fd >= 0 and self._dirty:
                        self._dirty = False
                        os.fsync(self._fd)
            except OSError as err:
                log.error("journal fsync failed: %s", err)

    def stop_syncing(self) -> None:
        """End the fsync thread (after its current fsync); `close` still syncs what it keeps."""
        self._closed.set()
        syncer = self._syncer
        if syncer is not None and syncer is not threading.current_thread():
            syncer.join()

    @property
    def size(self) -> int:
        return self._offset

    def sync(self) -> None:
        with self._io:
            if self._dirty and self._fd >= 0:
                self._dirty = False
                os.fsync(self._fd)

    def reset(self) -> None:
        """Everything journaled is in the cache and the warehouse: start the file over."""
        os.ftruncate(self._fd, 0)
        self._offset = 0
        self._dirty = False
        if self.low_space is None:
            self._reserve()

    def close(self, remove: bool) -> None:
        if self._fd < 0:
            return
        self._closed.set()
        # finalizing: a daemon thread stopped holding _io never releases it, and none can run any more
        locked = self._io.acquire(blocking=not sys.is_finalizing())
        try:
            if remove:
                self.path.unlink(missing_ok=True)
            else:
                os.ftruncate(self._fd, self._offset)  # drop the unused reservation
                os.fsync(self._fd)
        finally:
            os.close(self._fd)  # releases the lock: the next client replays what is left
            self._fd = -1
            if locked:
                self._io.release()


@atexit.register
def _stop_syncing_at_exit() -> None:
    for journal in list(_OPEN):
        journal.stop_syncing()


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"__dt__": value.isoformat()}
    return str(value)


def _revive(rec: dict[str, Any]) -> dict[str, Any]:
    for k, v in rec.items():
        if isinstance(v, dict) and "__dt__" in v:
            rec[k] = datetime.fromisoformat(v["__dt__"])
    return rec


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The complete entries of a journal file (a torn last line and the zero-filled reservation are skipped)."""
    out = []
    with open(path, "rb") as fh:
        for line in fh.read().split(b"\n"):
            line = line.strip(b"\x00").strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def replay(directory: Path, put_answers: Callable[[list[tuple[str, dict[str, Any]]]], None],
           write_records: Callable[[list[dict[str, Any]]], Any] | None) -> tuple[int, int]:
    """Replay the journals of clients that are gone; returns (answers, records) replayed. Without
    `write_records` (a client with no warehouse) the records stay in the file for the next client."""
    directory = Path(directory)
    if not directory.is_dir():
        return 0, 0
    n_answers = n_records = 0
    for path in sorted(directory.glob("*.jsonl")):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its client is alive
            if not path.exists() or os.fstat(fd).st_size == 0:
                continue  # replayed by another process meanwhile, or a client between open and lock
            entries = read_entries(path)
            answers = [(e["key"], e["value"]) for e in entries if e.get("t") == "answer"]
            if not answers and write_records is None:
                continue
            records = [_revive(e["row"]) for e in entries if e.get("t") == "record"]
            if answers:
                put_answers(answers)
            if records and write_records is None:  # no warehouse here: keep the records for a client with one
                keep = path.with_name(path.name + ".tmp")
                keep.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n"
                                        for e in entries if e.get("t") == "record"), encoding="utf-8")
                os.replace(keep, path)
                n_answers += len(answers)
                continue
            if records:
                write_records(records)
            path.unlink(missing_ok=True)
            n_answers += len(answers)
            n_records += len(records)
        finally:
            os.close(fd)
    if n_answers or n_records:
        log.info("replayed %d answer(s) and %d call record(s) left by an earlier run from %s",
                 n_answers, n_records, directory)
    return n_answers, n_records
