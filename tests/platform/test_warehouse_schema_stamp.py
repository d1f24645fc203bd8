"""`ensure_schema` runs the DDL only where it has not run yet (issue 24: ~50 ms of CPU and a checkpoint in
every process that opens the warehouse, each cell run and table run). A `Warehouse` object stands for a
process here (the memo is per object). The DDL below counts its own runs in a table."""
from __future__ import annotations

import os
import shutil

import duckdb

from wse_platform.warehouse import Warehouse

COUNTING_DDL = ("CREATE TABLE IF NOT EXISTS t (x INTEGER);\n"
                "CREATE TABLE IF NOT EXISTS ddl_runs (n INTEGER);\n"
                "INSERT INTO ddl_runs VALUES (1);\n")


def _runs(path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM ddl_runs").fetchall()[0][0]
    finally:
        con.close()


def _setup(tmp_path):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "000_t.sql").write_text(COUNTING_DDL)
    return tmp_path / "wh.duckdb", sql


def test_the_ddl_runs_once_per_file_not_once_per_process(tmp_path):
    path, sql = _setup(tmp_path)
    for _ in range(3):  # three processes, one after the other
        Warehouse(path, sql_dir=sql).ensure_schema()
    assert _runs(path) == 1
    wh = Warehouse(path, sql_dir=sql)
    wh.replace_table("t", __import__("polars").DataFrame({"x": [1, 2]}))  # writes still work
    assert wh.query("SELECT count(*) AS n FROM t")["n"][0] == 2
    assert "schema_stamp" not in wh.tables()  # the stamp is not one of the warehouse's tables


def test_changed_ddl_runs_again_on_a_stamped_file(tmp_path):
    """New code (another DDL) on a file made by older code: the DDL runs, adds what is missing."""
    path, sql = _setup(tmp_path)
    Warehouse(path, sql_dir=sql).ensure_schema()
    (sql / "001_u.sql").write_text("CREATE TABLE IF NOT EXISTS u (y INTEGER);\n")
    wh = Warehouse(path, sql_dir=sql)
    wh.ensure_schema()
    assert _runs(path) == 2 and "u" in wh.tables()
    Warehouse(path, sql_dir=sql).ensure_schema()
    assert _runs(path) == 2


def test_a_replaced_file_gets_the_ddl(tmp_path):
    """A file replaced by one without the stamp (made by hand, or before stamps existed) gets the DDL,
    also in a process that had stamped the old file."""
    path, sql = _setup(tmp_path)
    wh = Warehouse(path, sql_dir=sql)
    wh.ensure_schema()
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE ddl_runs (n INTEGER)")
    con.close()
    os.replace(other, path)
    wh.ensure_schema()
    assert _runs(path) == 1 and "t" in wh.tables()


def test_a_copied_stamped_file_needs_no_ddl(tmp_path):
    path, sql = _setup(tmp_path)
    Warehouse(path, sql_dir=sql).ensure_schema()
    copy = tmp_path / "copy.duckdb"
    shutil.copy(path, copy)
    Warehouse(copy, sql_dir=sql).ensure_schema()
    assert _runs(copy) == 1


def test_the_real_schema_is_stamped_once(tmp_path):
    """With the platform's DDL: a second process finds the stamp and leaves the file as it is."""
    path = tmp_path / "wh.duckdb"
    Warehouse(path).ensure_schema()
    before = path.stat().st_mtime_ns, path.stat().st_size
    wh = Warehouse(path)
    wh.ensure_schema()
    assert (path.stat().st_mtime_ns, path.stat().st_size) == before  # nothing written, no checkpoint
    assert "wse_trajectories" in wh.tables()


