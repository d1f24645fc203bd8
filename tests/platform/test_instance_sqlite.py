"""`wse_platform.instance_sqlite`: the instance's SQLite files get `synchronous=NORMAL` and a held idle
connection (no checkpoint + fsync on every query's close); files elsewhere are untouched, and what
Dagster stores reads back the same (from a fresh process's point of view: a new instance object)."""
from __future__ import annotations

import sqlite3

import sqlalchemy
from dagster import AssetKey, DagsterInstance, asset, materialize
from sqlalchemy import event
from sqlalchemy.engine import Engine

from wse_platform import instance_sqlite


@asset
def thing() -> int:
    return 1


def test_instance_files_commit_without_fsync_wait_and_read_back_the_same(tmp_path):
    seen: dict[str, int] = {}

    def spy(dbapi_connection, record):  # registered after install(): sees the connection as Dagster gets it
        if isinstance(dbapi_connection, sqlite3.Connection):
            path = dbapi_connection.execute("PRAGMA database_list").fetchone()[2]
            seen[path] = dbapi_connection.execute("PRAGMA synchronous").fetchone()[0]

    home = tmp_path / "dagster_home"
    home.mkdir()
    other = tmp_path / "elsewhere.db"
    instance_sqlite.install(home)
    event.listen(Engine, "connect", spy)
    try:
        with DagsterInstance.local_temp(str(home)) as instance:
            assert materialize([thing], instance=instance).success
            run_id = instance.get_runs(limit=1)[0].run_id
        eng = sqlalchemy.create_engine(f"sqlite:///{other}")
        with eng.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
        eng.dispose()
        held = instance_sqlite.held()
    finally:
        event.remove(Engine, "connect", spy)
        instance_sqlite.release()
    ours = {p: v for p, v in seen.items() if p.startswith(str(home.resolve()))}
    assert ours and set(ours.values()) == {1}             # NORMAL for every file of the instance
    assert seen[str(other)] == 2                          # FULL (SQLite's default) elsewhere
    assert any(p.endswith("index.db") for p in held) and any(p.endswith(f"{run_id}.db") for p in held)
    assert not any(p == str(other) for p in held)
    for path in ours:                                     # still WAL files, as Dagster made them
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with DagsterInstance.local_temp(str(home)) as again:  # what was stored reads back
        assert again.get_latest_materialization_event(AssetKey("thing")) is not None
        assert again.get_run_by_id(run_id).is_success
