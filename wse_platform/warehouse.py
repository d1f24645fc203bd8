"""The DuckDB warehouse: DDL from `sql/`, idempotent per-partition writes, safe under parallel runs.

DuckDB allows one writing process per database file. Several Dagster runs (one
process each) write at once, so every connection is taken under an inter-process
file lock (``<db>.lock``) and held only for the duration of one short transaction.
Writers queue on the lock instead of failing; if some *other* program holds the
DuckDB file (e.g. a user's duckdb shell), opening is retried with backoff.
A partition is replaced by DELETE + INSERT inside one transaction, so a rerun gives
the same rows and a crash mid-write leaves the previous rows intact.
"""
from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from filelock import FileLock

from wse_platform.config import REPO_ROOT

SQL_DIR = REPO_ROOT / "sql"
_LOCK_ERRORS = ("Could not set lock", "lock on file", "Conflicting lock", "database is locked")


class WarehouseError(RuntimeError):
    pass


def sql_to_polars(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    """Run `sql` and return polars (empty frame for statements without a result).

    Goes through a relation's Arrow table: works on duckdb 1.x and 2.x (which renamed
    fetch_arrow_table → to_arrow_table and dropped polars output on connections)."""
    rel = con.sql(sql, params=params or None)
    if rel is None:
        return pl.DataFrame()
    table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
    return pl.from_arrow(table)


class Warehouse:
    def __init__(self, path: str | Path, sql_dir: Path = SQL_DIR, lock_timeout: float = 600.0):
        self.path = Path(path)
        self.sql_dir = Path(sql_dir)
        self.lock_timeout = lock_timeout
        self._schema_ready = False

    # ---- connections ---------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection held under the inter-process lock; closed on exit."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock", timeout=self.lock_timeout):
            con = self._open(read_only and self.path.exists())
            try:
                yield con
            finally:
                con.close()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        delay = 0.05
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.Error as err:  # another (non-cooperating) process holds the file
                if not any(s in str(err) for s in _LOCK_ERRORS) or time.monotonic() > deadline:
                    raise WarehouseError(f"cannot open warehouse {self.path}: {err}") from err
                time.sleep(delay + random.random() * delay)
                delay = min(delay * 2, 2.0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A locked connection inside BEGIN … COMMIT; any exception rolls back and propagates."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    # ---- schema --------------------------------------------------------------------
    def ddl_files(self) -> list[Path]:
        return sorted(self.sql_dir.glob("*.sql"))

    def ensure_schema(self) -> None:
        """Run every DDL file in `sql/` (all statements are idempotent: IF NOT EXISTS / OR REPLACE)."""
        if self._schema_ready:
            return
        with self.connect() as con:
            for f in self.ddl_files():
                try:
                    con.execute(f.read_text(encoding="utf-8"))
                except duckdb.Error as err:
                    raise WarehouseError(f"DDL file {f.name} failed: {err}") from err
        self._schema_ready = True

    # ---- writes --------------------------------------------------------------------
    def replace_partition(self, table: str, df: pl.DataFrame, key: Mapping[str, Any]) -> int:
        """Replace the rows of `table` matching `key` (column -> value) with `df`, atomically.

        Columns are matched by name; `df` must carry the key columns with the key values.
        An empty key replaces the whole table.
        """
        self.ensure_schema()
        for col, val in key.items():
            if col not in df.columns:
                raise WarehouseError(f"{table}: partition column {col!r} missing from the rows to write")
            if df.height and (df[col] != val).any():
                raise WarehouseError(f"{table}: rows outside partition {col}={val!r}")
        where = " AND ".join(f'"{c}" = ?' for c in key) or "TRUE"
        try:
            with self.transaction() as con:
                con.execute(f'DELETE FROM "{table}" WHERE {where}', list(key.values()))
                if df.height:
                    con.register("_wse_rows", df.to_arrow())
                    con.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM _wse_rows')
                    con.unregister("_wse_rows")
        except Exception as err:
            raise WarehouseError(f"writing {table} partition {dict(key)} failed: {err}") from err
        return df.height

    def replace_table(self, table: str, df: pl.DataFrame) -> int:
        return self.replace_partition(table, df, {})

    def insert_new(self, table: str, df: pl.DataFrame, id_column: str) -> int:
        """Insert only rows whose `id_column` is not yet present (append-only logs like llm_calls)."""
        self.ensure_schema()
        if not df.height:
            return 0
        try:
            with self.transaction() as con:
                con.register("_wse_rows", df.to_arrow())
                before = con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]
                con.execute(
                    f'INSERT INTO "{table}" BY NAME SELECT * FROM _wse_rows r '
                    f'WHERE NOT EXISTS (SELECT 1 FROM "{table}" t WHERE t."{id_column}" = r."{id_column}")'
                )
                after = con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]
                con.unregister("_wse_rows")
        except Exception as err:
            raise WarehouseError(f"appending to {table} failed: {err}") from err
        return after - before

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        self.ensure_schema()
        with self.connect() as con:
            con.execute(sql, params or [])

    # ---- reads ---------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """Run a query and return a polars DataFrame (read-only connection when the file exists)."""
        self.ensure_schema()
        with self.connect(read_only=True) as con:
            return sql_to_polars(con, sql, params)

    def table(self, name: str, where: Mapping[str, Any] | None = None) -> pl.DataFrame:
        where = where or {}
        clause = " AND ".join(f'"{c}" = ?' for c in where) or "TRUE"
        return self.query(f'SELECT * FROM "{name}" WHERE {clause}', list(where.values()))

    def tables(self) -> list[str]:
        df = self.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1")
        return df["table_name"].to_list() if df.height else []