def test_parallel_processes_run_the_ddl_once_and_all_write(tmp_path):
    """Processes starting at once on a new file: one runs the DDL, the others find its stamp under the
    write lock (or before it); every one's partition write lands."""
    import subprocess
    import sys

    path, sql = _setup(tmp_path)
    code = ("import sys, polars as pl; from pathlib import Path; from wse_platform.warehouse import Warehouse; "
            "wh = Warehouse(sys.argv[1], sql_dir=Path(sys.argv[2])); wh.ensure_schema(); "
            "wh.replace_partition('t', pl.DataFrame({'x': [int(sys.argv[3])]}, schema={'x': pl.Int32}), "
            "{'x': int(sys.argv[3])})")
    from wse_platform.config import REPO_ROOT
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(sql), str(i)],
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(4)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    assert _runs(path) == 1
    assert sorted(Warehouse(path, sql_dir=sql).table("t")["x"].to_list()) == [0, 1, 2, 3]


def test_a_table_dropped_by_hand_is_made_again(tmp_path):
    """The stamp lists the tables the DDL left: a table dropped since (in a SQL shell) voids it, so the
    next process runs the DDL and the table is there again, as without a stamp."""
    path, sql = _setup(tmp_path)
    Warehouse(path, sql_dir=sql).ensure_schema()
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE t")
    con.close()
    wh = Warehouse(path, sql_dir=sql)
    wh.ensure_schema()
    assert "t" in wh.tables() and _runs(path) == 2
    Warehouse(path, sql_dir=sql).ensure_schema()   # stamped again, with t
    assert _runs(path) == 2


def test_the_ddl_is_one_transaction(tmp_path):
    """The DDL files and the stamp are committed together (issue 24: one commit instead of one per statement,
    ~150 fdatasyncs on a fresh file): a file that fails leaves nothing of the files before it, nor a stamp."""
    import pytest

    from wse_platform.warehouse import WarehouseError

    path, sql = _setup(tmp_path)
    (sql / "001_bad.sql").write_text("CREATE TABLE IF NOT EXISTS u (y INTEGER);\nCREATE TABLE oops (;\n")
    with pytest.raises(WarehouseError, match="001_bad.sql"):
        Warehouse(path, sql_dir=sql).ensure_schema()
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        con.close()
    assert not names & {"t", "ddl_runs", "u", "schema_stamp"}, names
    (sql / "001_bad.sql").write_text("CREATE TABLE IF NOT EXISTS u (y INTEGER);\n")   # fixed: all of it runs
    wh = Warehouse(path, sql_dir=sql)
    wh.ensure_schema()
    assert _runs(path) == 1 and {"t", "u"} <= set(wh.tables())


def test_the_real_ddl_upgrades_a_warehouse_of_older_code(tmp_path):
    """In one transaction the real DDL upgrades a warehouse of older code as running its files one statement
    after the other did (autocommit, as before): here one made without any `ALTER TABLE ... ADD COLUMN IF NOT
    EXISTS` (the columns newer code added), with the same tables and columns afterwards."""
    import re

    from wse_platform.warehouse import SQL_DIR

    old = tmp_path / "old_sql"
    old.mkdir()
    removed = 0
    for f in sorted(SQL_DIR.glob("*.sql")):
        text, n = re.subn(r"(?m)^ALTER TABLE [^;]*ADD COLUMN IF NOT EXISTS[^;]*;", "", f.read_text())
        removed += n
        (old / f.name).write_text(text)
    assert removed > 10
    path, reference = tmp_path / "wh.duckdb", tmp_path / "reference.duckdb"
    Warehouse(path, sql_dir=old).ensure_schema()
    shutil.copy(path, reference)
    Warehouse(path).ensure_schema()
    con = duckdb.connect(str(reference))
    try:
        for f in sorted(SQL_DIR.glob("*.sql")):
            con.execute(f.read_text())   # each statement committed on its own
    finally:
        con.close()
    columns = "SELECT table_name, column_name, data_type FROM information_schema.columns ORDER BY ALL"
    got = Warehouse(path).query(columns).to_dicts()
    assert got == Warehouse(reference, sql_dir=old).query(columns).to_dicts()
    assert {"table_name": "llm_calls", "column_name": "endpoint", "data_type": "VARCHAR"} in got
