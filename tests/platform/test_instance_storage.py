"""The instance `wse` writes (`runner.dagster_yaml`) stores its event log with
`dagster_private.ReusedEngineSqliteEventLogStorage`: Dagster's SQLite event log (same files and rows)
whose engine and connection per file are kept instead of made for every query and stored event
(issue 24 item 3; the CPU it saves is measured by `bench/cell_overhead.py`, not here)."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from dagster import (AssetCheckResult, AssetKey, AssetMaterialization, DagsterInstance, asset, asset_check,
                     materialize)
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[2]


@asset
def thing() -> int:
    return 1


@asset_check(asset=thing)
def thing_is_one() -> AssetCheckResult:
    return AssetCheckResult(passed=True, metadata={"n": 1})


def _instance(tmp_path, monkeypatch) -> DagsterInstance:
    from wse_platform.config import load_settings
    from wse_platform.runner import ensure_dagster_home

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    home = ensure_dagster_home(load_settings(str(write_config(tmp_path))))
    return DagsterInstance.from_config(str(home))


def test_the_generated_instance_stores_events_in_dagsters_files_with_reused_connections(tmp_path, monkeypatch):
    from wse_platform.dagster_private import ReusedEngineSqliteEventLogStorage

    instance = _instance(tmp_path, monkeypatch)
    assert isinstance(instance.event_log_storage, ReusedEngineSqliteEventLogStorage)
    connects: list[str] = []

    def spy(dbapi_connection, record):
        if isinstance(dbapi_connection, sqlite3.Connection):
            connects.append(dbapi_connection.execute("PRAGMA database_list").fetchone()[2])

    event.listen(Engine, "connect", spy)
    try:
        result = materialize([thing, thing_is_one], instance=instance)
        for _ in range(30):
            instance.get_latest_materialization_event(AssetKey("thing"))
    finally:
        event.remove(Engine, "connect", spy)
    assert result.success
    runs_dir = tmp_path / "dh" / "history" / "runs"
    index = [p for p in connects if p.endswith("index.db")]
    run_file = [p for p in connects if p.endswith(f"{result.run_id}.db")]
    # the stock storage connects anew for every query and stored event (dozens here): one each now
    assert 1 <= len(index) <= 3 and 1 <= len(run_file) <= 3, (len(index), len(run_file))
    assert (runs_dir / f"{result.run_id}.db").exists() and (runs_dir / "index.db").exists()
    instance.dispose()
    # Dagster's own storage reads the same rows from the same files (an instance without our class)
    shutil.copytree(tmp_path / "dh" / "history", tmp_path / "plain" / "history")
    with DagsterInstance.local_temp(str(tmp_path / "plain")) as stock:
        assert type(stock.event_log_storage).__name__ == "SqliteEventLogStorage"
        mat = stock.get_latest_materialization_event(AssetKey("thing"))
        assert mat is not None and mat.run_id == result.run_id
        evals = [e for e in stock.all_logs(result.run_id) if e.dagster_event
                 and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"]
        assert len(evals) == 1 and evals[0].dagster_event.event_specific_data.passed


def test_writes_of_another_process_are_seen_and_a_replaced_file_is_followed(tmp_path, monkeypatch):
    """A kept connection holds no snapshot between uses: another process's write is read at once; a
    file moved aside and replaced is read at its path, not through the old file's connection."""
    instance = _instance(tmp_path, monkeypatch)
    instance.report_runless_asset_event(AssetMaterialization("a", metadata={"n": 1}))
    assert instance.get_latest_materialization_event(AssetKey("a")).asset_materialization.metadata["n"].value == 1
    code = ("from dagster import DagsterInstance, AssetMaterialization;"
            "i = DagsterInstance.get(); i.report_runless_asset_event(AssetMaterialization('a', metadata={'n': 2}))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO,
                   env={**__import__("os").environ, "DAGSTER_HOME": str(tmp_path / "dh"), "PYTHONPATH": str(REPO)})
    assert instance.get_latest_materialization_event(AssetKey("a")).asset_materialization.metadata["n"].value == 2

    index = tmp_path / "dh" / "history" / "runs" / "index.db"
    saved = tmp_path / "index-copy.db"
    instance.report_runless_asset_event(AssetMaterialization("b"))
    src = sqlite3.connect(index)  # a consistent copy of the file (WAL included)
    dst = sqlite3.connect(saved)
    src.backup(dst)
    src.close()
    dst.close()
    instance.report_runless_asset_event(AssetMaterialization("c"))
    assert instance.get_latest_materialization_event(AssetKey("c")) is not None
    for suffix in ("-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    shutil.move(saved, index)  # another file at the path: it knows "b" but not "c"
    assert instance.get_latest_materialization_event(AssetKey("b")) is not None
    assert instance.get_latest_materialization_event(AssetKey("c")) is None
    instance.dispose()


def test_index_columns_and_completed_migrations_are_asked_once(tmp_path, monkeypatch):
    """Dagster checks a data migration or an index column before most index queries; a "yes" does not
    change, so it is asked once per process, not before every query."""
    instance = _instance(tmp_path, monkeypatch)
    assert materialize([thing, thing_is_one], instance=instance).success
    asked: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany):
        if "secondary_indexes" in statement or "table_info" in statement.lower():
            asked.append(statement)

    event.listen(Engine, "before_cursor_execute", spy)
    try:
        for _ in range(20):
            assert instance.get_latest_materialization_event(AssetKey("thing")) is not None
            instance.get_asset_records([AssetKey("thing")])
    finally:
        event.remove(Engine, "before_cursor_execute", spy)
    instance.dispose()
    assert len(asked) <= 4, f"{len(asked)} schema/migration questions in 20 rounds of queries"


