"""Opening and closing the warehouse: a closed warehouse is free for other processes, an error inside
a transaction leaves the next open clean, threads read and write at once. Opens attach the file to
one in-memory DuckDB instance per thread (issue 24 item 3: an instance costs ~40 ms of CPU, an attach
~4 ms): each open is a new session of it whose settings are locked, so nothing one open did (temporary
tables, settings, `wse sql`'s lockdown in an instance of its own) reaches the next one."""
from __future__ import annotations

import subprocess
import sys
import threading

import duckdb
import polars as pl
import pytest

import wse_platform.warehouse as mod
from wse_platform.warehouse import Warehouse


def test_a_closed_warehouse_is_free_for_other_processes(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    with wh.connect() as con:
        con.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 's1')")
    code = ("import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
            "print(c.execute('SELECT count(*) FROM wse_trajectories').fetchall()[0][0])")
    out = subprocess.run([sys.executable, "-c", code, str(wh.path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr  # DuckDB's own file lock was released by the DETACH
    assert out.stdout.strip() == "1"  # and the write was on disk


def test_an_error_inside_a_transaction_leaves_the_next_open_clean(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    with pytest.raises(duckdb.Error):
        with wh.connect() as con:
            con.execute("BEGIN TRANSACTION")
            con.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 's1')")
            con.execute("SELECT * FROM no_such_table")
    assert wh.query("SELECT count(*) AS n FROM wse_trajectories")["n"][0] == 0  # rolled back
    with wh.connect(read_only=True) as con:  # attached again, read-only now
        with pytest.raises(duckdb.Error):
            con.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 's2')")


def test_threads_read_and_write_at_once(tmp_path):
    """Readers share the lock, each thread attaching the file to its own instance; a writer queues."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    errors, reads = [], []

    def reader():
        try:
            for _ in range(10):
                with wh.connect(read_only=True) as con:
                    reads.append(con.execute("SELECT count(*) FROM wse_trajectories").fetchall()[0][0])
        except Exception as err:  # noqa: BLE001 - collected for the assertion
            errors.append(repr(err))

    def writer():
        try:
            for i in range(5):
                wh.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', ?)", [f"s{i}"])
        except Exception as err:  # noqa: BLE001
            errors.append(repr(err))

    threads = [threading.Thread(target=reader) for _ in range(2)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(reads) == 20
    assert wh.query("SELECT count(*) AS n FROM wse_trajectories")["n"][0] == 5


def _connects(monkeypatch) -> list:
    made = []
    real = mod.duckdb.connect
    monkeypatch.setattr(mod.duckdb, "connect", lambda *a, **k: made.append(a) or real(*a, **k))
    return made


def test_opens_of_a_thread_share_one_instance_and_name_the_file_as_a_direct_open(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    mod._drop_base()
    made = _connects(monkeypatch)
    for _ in range(5):
        with wh.connect(read_only=True) as con:
            assert con.execute("SELECT current_database()").fetchall() == [("wh",)]
        wh.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', ?)", [str(_)])
    assert made == [(":memory:",)]  # one DuckDB instance for the ten opens, not one per open
    assert wh.query("SELECT count(*) AS n FROM wse_trajectories")["n"][0] == 5


def test_one_open_leaves_nothing_to_the_next(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    with wh.connect() as con:
        con.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
        for setting in ("enable_progress_bar = true", "enable_external_access = false"):  # DuckDB: per instance
            with pytest.raises(duckdb.InvalidInputException, match="configuration"):
                con.execute(f"SET {setting}")
    with wh.connect(read_only=True) as con:
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM scratch")
        assert con.execute("SELECT current_setting('enable_external_access')").fetchall() == [(True,)]
    with wh.connect(config={"threads": 1}) as con:  # settings: an instance of its own
        con.execute("SET enable_progress_bar = true")
    assert wh.tables()


def test_own_settings_and_a_second_file_of_the_same_name_get_instances_of_their_own(tmp_path, monkeypatch):
    """`wse sql` (own DuckDB settings, then its lockdown) and a warehouse opened inside another's open
    with the same file name (the catalog name is the stem) each get a DuckDB instance of their own."""
    a, b = Warehouse(tmp_path / "a" / "wh.duckdb"), Warehouse(tmp_path / "b" / "wh.duckdb")
    a.ensure_schema()
    b.ensure_schema()
    with a.connect(read_only=True, config={"memory_limit": "256MB"}) as con:
        con.execute("SET lock_configuration = true")
    with a.connect() as con_a:
        con_a.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 'a')")
        with b.connect() as con_b:
            assert con_b.execute("SELECT count(*) FROM wse_trajectories").fetchall() == [(0,)]
    assert a.query("SELECT count(*) AS n FROM wse_trajectories")["n"][0] == 1
    with a.connect(config={"memory_limit": "256MB"}) as con:
        con.execute("SET memory_limit = '512MB'")  # a new instance: the lockdown stayed in the one before


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork only")
def test_a_forked_child_opens_with_an_instance_of_its_own(tmp_path):
    import os

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    parent = mod._base()
    pid = os.fork()
    if pid == 0:  # the child: never the parent's instance (DuckDB is not fork-safe)
        ok = False
        try:
            wh.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 'child')")
            ok = mod._base() is not parent and parent in mod._inherited
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert wh.query("SELECT seed_id FROM wse_trajectories")["seed_id"].to_list() == ["child"]
