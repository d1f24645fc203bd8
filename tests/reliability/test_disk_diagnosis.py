"""Full and read-only disks are named as such, with a fix that keeps the data (issue 23, item 6).

Before: a full disk was reported as a corrupt cache ("safe to move it aside"), an immutable
warehouse as "truncated or corrupt … rebuild everything", a read-only empty cache folder as "not a
readable SQLite database … mv responses.sqlite", a 0-byte warehouse blocked every command, an
emptied Dagster `index.db` gave no message at all and a damaged `schedules.db` the advice to move
the whole Dagster home aside; `wse doctor` checked only the warehouse folder.

Real disks where the machine allows it (root: a small tmpfs, `chattr +i` on ext4), else skipped;
the injected-error tests run everywhere.
"""
import contextlib
import errno
import os
import re
import sqlite3
import subprocess

import pytest

from wse_platform.config import load_settings
from wse_platform.llm.cache import ResponseCache
from wse_platform.llm.errors import CacheCorrupted, LLMInfrastructureError
from wse_platform.warehouse import Warehouse, WarehouseError
import polars as pl


def _mount_tmpfs(where, size="256k"):
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    _mount_tmpfs(where)
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder):
    with contextlib.suppress(OSError), open(folder / "filler", "wb") as f:
        while True:
            f.write(b"x" * 4096)
            f.flush()


def _remount_ro(where):
    assert subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True).returncode == 0


@contextlib.contextmanager
def _immutable(*paths):
    if os.geteuid() != 0 or subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True).returncode:
        pytest.skip("needs root and a file system with chattr +i (ext4)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)


def _keeps_data(msg):
    fix = msg.split("fix:", 1)[1]
    assert not re.search(r"\bmv /", msg) and "move" not in fix and "safe to move" not in msg, msg
    assert "corrupt" not in msg and "not a readable" not in msg, msg


# ---- the LLM cache ---------------------------------------------------------------------------
def test_a_full_disk_is_not_called_a_corrupt_cache(tmp_path, monkeypatch):
    def full(self, busy_timeout_s):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ResponseCache, "_connect", full)
    with pytest.raises(LLMInfrastructureError) as err:
        ResponseCache(tmp_path)
    msg = str(err.value)
    assert not isinstance(err.value, CacheCorrupted)
    assert msg.startswith("no space left on device") and str(tmp_path / "responses.sqlite") in msg
    _keeps_data(msg)


def test_a_cache_on_a_full_tmpfs(small_disk):
    _fill(small_disk)
    with pytest.raises(LLMInfrastructureError) as err:
        ResponseCache(small_disk / "cache")
    assert str(err.value).startswith("no space left on device")
    _keeps_data(str(err.value))


def test_a_read_only_empty_cache_folder(small_disk):
    (small_disk / "cache").mkdir()
    _remount_ro(small_disk)
    with pytest.raises(LLMInfrastructureError) as err:
        ResponseCache(small_disk / "cache")
    msg = str(err.value)
    assert "read-only" in msg and "remount it read-write" in msg
    _keeps_data(msg)


# ---- the warehouse -----------------------------------------------------------------------------
def test_an_immutable_warehouse_is_not_called_corrupt(tmp_path):
    path = tmp_path / "wh.duckdb"
    Warehouse(path).execute("CREATE TABLE t AS SELECT 1 AS i")
    with _immutable(path):
        Warehouse(path).check_readable()  # reading still works
        with pytest.raises(WarehouseError) as err:
            Warehouse(path).replace_table("t", pl.DataFrame({"i": [2]}))
    msg = str(err.value)
    assert "read-only" in msg and "chattr -i" in msg
    _keeps_data(msg)


def test_a_full_warehouse_disk(small_disk):
    wh = Warehouse(small_disk / "wh.duckdb")
    wh.execute("CREATE TABLE t (s VARCHAR)")
    _fill(small_disk)
    with pytest.raises(WarehouseError) as err:
        wh.insert_new("t", pl.DataFrame({"s": [f"row {i} " * 50 for i in range(2000)]}), "s")
    assert str(err.value).startswith("no space left on device")
    _keeps_data(str(err.value))


