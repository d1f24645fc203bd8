"""A failed command ends with one line that says the cause (issue 23, item 6).

Before: 100–2,000 lines of Dagster log and tracebacks, and a closing FAILED line that stopped at
"Error occurred while executing op".
"""
import duckdb

from wse_platform import cli
from wse_platform.warehouse import Warehouse


def test_a_failure_ends_with_one_line_naming_the_cause(config_file, monkeypatch, capfd):
    def full_disk(self):
        raise duckdb.IOException('Could not write file "wh.duckdb.wal": No space left on device')

    monkeypatch.setattr(Warehouse, "transaction", full_disk)
    assert cli.main(["materialize", "--select", "ncp_specs"]) == 1
    out, err = capfd.readouterr()
    assert "Error occurred while executing op" not in out
    failed = next(line for line in out.splitlines() if "FAILED" in line)
    assert "ncp_specs: no space left on device: the warehouse" in failed
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ncp_specs: no space left on device: the warehouse") and "fix:" in last
    assert "Traceback" not in err and "Stack Trace" not in err
    assert len(err.strip().splitlines()) <= 6, err  # was: ~100 lines for this one failed run


def test_a_dagster_home_that_fills_mid_command_is_one_line(config_file, monkeypatch, capfd):
    import sqlite3

    from wse_platform import runner

    def instance_disk_full(*args, **kwargs):  # Dagster writing the run's events into $DAGSTER_HOME
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(runner, "run_in_location", instance_disk_full)
    assert cli.main(["materialize", "--select", "ncp_specs"]) == 2  # was: two chained tracebacks
    err = capfd.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: no space left on device: the Dagster home") and "fix:" in last
