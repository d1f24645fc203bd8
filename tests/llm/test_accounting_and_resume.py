"""Call records land in `llm_calls` idempotently; a killed run resumes without repeating calls."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
from wse_platform.llm.accounting import CALL_SCHEMA, call_records_frame, write_call_records
from wse_platform.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]


def test_records_match_the_llm_calls_table_and_writes_are_idempotent(tmp_path):
    settings = make_settings(tmp_path)
    client = LLMClient(settings, run_id="run-acc", backends={"smollm2": ScriptedBackend({"*": ["", "ok"]})})
    client.complete_many([LLMRequest(role="r", model="smollm2", messages=[{"role": "user", "content": c}])
                          for c in ("a", "b")])
    records = client.call_records()
    assert set(records[0]) == set(CALL_SCHEMA)
    wh = Warehouse(tmp_path / "wh.duckdb")
    ddl_cols = wh.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'llm_calls'")
    assert set(ddl_cols["column_name"].to_list()) == set(CALL_SCHEMA)
    assert write_call_records(wh, records) == 3  # a: empty then ok (2 attempts), b: ok
    assert write_call_records(wh, records) == 0  # same run's records again: nothing new
    rows = wh.query("SELECT attempt, valid, error_kind FROM llm_calls ORDER BY created_at, attempt")
    assert sorted(rows.rows()) == [(1, False, "empty_output"), (1, True, None), (2, True, None)]
    assert call_records_frame([]).height == 0



def _record(call_id: str, request_key: str, run_id: str, error_kind: str | None = None) -> dict:
    return {"call_id": call_id, "run_id": run_id, "partition_key": "p", "role": "r", "model": "m",
            "request_key": request_key, "attempt": 1, "valid": error_kind is None, "error_kind": error_kind}


def test_failed_calls_are_replaced_by_the_answered_call_of_the_same_request(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    assert write_call_records(wh, [_record("f1", "x", "run-1", "transport")]) == 1
    answered = [_record("a2", "x", "run-2"), _record("g2", "y", "run-2", "infrastructure")]
    assert write_call_records(wh, answered) == 2            # x answered: its failed row goes
    assert write_call_records(wh, [_record("f3", "x", "run-3", "transport")]) == 0  # x has its answer
    assert write_call_records(wh, answered) == 0            # the same batch again: nothing new
    rows = wh.query("SELECT call_id, error_kind FROM llm_calls ORDER BY call_id").rows()
    assert rows == [("a2", None), ("g2", "infrastructure")]


def _spy_statements(wh, monkeypatch) -> list[str]:
    import contextlib
    statements: list[str] = []

    class Spy:
        def __init__(self, con):
            self._con = con

        def execute(self, sql, *args):
            statements.append(" ".join(sql.split()))
            return self._con.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._con, name)

    plain = wh.transaction

    @contextlib.contextmanager
    def spied():
        with plain() as con:
            yield Spy(con)
    monkeypatch.setattr(wh, "transaction", spied)
    return statements


def test_a_batch_without_failed_calls_reads_no_llm_calls_and_skips_known_ids(tmp_path, monkeypatch):
    """Issue 24: a batch read the whole of llm_calls (a NOT EXISTS anti-join and two count(*)), a cost
    that grew with the warehouse; the primary key rejects a known call_id and the INSERT counts. A batch
    holding known records (written again) is inserted anew skipping them (`INSERT OR IGNORE`)."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(5)])
    statements = _spy_statements(wh, monkeypatch)
    assert write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(3, 8)]) == 3
    assert wh.query("SELECT count(*) AS n FROM llm_calls")["n"][0] == 8
    assert sorted(wh.query("SELECT call_id FROM llm_calls")["call_id"]) == [f"c{i}" for i in range(8)]
    reads = [s for s in statements if "llm_calls" in s.split(" INTO llm_calls", 1)[-1] and not s.startswith("DELETE")]
    assert reads == [] and any(s.startswith("INSERT OR IGNORE INTO llm_calls") for s in statements), statements
    assert not any("count(" in s.lower() for s in statements), statements
    assert write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(8)]) == 0   # all known
    assert wh.query("SELECT count(*) AS n FROM llm_calls")["n"][0] == 8


