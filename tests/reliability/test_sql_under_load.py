"""`wse sql` under load (issue 23, item 12).

Before: a runaway query ran without a time or memory limit, ignored Ctrl-C, held the warehouse
lock exclusively (so `wse sql "SELECT 1"` and `wse status` waited behind it), and `--limit 5` on
10 M rows fetched all of them (1 GB) to print five.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO
from wse_platform import cli

RUNAWAY = "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range + b.range = -1"
MEASURE = """
import resource, sys
from wse_platform.cli import main
rc = main(sys.argv[1:])
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rc, file=sys.stderr)
"""


@pytest.fixture
def warehouse(config_file: Path) -> Path:
    path = config_file.parent / "wh.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 42 AS answer")
    con.close()
    return path


def _wse(config_file, *args, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "wse_platform.cli", "--config", str(config_file), *args],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _wait_until_locked(lock_file: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until some process holds `<db>.lock` (shared or exclusive): an exclusive try fails."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            return
        finally:
            os.close(fd)
        time.sleep(0.1)
    raise AssertionError("the query never took the warehouse lock")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def test_statement_timeout_stops_a_runaway_query(warehouse, config_file, capsys):
    t0 = time.monotonic()
    assert cli.main(["--config", str(config_file), "sql", "--timeout", "1", RUNAWAY]) == 1
    assert time.monotonic() - t0 < 15
    err = capsys.readouterr().err
    assert "statement timeout (1 s)" in err and "--timeout" in err


def test_memory_limit_has_a_default_and_a_flag(warehouse, config_file, capsys):
    def setting(*flags):
        assert cli.main(["--config", str(config_file), "sql", *flags, "-f", "csv",
                         "SELECT current_setting('memory_limit') AS m"]) == 0
        return capsys.readouterr().out.splitlines()[1]

    def duckdb_says(size=None):
        con = duckdb.connect(config={"memory_limit": size} if size else {})
        try:
            return con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        finally:
            con.close()

    from wse_platform.sql_limits import DEFAULT_MEMORY_LIMIT
    assert setting() == duckdb_says(DEFAULT_MEMORY_LIMIT) != duckdb_says()  # not DuckDB's 80 % of the RAM
    assert setting("--memory-limit", "300MB") == duckdb_says("300MB")
    # a query needing more than the limit fails with DuckDB's message instead of taking the machine's memory
    assert cli.main(["--config", str(config_file), "sql", "--memory-limit", "40MB",
                     "SELECT list(range) FROM range(30000000)"]) == 1
    assert "memory" in capsys.readouterr().err.lower()
    with pytest.raises(SystemExit):  # a typo is an argument error, not "a corrupt warehouse"
        cli.main(["--config", str(config_file), "sql", "--memory-limit", "lots", "SELECT 1"])


def test_ctrl_c_interrupts_the_query(warehouse, config_file):
    proc = _wse(config_file, "sql", RUNAWAY)
    try:
        _wait_until_locked(f"{warehouse}.lock", proc)
        time.sleep(1.0)  # inside DuckDB's execution
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 130 and "interrupted" in err, err
    finally:
        _stop(proc)


def test_readers_do_not_wait_for_each_other_writers_still_do(warehouse, config_file):
    from wse_platform.warehouse import Warehouse, WarehouseError

    runaway = _wse(config_file, "sql", RUNAWAY)
    try:
        _wait_until_locked(f"{warehouse}.lock", runaway)
        reader = _wse(config_file, "sql", "-f", "csv", "SELECT answer FROM t")
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0 and out.splitlines() == ["answer", "42"], err
        with Warehouse(warehouse, lock_timeout=5).connect(read_only=True) as con:  # `wse status`'s reads
            assert con.execute("SELECT answer FROM t").fetchone() == (42,)      # (waiting: gives up after 5 s)
        with pytest.raises(WarehouseError, match="locked|held"):  # a writer waits for the readers
            with Warehouse(warehouse, lock_timeout=1).connect():
                pass
        assert runaway.poll() is None
    finally:
        _stop(runaway)


def test_limit_fetches_only_the_rows_shown(warehouse, config_file):
    def run(query):
        env = dict(os.environ, PYTHONPATH=str(REPO))
        p = subprocess.run([sys.executable, "-c", MEASURE, "--config", str(config_file), "sql", "--limit", "5",
                            "-f", "csv", query], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
        kb, rc = p.stderr.split("MAXRSS_KB")[1].split()[:2]
        assert rc == "0", p.stderr
        return p.stdout, int(kb) / 1024

    _, base_mb = run("SELECT 1 AS i")
    out, mb = run("SELECT range AS i, range * 2 AS j, 'row number ' || range AS s FROM range(10000000)")
    assert out.splitlines() == ["i,j,s"] + [f"{i},{2 * i},row number {i}" for i in range(5)]
    assert mb - base_mb < 150, (base_mb, mb)  # all 10 M rows fetched took ~1 GB


def test_table_says_more_rows_were_not_fetched(warehouse, config_file, capsys):
    assert cli.main(["--config", str(config_file), "sql", "--limit", "3", "--width", "80",
                     "SELECT range AS i FROM range(1000)"]) == 0
    out = capsys.readouterr().out
    assert "first 3 rows" in out and "not fetched" in out and "│ 3 │" not in out
