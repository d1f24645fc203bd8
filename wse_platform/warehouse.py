"""The DuckDB warehouse: DDL from `sql/`, idempotent per-partition writes, safe under parallel runs.

DuckDB allows one writing process per database file. Several Dagster runs (one
process each) write at once, so every connection is taken under an inter-process
file lock (``<db>.lock``; shared among read-only connections, see `readlock.py`) and held only for
the duration of one short transaction.
Writers queue on the lock instead of failing; if some *other* program holds the
DuckDB file (e.g. a user's duckdb shell), opening is retried with backoff. A wait is
never silent: after a few seconds the waiter prints (stderr) who holds the lock — the
PID and command the holder noted in ``<db>.lock.owner``, or the PID DuckDB reports —
and that it is waiting, then repeats that every 30 s until it gets the lock or gives up.
A file that is not a readable DuckDB database is reported with its path and the fix.
A partition is replaced by DELETE + INSERT inside one transaction, so a rerun gives
the same rows and a crash mid-write leaves the previous rows intact.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from filelock import FileLock, Timeout

from wse_platform import readlock
from wse_platform.config import REPO_ROOT
from wse_platform.diskcheck import diagnose
from wse_platform.errors import InfrastructureError

if TYPE_CHECKING:  # polars is imported where a frame is made: `wse status` opens the warehouse without it
    import polars as pl

SQL_DIR = REPO_ROOT / "sql"
_LOCK_ERRORS = ("Could not set lock", "lock on file", "Conflicting lock", "database is locked")
# DuckDB's wording for a file that is not (or no longer) a database it can read.
_CORRUPT_ERRORS = ("not a valid DuckDB database", "Corrupt", "corrupt", "checksum", "Serialization Error",
                   "INTERNAL Error", "database file", "truncated", "too small", "unexpected end")
NOTICE_AFTER_S = 3.0   # a wait shorter than this (normal queueing of parallel writers) is not reported
NOTICE_EVERY_S = 30.0  # then a reminder at this interval
log = logging.getLogger("wse_platform.warehouse")


def _say(msg: str) -> None:
    """Waiting and breakage notes go to the terminal (stderr), whichever command or run is waiting."""
    print(msg, file=sys.stderr, flush=True)
    log.info(msg)


class WarehouseError(InfrastructureError):
    """A warehouse problem; the message names the file (and, where there is one, the fix)."""


@contextlib.contextmanager
def read_only_or_empty(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The warehouse read-only under its lock, or an empty in-memory database when the file does not
    exist yet (readers such as `wse view` and `wse plan` never create a warehouse)."""
    path = Path(path)
    if not path.exists():
        con = duckdb.connect(":memory:")
        try:
            yield con
        finally:
            con.close()
        return
    with Warehouse(path).connect(read_only=True) as con:
        yield con


