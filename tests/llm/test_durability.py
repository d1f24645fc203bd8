"""An answer paid for is never lost (issue 23, item 3, disk part).

Before: with the cache disk full, answers the server had returned were neither cached nor
recorded and were requested (and paid) again by the rerun; with the warehouse disk full, the
calls of the failed run were missing from `llm_calls` for good. Now every answer and call
record is journaled before anything else happens (journal.py); the next client replays the
journal into the cache and `llm_calls`. The disks are made full by injected ENOSPC.
"""
from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
from wse_platform.llm import journal as journal_mod
from wse_platform.llm.accounting import write_call_records
from wse_platform.llm.errors import LLMInfrastructureError
from wse_platform.warehouse import Warehouse


class DiskFilledUp:
    """A cache connection whose writes of answers fail as SQLite does on a full disk."""

    def __init__(self, con: sqlite3.Connection):
        self._c = con

    def _check(self, sql: str) -> None:
        if "INTO responses" in sql:
            raise sqlite3.OperationalError("database or disk is full")

    def execute(self, sql: str, *args):
        self._check(sql)
        return self._c.execute(sql, *args)

    def executemany(self, sql: str, *args):
        self._check(sql)
        return self._c.executemany(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._c, name)


def reqs(n: int = 20) -> list[LLMRequest]:
    return [LLMRequest(role="endings.forecast", model="smollm2", messages=[{"role": "user", "content": f"q{i}"}])
            for i in range(n)]


def backend() -> ScriptedBackend:
    return ScriptedBackend(lambda call: "answer " + call.messages[0]["content"], namespace="disk")


def test_full_cache_disk_and_full_warehouse_lose_no_answer_and_no_record(tmp_path):
    settings = make_settings(tmp_path)

    def warehouse_full(rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    first = LLMClient(settings, run_id="run-full", backends={"smollm2": backend()}, record_sink=warehouse_full,
                      flush_every=1)
    first.cache._con = DiskFilledUp(first.cache._con)  # the cache disk fills during the run
    with pytest.raises(LLMInfrastructureError):
        first.complete_many(reqs())
    first.close()

    wh = Warehouse(tmp_path / "wh.duckdb")
    again = backend()
    rerun = LLMClient(settings, run_id="run-2", backends={"smollm2": again},
                      record_sink=lambda rows: write_call_records(wh, rows))
    results = rerun.complete_many(reqs())
    rerun.flush_records()
    assert again.calls == []  # nothing paid twice
    assert [r.output for r in results] == [f"answer q{i}" for i in range(20)] and all(r.cache_hit for r in results)
    counts = dict(wh.query("SELECT run_id, count(*) AS n FROM llm_calls WHERE NOT cache_hit GROUP BY ALL").rows())
    assert counts == {"run-full": 20}  # the failed run's paid calls are accounted, once
    rerun.close()
    assert not list((tmp_path / "cache" / "journal").glob("*.jsonl"))  # replayed, then removed


KILLED = r"""
import sys, time
from pathlib import Path
from tests.llm.conftest import make_settings
from tests.llm.test_durability import backend, reqs
from wse_platform.llm import LLMClient

client = LLMClient(make_settings(Path(sys.argv[1])), run_id="killed", backends={"smollm2": backend()},
                   record_sink=lambda rows: None, flush_every=10**6, flush_interval_s=3600)  # not written yet
client.complete_many(reqs(5))
print("answered", flush=True)
time.sleep(600)
"""


def test_a_killed_client_leaves_its_journal_for_the_next_start(tmp_path):
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], cwd=root, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert proc.stdout.readline().strip() == "answered"
    finally:
        proc.kill()  # SIGKILL: no close(), no flush; the kernel releases the journal's lock
        proc.wait()
    wh = Warehouse(tmp_path / "wh.duckdb")
    again = backend()
    rerun = LLMClient(make_settings(tmp_path), run_id="next", backends={"smollm2": again},
                      record_sink=lambda rows: write_call_records(wh, rows))
    rerun.complete_many(reqs(5))
    rerun.flush_records()
    assert again.calls == []
    # before: the killed client's records were only in its memory
    assert wh.query("SELECT count(*) AS n FROM llm_calls WHERE run_id = 'killed'")["n"][0] == 5


def test_journal_that_cannot_reserve_space_stops_the_run_and_keeps_the_answers(tmp_path, monkeypatch):
    settings = make_settings(tmp_path)
    monkeypatch.setattr(journal_mod, "RESERVE", 2048)
    calls = {"n": 0}
    real = journal_mod.os.posix_fallocate

    def fallocate(fd, offset, length):
        calls["n"] += 1
        if calls["n"] > 1:  # the disk fills after the journal was opened
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, offset, length)

    monkeypatch.setattr(journal_mod.os, "posix_fallocate", fallocate)
    client = LLMClient(settings, run_id="low", backends={"smollm2": backend()}, record_sink=lambda rows: None)
    with pytest.raises(LLMInfrastructureError, match="no space left"):
        client.complete_many(reqs())
    client.close()
    monkeypatch.undo()
    again = backend()
    LLMClient(settings, backends={"smollm2": again}).complete_many(reqs())
    assert again.calls == []
