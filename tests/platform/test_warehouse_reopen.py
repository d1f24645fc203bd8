"""Opening and closing the warehouse: a closed warehouse is free for other processes, an error inside
a transaction leaves the next open clean, threads read and write at once. (An ATTACH to one
in-memory DuckDB per thread was tried for cheaper opens and withdrawn: a connection's settings, e.g.
`wse sql`'s lockdown, then leaked into every later open of that thread.)"""
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