def sql_to_polars(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    """Run `sql` and return polars (empty frame for statements without a result).

    Goes through a relation's Arrow table: works on duckdb 1.x and 2.x (which renamed
    fetch_arrow_table → to_arrow_table and dropped polars output on connections)."""
    import polars as pl

    rel = con.sql(sql, params=params or None)
    if rel is None:
        return pl.DataFrame()
    table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
    return pl.from_arrow(table)


def _duckdb_holder(message: str) -> str:
    """`Conflicting lock is held in /usr/bin/duckdb (PID 123)` → `PID 123 (/usr/bin/duckdb)`."""
    m = re.search(r"held in (.+?) \(PID (\d+)\)", message)
    return f"PID {m.group(2)} ({m.group(1)})" if m else "DuckDB did not say which process"


# ---- cheap opens: the file attached to one in-memory DuckDB instance per thread ---------------------
# Creating a DuckDB instance costs ~35-45 ms of CPU on this machine whatever the file (an in-memory one
# too), and a cell run opens the warehouse ~13 times; attaching the file to an instance the thread keeps,
# and detaching it after, costs ~4 ms (`bench/warehouse_open.py`). The DETACH closes the file as a close
# does (a read-write attach is checkpointed, no WAL is left) and releases DuckDB's own file lock, so other
# processes open it as before; the inter-process lock (`connect`) is unchanged and held around both. The
# caller gets a new connection (a cursor) of that instance with `USE` on the file, closed after: its
# session (temporary tables, registered frames, an open transaction) ends with it. An earlier try handed
# out the instance's own connection, so `wse sql`'s lockdown leaked into later opens; here the instance's
# configuration is locked (`SET` fails on these connections: DuckDB settings are per instance), and a
# connection that needs settings passes `config` (`wse sql`) and gets an instance of its own, as before.
# An instance that refuses the ATTACH for another reason than a lock is replaced once. Catalog name =
# the file's stem, as a direct open names it (`<stem>.main.<table>`).
_RESERVED_ALIASES = {"memory", "system", "temp", "main"}
_bases = threading.local()       # per thread: (pid, instance), {id(cursor): (cursor, alias)}
_inherited: list = []            # instances inherited through fork: kept as they are, never used or closed


def _base() -> duckdb.DuckDBPyConnection:
    pid, con = getattr(_bases, "held", (None, None))
    if con is None or pid != os.getpid():  # none yet, or inherited through fork (DuckDB is not fork-safe)
        if con is not None:
            _inherited.append(con)
        con = duckdb.connect(":memory:")
        con.execute("SET lock_configuration = true")  # no open can change a setting the next one would inherit
        _bases.held = (os.getpid(), con)
        _bases.open = {}
    return con


def _drop_base() -> None:
    """Give this thread's instance up (closing it closes whatever file is still attached)."""
    pid, con = getattr(_bases, "held", (None, None))
    _bases.held, _bases.open = (None, None), {}
    if con is not None and pid == os.getpid():
        with contextlib.suppress(duckdb.Error):
            con.close()


def _open_aliases() -> set[str]:
    return {alias for _, alias in getattr(_bases, "open", {}).values()}


def _attach(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection of this thread's instance with `path` attached (read-only or not) and in `USE`."""
    quoted, name = str(path).replace("'", "''"), path.stem.replace('"', '""')
    sql = f"ATTACH '{quoted}' AS \"{name}\"" + (" (READ_ONLY)" if read_only else "")
    for fresh in (False, True):
        base = _base()
        try:
            base.execute(sql)
            break
        except duckdb.Error as err:
            if fresh or any(s in str(err) for s in _LOCK_ERRORS):
                raise
            _drop_base()  # e.g. a global setting left on this instance refuses ATTACH: a new instance decides
    cur = base.cursor()
    try:
        cur.execute(f'USE "{name}"')
    except BaseException:
        cur.close()
        base.execute(f'DETACH "{name}"')
        raise
    _bases.open[id(cur)] = (cur, path.stem)
    return cur


def _close(con: duckdb.DuckDBPyConnection) -> None:
    """Close what `Warehouse._open` returned: a connection of its own, or an attached one (closed, then
    the file detached; if the DETACH fails, the thread's instance is given up, which closes the file)."""
    entry = getattr(_bases, "open", {}).pop(id(con), None)
    if entry is None:
        con.close()
        return
    with contextlib.suppress(duckdb.Error):
        con.close()  # ends its session; an open transaction is rolled back
    try:
        _base().execute(f'DETACH "{entry[1].replace(chr(34), chr(34) * 2)}"')
    except duckdb.Error:
        _drop_base()


# The digest of the DDL last run on a warehouse file, kept in it (outside `main`: not one of the tables).
_STAMP_TABLE = "wse_meta.schema_stamp"
_STAMP_DDL = (f"CREATE SCHEMA IF NOT EXISTS wse_meta; "
              f"CREATE OR REPLACE TABLE {_STAMP_TABLE} (ddl_digest VARCHAR, objects VARCHAR)")
_MAIN_OBJECTS = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_catalog = current_database()"


def _ddl_digest(ddl: list[tuple[Path, str]]) -> str:
    h = hashlib.sha256()
    for f, text in ddl:
        h.update(f.name.encode() + b"\0" + text.encode("utf-8") + b"\0")
    return h.hexdigest()


def _stamp(con: duckdb.DuckDBPyConnection) -> str | None:
    """The DDL digest stamped in the open warehouse, None if there is none or if a table or view that
    was there when it was stamped is gone (dropped by hand in a SQL shell: the DDL then makes it again)."""
    try:
        rows = con.execute(f"SELECT ddl_digest, objects FROM {_STAMP_TABLE}").fetchall()
    except duckdb.Error:   # no stamp (CatalogException), or an earlier shape of it (BinderException)
        return None
    if len(rows) != 1:
        return None
    digest, objects = rows[0]
    have = {r[0] for r in con.execute(_MAIN_OBJECTS).fetchall()}
    return digest if set(json.loads(objects or "[]")) <= have else None


def _write_stamp(con: duckdb.DuckDBPyConnection, digest: str) -> None:
    objects = sorted(r[0] for r in con.execute(_MAIN_OBJECTS).fetchall())
    con.execute(_STAMP_DDL)
    con.execute(f"INSERT INTO {_STAMP_TABLE} VALUES (?, ?)", [digest, json.dumps(objects)])


def _run_ddl(con: duckdb.DuckDBPyConnection, ddl: list[tuple[Path, str]], digest: str, disk_problem) -> None:
    """The DDL files' statements and the stamp in one transaction: one commit (a few `fdatasync`s) instead of
    one per statement (~150 on a fresh file: up to ~0.5 s of wall time on a busy disk, before the first
    request of a first command, issue 24). A failing file leaves the warehouse as it was (nothing half
    applied; every statement is idempotent, so the next start runs them all again)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for f, text in ddl:
            try:
                con.execute(text)
            except duckdb.Error as err:
                raise WarehouseError(disk_problem(err) or f"DDL file {f.name} failed: {err}") from err
        try:
            _write_stamp(con, digest)
        except duckdb.Error as err:
            raise WarehouseError(disk_problem(err) or f"stamping the schema failed: {err}") from err
        try:
            con.execute("COMMIT")
        except duckdb.Error as err:
            raise WarehouseError(disk_problem(err) or f"committing the schema failed: {err}") from err
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


class Warehouse:
    def __init__(self, path: str | Path, sql_dir: Path = SQL_DIR, lock_timeout: float = 600.0):
        self.path = Path(path)
        self.sql_dir = Path(sql_dir)
        self.lock_timeout = lock_timeout
        self._schema_ready = False
        self._schema_file: tuple[int, int] | None = None  # (device, inode) the DDL last ran on
        self._held = threading.local()  # the connection `held()` keeps open, per thread

    # ---- connections ---------------------------------------------------------------
    @property
    def owner_file(self) -> Path:
        return Path(str(self.path) + ".lock.owner")

    @contextlib.contextmanager
    def connect(self, read_only: bool = False,
                config: dict[str, Any] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection held under the inter-process lock; closed on exit (`config`: DuckDB settings).
        Inside `held()` (same thread) it is the held connection, left open."""
        kept = getattr(self._held, "con", None)
        if kept is not None:
            if config:  # a second lock from this thread would wait for the first one forever
                raise WarehouseError("a connection with its own DuckDB settings cannot be opened inside held()")
            yield kept
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        shared = read_only and self.path.exists() and readlock.AVAILABLE  # readers share the lock (readlock.py)
        lock = readlock.SharedFileLock(str(self.path) + ".lock") if shared else FileLock(str(self.path) + ".lock")
        self._acquire(lock)
        try:
            if not shared:  # the owner note names the one writer; readers are many
                self._note_owner()
            con = self._open(read_only and self.path.exists(), config)
            try:
                yield con
            finally:
                _close(con)
        finally:
            if not shared:
                with contextlib.suppress(OSError):
                    self.owner_file.unlink()
            lock.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """One connection (and the inter-process lock) for a burst of short operations of this thread.

        Every open costs the inter-process lock, its owner note and an ATTACH/DETACH of the file (~10 ms
        of CPU with the lock, `bench/warehouse_open.py`), so a table write with its metadata queries, or a
        check op running many queries, holds one connection instead of opening one per query. Not for long work such as LLM calls: other
        processes wait for the lock meanwhile."""
        if getattr(self._held, "con", None) is not None:
            yield
            return
        with self.connect() as con:
            self._held.con = con
            try:
                yield
            finally:
                self._held.con = None

    def _note_owner(self) -> None:
        """Who holds the lock, for processes that have to wait (best effort)."""
        note = {"pid": os.getpid(), "command": " ".join(sys.argv)[:200], "since": time.strftime("%H:%M:%S")}
        with contextlib.suppress(OSError):
            self.owner_file.write_text(json.dumps(note))

    def lock_holder(self) -> str:
        """The process holding the inter-process lock, as its owner note describes it."""
        try:
            note = json.loads(self.owner_file.read_text())
            holder = f"PID {note['pid']} ({note['command']}, since {note['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process (it left no owner note)"
        try:
            os.kill(int(note["pid"]), 0)
        except ProcessLookupError:
            return f"another process (the last note names {holder}, which is no longer running)"
        except (PermissionError, ValueError, OSError):
            pass
        return holder

    def _acquire(self, lock: FileLock) -> None:
        try:
            self._acquire_waiting(lock)
        except OSError as err:  # the lock file cannot be created: a full or read-only disk or folder
            raise WarehouseError(self._disk_problem(err) or f"cannot create the lock file {self.path}.lock: "
                                 f"{err}\n  fix: make {self.path.parent} writable") from err

    def _acquire_waiting(self, lock: FileLock) -> None:
        start = time.monotonic()
        try:
            lock.acquire(timeout=min(NOTICE_AFTER_S, self.lock_timeout))
            return
        except Timeout:
            pass
        while True:
            waited = time.monotonic() - start
            if waited >= self.lock_timeout:
                raise WarehouseError(f"gave up after {waited:.0f} s: warehouse {self.path} is still locked by "
                                     f"{self.lock_holder()}; stop that process or wait until it finishes")
            _say(f"warehouse {self.path} is locked by {self.lock_holder()}; waiting for it "
                 f"({waited:.0f} s so far, giving up after {self.lock_timeout:.0f} s)")
            try:
                lock.acquire(timeout=min(NOTICE_EVERY_S, self.lock_timeout - waited))
                _say(f"warehouse {self.path}: lock acquired after {time.monotonic() - start:.0f} s")
                return
            except Timeout:
                continue

    def _open(self, read_only: bool, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
        if self._drop_empty_file():
            read_only = False  # the file is created anew
        delay = 0.05
        start = time.monotonic()
        next_notice = start + NOTICE_AFTER_S
        while True:
            try:
                if config or self.path.stem.lower() in _RESERVED_ALIASES or self.path.stem in _open_aliases():
                    return duckdb.connect(str(self.path), read_only=read_only, config=config or {})
                return _attach(self.path, read_only)
            except duckdb.Error as err:  # another (non-cooperating) process holds the file?
                if not any(s in str(err) for s in _LOCK_ERRORS):
                    raise WarehouseError(self._open_failure(err)) from err
                holder = _duckdb_holder(str(err))
                now = time.monotonic()
                if now - start > self.lock_timeout:
                    raise WarehouseError(f"gave up after {now - start:.0f} s: warehouse {self.path} is held by "
                                         f"another program ({holder}); close it (e.g. a duckdb shell) and "
                                         "retry") from err
                if now >= next_notice:
                    _say(f"warehouse {self.path} is held by another program ({holder}); waiting for it "
                         f"({now - start:.0f} s so far, giving up after {self.lock_timeout:.0f} s)")
                    next_notice = now + NOTICE_EVERY_S
                time.sleep(delay + random.random() * delay)
                delay = min(delay * 2, 2.0)

    def _disk_problem(self, err: BaseException | None) -> str | None:
        """A full or read-only disk, folder or file named as such (never as a corrupt file)."""
        return diagnose(self.path, err, "the warehouse", "warehouse_path (or WSE_WAREHOUSE)")

    def _drop_empty_file(self) -> bool:
        """A 0-byte warehouse file holds no table (DuckDB writes its header first): it is what a
        write that failed at once (a full disk) leaves behind, and would block every later command.
        Removed, so it is created anew; the caller holds the lock."""
        with contextlib.suppress(OSError):
            if self.path.stat().st_size == 0 and not Path(str(self.path) + ".wal").exists():
                self.path.unlink()
                _say(f"warehouse {self.path} was an empty (0-byte) file, left by a write that failed (e.g. a "
                     "full disk); removed it, it is created anew")
                return True
        return False

    def _open_failure(self, err: duckdb.Error) -> str:
        """The message for a warehouse file DuckDB cannot open: the file, what it means, the fix."""
        text = str(err)
        disk = self._disk_problem(err)
        if disk:
            return disk
        if "Permission denied" in text:
            return f"cannot open warehouse {self.path}: {text}\n  fix: make the file and its folder writable"
        if any(s in text for s in _CORRUPT_ERRORS) or self.path.exists():
            return (f"the warehouse file {self.path} is not a readable DuckDB database ({text.strip()}).\n"
                    "  It is truncated or corrupt (or written by an incompatible DuckDB version); the tables "
                    "in it cannot be read.\n"
                    f"  fix: move it aside (mv {self.path} {self.path}.broken) and rebuild everything with "
                    "`wse materialize` (without --stale: the run history still lists the lost tables as "
                    "built; cached LLM answers are reused, so no new model calls are made for them)")
        return f"cannot open warehouse {self.path}: {text}"

    def check_readable(self) -> None:
        """Raise WarehouseError (file, cause, fix) if the warehouse file exists but cannot be read."""
        if not self.path.exists() or self.is_empty_file():
            return
        try:
            with self.connect(read_only=True) as con:
                con.execute("SELECT count(*) FROM information_schema.tables").fetchall()
        except duckdb.Error as err:  # opened, but the catalog cannot be read
            raise WarehouseError(self._open_failure(err)) from err

    def is_empty_file(self) -> bool:
        """A 0-byte file: no table in it (see `_drop_empty_file`), treated like an absent file."""
        try:
            return self.path.stat().st_size == 0
        except OSError:
            return False

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
        """Run every DDL file in `sql/` (all statements are idempotent: IF NOT EXISTS / OR REPLACE).

        Once per file and process: again if the file was deleted or replaced since (a long-lived process
        such as the UI's code server would otherwise write into a new file that has no tables). And only
        when the file does not carry the stamp of this DDL: running the ~60 statements costs ~50 ms of CPU
        (and a checkpoint) in every process, each cell run and table run, though the tables are there. The
        stamp (`wse_meta.schema_stamp`: a digest of the DDL files' names and texts) is written after the
        last statement succeeded, in the same connection; a file created or migrated by another process
        with other DDL (older or newer code) has another digest, so this DDL runs on it (it only adds what
        is missing) and stamps it with its own digest. The stamp also lists the tables and views the DDL
        left: one of them dropped since (by hand) voids it, so the DDL makes it again as before."""
        if self._schema_ready and self._file_id() == self._schema_file:
            return
        ddl = [(f, f.read_text(encoding="utf-8")) for f in self.ddl_files()]
        digest = _ddl_digest(ddl)
        if self.path.exists() and not self.is_empty_file():
            with self.connect(read_only=True) as con:  # shared lock; no write, so no checkpoint on close
                stamped = _stamp(con) == digest
            if stamped:
                self._schema_ready, self._schema_file = True, self._file_id()
                return
        with self.connect() as con:
            if _stamp(con) != digest:  # another process may have run it while this one waited for the lock
                _run_ddl(con, ddl, digest, self._disk_problem)
        self._schema_ready, self._schema_file = True, self._file_id()

    def _file_id(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

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
            raise WarehouseError(self._disk_problem(err)
                                 or f"writing {table} partition {dict(key)} failed: {err}") from err
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
            raise WarehouseError(self._disk_problem(err) or f"appending to {table} failed: {err}") from err
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
