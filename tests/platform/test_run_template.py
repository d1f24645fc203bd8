"""A new run's event log database is a copy of an empty one made by Dagster's own `_initdb`
(`dagster_private.ReusedEngineSqliteEventLogStorage._from_template`, issue 24 item 3): the same schema,
journal mode and alembic stamp as `_initdb` makes per run, made once per Dagster version and safe when
several processes create runs at once. The CPU it saves is measured by `bench/run_start_cost.py`."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time

import dagster
from dagster import DagsterEvent, DagsterEventType, EventLogEntry
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from wse_platform import dagster_private
from wse_platform.dagster_private import TEMPLATE_DIR, ReusedEngineSqliteEventLogStorage, template_key


def _shape(path) -> tuple:
    con = sqlite3.connect(path)
    try:
        return (sorted(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(), key=str),
                con.execute("SELECT version_num FROM alembic_version").fetchall(),
                con.execute("PRAGMA journal_mode").fetchone(), con.execute("PRAGMA user_version").fetchone())
    finally:
        con.close()


def _event(run_id: str) -> EventLogEntry:
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=DagsterEvent(DagsterEventType.RUN_START.value, "job"))


def test_a_new_run_file_is_a_copy_with_the_schema_and_stamp_dagster_makes(tmp_path, monkeypatch):
    stock = SqliteEventLogStorage(str(tmp_path / "stock"))
    with stock.run_connection("r1"):
        pass
    ours = ReusedEngineSqliteEventLogStorage(str(tmp_path / "ours"))
    checked: list[str] = []
    real = ours._initdb
    monkeypatch.setattr(ours, "_initdb", lambda engine, **kw: (checked.append(str(engine.url)), real(engine, **kw)))
    ours.store_event(_event("r1"))
    # the empty database is made once (outside the instance folder); the run's file is no DDL nor
    # alembic check (on the old code: `_initdb` on `r1.db`)
    assert len(checked) == 1 and not checked[0].endswith("/ours/r1.db") and "wse-run-template-" in checked[0]
    ours.store_event(_event("r2"))
    assert len(checked) == 1
    assert os.path.exists(tmp_path / "ours" / TEMPLATE_DIR / f"{template_key()}.sqlite")
    ours.release_connections()
    stock.dispose()
    assert _shape(tmp_path / "ours" / "r1.db") == _shape(tmp_path / "stock" / "r1.db")
    assert [r.event_log_entry.run_id for r in ours.get_records_for_run("r1").records] == ["r1"]
    assert sorted(ours.get_all_run_ids()) == ["r1", "r2"]  # the template is no run of Dagster's


def test_an_existing_run_file_is_left_to_dagster(tmp_path, monkeypatch):
    stock = SqliteEventLogStorage(str(tmp_path))
    stock.store_event(_event("r1"))  # another process made it
    ours = ReusedEngineSqliteEventLogStorage(str(tmp_path))
    monkeypatch.setattr(ours, "_run_template", lambda: (_ for _ in ()).throw(AssertionError("copied")))
    ours.store_event(_event("r1"))
    assert len(ours.get_records_for_run("r1").records) == 2


def test_another_dagster_version_makes_its_own_template(tmp_path, monkeypatch):
    first = template_key()
    template_key.cache_clear()
    monkeypatch.setattr(dagster, "__version__", dagster.__version__ + ".post1")
    try:
        second = template_key()
        ours = ReusedEngineSqliteEventLogStorage(str(tmp_path))
        ours.store_event(_event("r1"))
        assert second != first
        assert sorted(os.listdir(tmp_path / TEMPLATE_DIR)) == [f"{second}.sqlite"]
    finally:
        template_key.cache_clear()


def _create_runs(base_dir: str, worker: int, start) -> None:
    start.wait()
    storage = ReusedEngineSqliteEventLogStorage(base_dir)
    for i in range(6):
        storage.store_event(_event(f"w{worker}-{i}"))
        storage.store_event(_event("shared"))  # all workers race to create this one
    storage.dispose()
    os._exit(0)


def test_processes_creating_runs_at_once_each_get_a_whole_database(tmp_path):
    ReusedEngineSqliteEventLogStorage(str(tmp_path)).dispose()  # the index (processes racing to make it: Dagster's)
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_create_runs, args=(str(tmp_path), w, start)) for w in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    ours = ReusedEngineSqliteEventLogStorage(str(tmp_path))
    assert len(ours.get_all_run_ids()) == 19  # the template is made by the first process to need it
    shape = _shape(tmp_path / "shared.db")
    for run_id in ours.get_all_run_ids():
        assert _shape(tmp_path / f"{run_id}.db") == shape
        assert len(ours.get_records_for_run(run_id).records) == (18 if run_id == "shared" else 1)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert dagster_private.TEMPLATE_DIR in os.listdir(tmp_path)


def test_a_table_the_index_has_is_asked_about_once(tmp_path, monkeypatch):
    """Dagster asks `has_table("asset_check_executions")` before each stored check event, each time
    with a new engine (on the old code: every time)."""
    asked: list[str] = []
    real = SqliteEventLogStorage.has_table
    monkeypatch.setattr(SqliteEventLogStorage, "has_table", lambda self, name: asked.append(name) or real(self, name))
    ours = ReusedEngineSqliteEventLogStorage(str(tmp_path))
    assert all(ours.has_table("asset_check_executions") for _ in range(3))
    assert not any(ours.has_table("no_such_table") for _ in range(2))  # a "no" is asked again
    assert asked == ["asset_check_executions", "no_such_table", "no_such_table"]