def test_connections_kept_from_before_install_are_made_again_with_its_settings(tmp_path, monkeypatch):
    """`wse materialize` reads the instance (status, plan) before `runner.execute` calls
    `instance_sqlite.install`: the index connection the storage kept from then must not stay in
    SQLite's default `synchronous=FULL` (an fsync per stored event, ~1 ms of wall each) for the runs."""
    from wse_platform import instance_sqlite
    from wse_platform.dagster_private import INDEX_SHARD

    instance = _instance(tmp_path, monkeypatch)
    instance.get_latest_materialization_event(AssetKey("thing"))  # index.db connected before install

    def synchronous(shard: str) -> int:
        with instance.event_log_storage._connect(shard) as conn:
            return conn.exec_driver_sql("PRAGMA synchronous").fetchone()[0]

    assert synchronous(INDEX_SHARD) == 2  # FULL, SQLite's default
    instance_sqlite.install(instance.root_directory)
    try:
        result = materialize([thing, thing_is_one], instance=instance)
        assert result.success
        assert synchronous(INDEX_SHARD) == 1 and synchronous(result.run_id) == 1  # NORMAL
    finally:
        instance_sqlite.release()
        instance.dispose()


def test_a_stamped_file_is_opened_without_loading_the_migration_scripts(tmp_path, monkeypatch):
    """`_initdb` on a file another process made (the index, another run's file): its stamp is read, the alembic
    scripts are not loaded (Dagster's check loads all of them per file); a new file still gets Dagster's tables
    and stamp."""
    from alembic.script import ScriptDirectory

    instance = _instance(tmp_path, monkeypatch)
    result = materialize([thing, thing_is_one], instance=instance)
    assert result.success
    other = DagsterInstance.from_config(str(tmp_path / "dh"))   # another process: opens the files anew
    loads = []   # (from here: its run and schedule storages are Dagster's own, checked when it was made)
    real = ScriptDirectory.from_config.__func__
    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(lambda cls, cfg: loads.append(1) or real(cls, cfg)))
    assert other.get_latest_materialization_event(thing.key) is not None   # the index
    assert len(other.get_records_for_run(result.run_id).records) > 0       # the run's file
    assert loads == []   # before: one load per file (2 here)
    storage = other.event_log_storage
    from sqlalchemy import create_engine, inspect
    new = create_engine(f"sqlite:///{tmp_path / 'new.db'}")
    storage._initdb(new)   # an empty file: Dagster's tables and stamp, as before
    assert "event_logs" in inspect(new).get_table_names() and loads
    new.dispose()
    other.dispose()
    instance.dispose()