def test_a_batch_of_new_records_goes_in_without_the_conflict_clause(tmp_path, monkeypatch):
    """Issue 24: `INSERT OR IGNORE` (DuckDB's ON CONFLICT path) cost ~9 ms of CPU per batch though a batch
    almost never holds a known record: a batch of new records is one plain INSERT (the primary key would
    reject a known one, and only then is the batch inserted with OR IGNORE)."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(5)])
    statements = _spy_statements(wh, monkeypatch)
    assert write_call_records(wh, [_record(f"n{i}", f"m{i}", "run-2") for i in range(4)]) == 4
    inserts = [s for s in statements if s.startswith("INSERT")]
    assert len(inserts) == 1 and inserts[0].startswith("INSERT INTO llm_calls "), statements
    assert not any("ROLLBACK" in s or "OR IGNORE" in s or "ON CONFLICT" in s for s in statements), statements
    assert wh.query("SELECT count(*) AS n FROM llm_calls")["n"][0] == 9


def test_a_key_rejection_at_commit_writes_the_batch_again_skipping_known_ids(tmp_path, monkeypatch):
    """Where DuckDB rejects a known key only at COMMIT (not at the INSERT), the batch is rolled back and
    written again with OR IGNORE: the new records land, once each."""
    import contextlib

    import duckdb
    wh = Warehouse(tmp_path / "wh.duckdb")
    write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(3)])
    plain, verbs = wh.transaction, []

    @contextlib.contextmanager
    def rejected_at_commit():
        with plain() as con:
            yield con
            verbs.append(len(verbs))
            if len(verbs) == 1:
                raise duckdb.ConstraintException("Constraint Error: duplicate key (at commit)")
    monkeypatch.setattr(wh, "transaction", rejected_at_commit)
    # the INSERT itself passes (new ids); the first COMMIT is made to reject, as such a version would
    assert write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(3, 5)]) == 2
    assert len(verbs) == 2
    assert sorted(wh.query("SELECT call_id FROM llm_calls")["call_id"]) == ["c0", "c1", "c2", "c3", "c4"]


def test_a_batch_written_again_in_a_failed_calls_batch_keeps_one_row_each(tmp_path):
    """The fallback for known records also holds for a batch with failed calls (its INSERT has a filter)."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    batch = [_record("a1", "x", "run-1"), _record("f1", "y", "run-1", "transport")]
    assert write_call_records(wh, batch) == 2
    assert write_call_records(wh, batch + [_record("f2", "z", "run-1", "infrastructure")]) == 1
    rows = wh.query("SELECT call_id, error_kind FROM llm_calls ORDER BY call_id").rows()
    assert rows == [("a1", None), ("f1", "transport"), ("f2", "infrastructure")]


WRITER = textwrap.dedent("""
    import sys
    from tests.llm.test_accounting_and_resume import _record
    from wse_platform.llm.accounting import write_call_records
    from wse_platform.warehouse import Warehouse
    wh, me = Warehouse(sys.argv[1]), sys.argv[2]
    added = 0
    for b in range(12):   # batches overlapping the other writer's: ids c{4b}..c{4b+7}, plus one of this writer's own
        added += write_call_records(wh, [_record(f"c{i}", f"k{i}", "run-1") for i in range(4 * b, 4 * b + 8)]
                                    + [_record(f"{me}{b}", f"{me}k{b}", "run-1")])
    print(added)
""")


def test_two_processes_writing_the_same_records_at_once_keep_one_row_each(tmp_path):
    """Parallel runs: two processes write overlapping batches at the same time (each batch partly known,
    partly the other's, partly new); every call_id lands once and the new-row counts add up."""
    path = tmp_path / "wh.duckdb"
    Warehouse(path).ensure_schema()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), me], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}) for me in ("x", "y")]
    added = [int(p.communicate(timeout=120)[0].split()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ids = Warehouse(path).query("SELECT call_id FROM llm_calls")["call_id"].to_list()
    assert len(ids) == len(set(ids)) == 52 + 24 == sum(added)   # c0..c51 once, x0..x11 and y0..y11


RUNNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.llm.conftest import make_settings
    from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
    tmp = Path(sys.argv[1])
    def slow(call):
        time.sleep(0.1)
        with open(tmp / "answered.log", "a") as f:
            f.write(call.messages[0]["content"] + "\\n")
        return "answer " + call.messages[0]["content"]
    client = LLMClient(make_settings(tmp), backends={"smollm2": ScriptedBackend(slow, namespace="resume")})
    client.complete_many([LLMRequest(role="r", model="smollm2", messages=[{"role": "user", "content": str(i)}])
                          for i in range(40)])
""")


def test_killed_run_resumes_without_repeating_answered_calls(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    log = tmp_path / "answered.log"
    deadline = time.monotonic() + 60
    while (not log.exists() or len(log.read_text().split()) < 5) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.05)
    answered = set(log.read_text().split())
    assert 5 <= len(answered) < 40

    backend = ScriptedBackend(lambda call: "answer " + call.messages[0]["content"], namespace="resume")
    client = LLMClient(make_settings(tmp_path), backends={"smollm2": backend})
    results = client.complete_many([LLMRequest(role="r", model="smollm2",
                                               messages=[{"role": "user", "content": str(i)}]) for i in range(40)])
    asked_again = {c.messages[0]["content"] for c in backend.calls}
    # every answer the killed run got (except possibly the one being cached at the kill) is reused
    assert len(asked_again & answered) <= 1
    assert asked_again | answered == {str(i) for i in range(40)}
    assert [r.output for r in results] == [f"answer {i}" for i in range(40)]


def test_long_batches_log_progress_lines(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="wse_platform.llm")
    client = LLMClient(make_settings(tmp_path), backends={"smollm2": ScriptedBackend({"*": "x"})})
    client.complete_many([LLMRequest(role="r", model="smollm2", messages=[{"role": "user", "content": str(i)}])
                          for i in range(50)])
    lines = [r.getMessage() for r in caplog.records if "requests" in r.getMessage()]
    assert len(lines) == 10 and lines[-1].startswith("LLM r: 50/50 requests")
    assert "ETA" in lines[0] and "/s" in lines[0]
