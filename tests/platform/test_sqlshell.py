"""`wse sql`: read-only in fact (issue 14.1, the attack reproduced) and readable on wide tables (issue 13)."""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb
import pytest

from wse_platform import cli

WIDE_COLS = [f"metric_with_a_long_name_{i:02d}" for i in range(25)]


@pytest.fixture
def warehouse(config_file: Path) -> Path:
    """A warehouse with the tables the issue's attack targets and a 25-column table."""
    path = config_file.parent / "wh.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE wse_initial_worlds (world_id TEXT, payload TEXT)")
    con.execute("INSERT INTO wse_initial_worlds VALUES ('w1', '{}'), ('w2', '{}')")
    con.execute("CREATE TABLE wse_episode_seeds (seed_id TEXT)")
    con.execute("INSERT INTO wse_episode_seeds VALUES ('s1'), ('s2'), ('s3')")
    cols = ", ".join(f"{c} DOUBLE" for c in WIDE_COLS)
    con.execute(f"CREATE TABLE wide (model TEXT, {cols})")
    for r in range(3):
        vals = ", ".join(str(r + i / 100) for i in range(25))
        con.execute(f"INSERT INTO wide VALUES ('model-{r}', {vals})")
    con.close()
    return path


def _counts(path: Path) -> tuple[int, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (con.execute("SELECT count(*) FROM wse_initial_worlds").fetchone()[0],
                con.execute("SELECT count(*) FROM wse_episode_seeds").fetchone()[0])
    finally:
        con.close()


def test_issue_attack_is_refused_and_nothing_changes(warehouse, tmp_path, capsys):
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    attack = (f"ATTACH '{other}' AS m (READ_WRITE); USE m; DETACH wh; "
              f"ATTACH '{warehouse}' AS v (READ_WRITE); DROP TABLE v.wse_initial_worlds; "
              "DELETE FROM v.wse_episode_seeds")
    assert cli.main(["sql", attack]) != 0
    assert "read-only" in capsys.readouterr().err
    assert _counts(warehouse) == (2, 3)


@pytest.mark.parametrize("statement", [
    "ATTACH '{other}' AS m (READ_WRITE)",
    "DETACH wh",
    "USE wh",
    "DROP TABLE wse_initial_worlds",
    "DELETE FROM wse_episode_seeds",
    "CREATE TABLE x AS SELECT 1",
    "COPY (SELECT 42) TO '{out}'",
    "EXPORT DATABASE '{outdir}'",
    "SET enable_external_access = true",
    "PRAGMA enable_profiling",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CALL pragma_version()",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_text('{other}')",
    "SELECT 1; SELECT 2",
    "SELECT count(*) FROM wse_episode_seeds; DELETE FROM wse_episode_seeds",
])
def test_only_one_read_only_statement(warehouse, tmp_path, capsys, statement):
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    out, outdir = tmp_path / "leak.csv", tmp_path / "export"
    sql = statement.format(other=other, out=out, outdir=outdir)
    rc = cli.main(["sql", sql])
    err = capsys.readouterr().err
    assert rc != 0, f"accepted: {sql}"
    assert "read-only" in err, err
    assert not out.exists() and not outdir.exists()
    assert _counts(warehouse) == (2, 3)


@pytest.mark.parametrize("statement", [
    "SELECT count(*) AS n FROM wse_episode_seeds",
    "WITH s AS (SELECT * FROM wse_episode_seeds) SELECT * FROM s",
    "FROM wse_episode_seeds",
    "SHOW TABLES",
    "DESCRIBE wide",
    "SUMMARIZE wse_episode_seeds",
    "EXPLAIN SELECT * FROM wse_episode_seeds",
    "SELECT * FROM duckdb_tables()",
    "SELECT 1;",
])
def test_read_only_statements_run(warehouse, capsys, statement):
    assert cli.main(["sql", statement]) == 0, capsys.readouterr().err


def test_wide_table_fits_the_width_and_names_hidden_columns(warehouse, capsys):
    assert cli.main(["sql", "SELECT * FROM wide", "--width", "100"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    box = [ln for ln in lines if ln[:1] in "┌│├└"]
    assert box and all(len(ln) <= 100 for ln in box), max(len(ln) for ln in box)
    header = next(ln for ln in box if ln.startswith("│"))
    assert "model" in header and "…" in header
    shown = int(re.search(r"26 columns \((\d+) shown\)", out).group(1))  # DuckDB's own footer
    assert 3 <= shown < 26
    # the hidden ones are named, so nothing is silently dropped
    at = next(i for i, ln in enumerate(lines) if "columns hidden" in ln)
    assert lines[at].startswith(f"{26 - shown} of 26 columns hidden")
    listed = [ln for ln in lines[at + 1:] if ln.startswith("  ")]
    assert all(len(ln) <= 100 for ln in listed)
    hidden = [h.strip() for h in " ".join(listed).split(",")]
    assert len(hidden) == 26 - shown and set(hidden) <= set(WIDE_COLS)
    assert "model-2" in out  # values are printed in full, not squeezed to a few characters


def test_narrow_result_hides_nothing(warehouse, capsys):
    assert cli.main(["sql", "SELECT model, metric_with_a_long_name_03 FROM wide", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "hidden" not in out and "metric_with_a_long_name_03" in out


def test_formats(warehouse, tmp_path, capsys):
    assert cli.main(["sql", "SELECT model, metric_with_a_long_name_00 AS m0 FROM wide ORDER BY model",
                     "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["model", "m0"] and rows[1] == ["model-0", "0.0"] and len(rows) == 4

    assert cli.main(["sql", "SELECT model, metric_with_a_long_name_01 AS m1 FROM wide ORDER BY model",
                     "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[2] == {"model": "model-2", "m1": 2.01}

    assert cli.main(["sql", "SELECT model FROM wide ORDER BY model", "--format", "markdown"]) == 0
    md = capsys.readouterr().out.splitlines()
    assert md[:3] == ["| model |", "|---|", "| model-0 |"]

    assert cli.main(["sql", "SELECT * FROM wide WHERE model = 'model-1'", "--format", "vertical"]) == 0
    vertical = capsys.readouterr().out
    for c in WIDE_COLS:  # every column of a wide row, one per line
        assert any(ln.startswith(c) and "|" in ln for ln in vertical.splitlines()), c
    assert "(1 row)" in vertical


def test_output_file_gets_all_rows_and_columns(warehouse, tmp_path, capsys):
    target = tmp_path / "out.csv"
    assert cli.main(["sql", "SELECT * FROM wide", "--format", "csv", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "3 rows" in captured.err and str(target) in captured.err
    rows = list(csv.reader(target.open()))
    assert len(rows) == 4 and len(rows[0]) == 26

    table = tmp_path / "out.txt"
    assert cli.main(["sql", "SELECT * FROM wide", "-o", str(table)]) == 0
    text = table.read_text()
    assert all(c in text for c in WIDE_COLS) and "hidden" not in text


def test_file_paths_are_not_read(warehouse, capsys):
    """A file path as a table name is not scanned (external access is off): a plain SQL error."""
    assert cli.main(["sql", "SELECT * FROM '/etc/passwd'"]) == 1
    captured = capsys.readouterr()
    assert "root:" not in captured.out + captured.err


def test_sql_error_is_reported_not_raised(warehouse, capsys):
    assert cli.main(["sql", "SELECT * FROM no_such_table"]) == 1
    assert "no_such_table" in capsys.readouterr().err
