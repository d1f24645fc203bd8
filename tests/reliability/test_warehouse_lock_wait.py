"""A warehouse locked by another process: say who holds it and that we wait (issue 14, item 11).

Before: `wse sql` and `materialize` waited silently for up to 600 s.
"""
import os
import subprocess
import sys
import time

import polars as pl
import pytest

import wse_platform.warehouse as warehouse_module
from tests.conftest import REPO, write_config
from wse_platform.warehouse import Warehouse, WarehouseError

# Holds the inter-process lock the way a long `wse materialize` write does.
HOLD_OUR_LOCK = """
import os, sys, time
from wse_platform.warehouse import Warehouse
wh = Warehouse(sys.argv[1])
release = sys.argv[1] + ".release"
with wh.connect():
    print("held", flush=True)
    end = time.time() + float(sys.argv[2])
    while time.time() < end and not os.path.exists(release):
        time.sleep(0.05)
"""

# Holds the DuckDB file itself, like a user's duckdb shell (it does not know our lock).
HOLD_DUCKDB = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(script, db, seconds):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", script, str(db), str(seconds)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def db(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")  # also runs the shipped DDL
    return tmp_path / "wh.duckdb"


def test_waiting_for_our_lock_names_the_holder(db, capfd, monkeypatch):
    monkeypatch.setattr(warehouse_module, "NOTICE_AFTER_S", 0.5)
    holder = _hold(HOLD_OUR_LOCK, db, 3)
    try:
        t0 = time.time()
        Warehouse(db).replace_table("t", pl.DataFrame({"x": [1, 2]}))  # the write path every asset uses
        waited = time.time() - t0
    finally:
        holder.wait(timeout=30)
    err = capfd.readouterr().err
    assert f"PID {holder.pid}" in err and "waiting" in err and str(db) in err
    assert waited > 1  # it did wait for the holder rather than fail
    assert Warehouse(db).query("SELECT count(*) n FROM t")["n"][0] == 2


def test_giving_up_names_the_holder(db, monkeypatch):
    monkeypatch.setattr(warehouse_module, "NOTICE_AFTER_S", 0.2)
    holder = _hold(HOLD_OUR_LOCK, db, 5)
    try:
        with pytest.raises(WarehouseError) as err:
            with Warehouse(db, lock_timeout=1.0).connect(read_only=True):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert f"PID {holder.pid}" in str(err.value) and "gave up" in str(err.value)


def test_waiting_for_another_program_names_its_pid(db, capfd, monkeypatch):
    monkeypatch.setattr(warehouse_module, "NOTICE_AFTER_S", 0.5)
    holder = _hold(HOLD_DUCKDB, db, 3)
    try:
        df = Warehouse(db).query("SELECT count(*) n FROM t")
    finally:
        holder.wait(timeout=30)
    err = capfd.readouterr().err
    assert f"PID {holder.pid}" in err and "held by another program" in err and "waiting" in err
    assert df["n"][0] == 0


def test_wse_sql_says_who_holds_the_lock(db, tmp_path):
    """The holder keeps the lock until `wse sql` has said it is waiting (robust to slow start-up)."""
    cfg = write_config(tmp_path)
    holder = _hold(HOLD_OUR_LOCK, db, 90)  # bounded: on the old code no notice ever comes
    env = dict(os.environ, PYTHONPATH=str(REPO), WSE_WAREHOUSE=str(db))
    sql = subprocess.Popen([sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "sql",
                            "SELECT 42 AS answer"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        notice = sql.stderr.readline()  # blocks until the first line on stderr
        (tmp_path / "wh.duckdb.release").touch()
        out, err = sql.communicate(timeout=120)
    finally:
        (tmp_path / "wh.duckdb.release").touch()
        holder.wait(timeout=30)
        sql.kill()
    assert sql.returncode == 0, notice + err
    assert f"locked by PID {holder.pid}" in notice and "waiting" in notice
    assert "42" in out