def test_an_empty_warehouse_file_left_by_a_full_disk_does_not_block(tmp_path):
    path = tmp_path / "wh.duckdb"
    path.write_bytes(b"")  # what a disk full before DuckDB's first write leaves
    Warehouse(path).check_readable()
    wh = Warehouse(path)
    wh.execute("CREATE TABLE t AS SELECT 1 AS i")  # was: "not a readable DuckDB database … mv"
    assert wh.query("SELECT i FROM t")["i"].to_list() == [1]


# ---- the Dagster home ------------------------------------------------------------------------
def _built_home(tmp_path, monkeypatch):
    from dagster import asset, materialize

    from tests.conftest import write_config
    from wse_platform.runner import get_instance

    home = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    settings = load_settings(write_config(tmp_path))

    @asset
    def built():
        return 1

    assert materialize([built], instance=get_instance(settings)).success
    return settings, home


def test_an_emptied_index_db_is_reported_not_silently_recreated(tmp_path, monkeypatch):
    from wse_platform.runner import InstanceBroken, get_instance

    settings, home = _built_home(tmp_path, monkeypatch)
    (home / "history/runs/index.db").write_bytes(b"")
    with pytest.raises(InstanceBroken) as err:  # was: opened, every asset "missing", no message
        get_instance(settings)
    msg = str(err.value)
    assert "index.db is empty (0 bytes)" in msg and f"mv {home}/history/runs/index.db" in msg
    assert f"mv {home} " not in msg


def test_a_damaged_schedules_db_does_not_cost_the_run_history(tmp_path, monkeypatch):
    from wse_platform.runner import InstanceBroken, get_instance

    settings, home = _built_home(tmp_path, monkeypatch)
    db = home / "schedules/schedules.db"
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)
    with pytest.raises(InstanceBroken) as err:
        get_instance(settings)
    msg = str(err.value)
    assert "schedules.db is damaged" in msg and f"mv {db} {db}.broken" in msg
    assert f"mv {home} " not in msg  # was: move the whole home (its run history) aside


def test_an_immutable_dagster_home(tmp_path, monkeypatch):
    from wse_platform.runner import InstanceBroken, get_instance

    settings, home = _built_home(tmp_path, monkeypatch)
    files = [p for p in home.rglob("*")] + [home]
    with _immutable(*files):
        with pytest.raises(InstanceBroken) as err:
            get_instance(settings)
    msg = str(err.value)
    assert "read-only" in msg
    _keeps_data(msg)


def test_a_full_dagster_home(small_disk, tmp_path, monkeypatch):
    from tests.conftest import write_config
    from wse_platform.runner import InstanceBroken, get_instance

    monkeypatch.setenv("DAGSTER_HOME", str(small_disk / "home"))
    settings = load_settings(write_config(tmp_path))
    _fill(small_disk)
    with pytest.raises(InstanceBroken) as err:  # was: two chained tracebacks (disk I/O error)
        get_instance(settings)
    assert str(err.value).startswith("no space left on device")


# ---- wse doctor ----------------------------------------------------------------------------------
def test_doctor_checks_warehouse_file_cache_folder_and_home(tmp_path, monkeypatch):
    from tests.conftest import write_config
    from wse_platform.doctor import check_paths

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    settings = load_settings(write_config(tmp_path))
    Warehouse(settings.warehouse).execute("CREATE TABLE t AS SELECT 1 AS i")
    settings.cache.mkdir(parents=True, exist_ok=True)
    with _immutable(settings.warehouse, settings.cache):
        lines = "\n".join(c.line() for c in check_paths(settings))
    assert f"[FAIL] warehouse: the warehouse {settings.warehouse} cannot be written" in lines, lines
    assert "[FAIL] llm cache folder" in lines and "read-only" in lines
    monkeypatch.setattr("wse_platform.diskcheck.free_bytes", lambda path: 1024)
    lines = "\n".join(c.line() for c in check_paths(settings))
    assert lines.count("no space left on device") == 3, lines  # home, cache folder, warehouse
