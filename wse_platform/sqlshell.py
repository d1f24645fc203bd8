"""`wse sql`: one read-only query against the warehouse, rendered for a terminal or a file.

Read-only is enforced twice, by DuckDB itself rather than by inspecting SQL text:
- the statement: exactly one, of a type that only reads (DuckDB's own parser classifies it);
- the connection: opened read-only, then `enable_external_access = false` (no ATTACH, no
  COPY … TO, no reading other files: read_csv, 'file.parquet', extensions) and
  `lock_configuration = true` (no SET/PRAGMA can lift that afterwards).

Rendering: `table` is DuckDB's own box renderer (the DuckDB CLI's), truncated to the terminal
width with the hidden columns named below it; `vertical` shows one field per line (for wide
rows); `csv`, `json`, `markdown` are for files and other tools (`-o FILE`).

Under load (issue 23, item 12): the statement runs with a time limit (`--timeout`, default
`DEFAULT_TIMEOUT_S` in `sql_limits.py`) and a memory limit (`--memory-limit`, DuckDB's `memory_limit`, default
`DEFAULT_MEMORY_LIMIT`); Ctrl-C interrupts it (the query runs in a worker thread and the main thread
calls DuckDB's `interrupt()`, for the timeout as for Ctrl-C); the connection is a reader's, which
shares the warehouse with other readers (see `Warehouse.connect`); and when only some rows are shown
(`--limit`, or the terminal's default) only those rows (plus one, to know that more exist) are
computed and fetched, never the whole result.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import decimal
import io
import json
import os
import shutil
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from wse_platform.sql_limits import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT_S

FORMATS = ("table", "csv", "json", "markdown", "vertical")
DEFAULT_TABLE_ROWS = 40  # rows the table/vertical renderers print unless --limit says otherwise
READ_ONLY_NOTE = ("wse sql is read-only: it runs exactly one SELECT-like statement (SELECT, WITH, FROM, "
                  "VALUES, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN) on a read-only connection that cannot "
                  "attach or detach databases, change settings, or read or write files outside the warehouse")

# DuckDB statement types that only read. SHOW/DESCRIBE/SUMMARIZE parse as SELECT.
_READ_TYPES = {"SELECT", "EXPLAIN"}
# Settings applied to the connection before the user's statement (lock_configuration last).
_LOCKDOWN = ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
             "SET autoload_known_extensions = false", "SET lock_configuration = true")


class ReadOnlyViolation(ValueError):
    """The statement is not one read-only statement; the message says what `wse sql` accepts."""


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    more: bool = False  # rows beyond `rows` exist (not fetched: only what is shown is computed)


class QueryStopped(RuntimeError):
    """The statement was interrupted: by the statement timeout or by Ctrl-C (`by_user`)."""

    def __init__(self, message: str, by_user: bool):
        super().__init__(message)
        self.by_user = by_user


def lock_down(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Forbid external access and further configuration changes on an open connection: one with a DuckDB
    instance of its own (`Warehouse.connect(config=...)`); a plain open's shared instance refuses `SET`."""
    for stmt in _LOCKDOWN:
        con.execute(stmt)
    return con


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """The single read-only statement in `sql` (DuckDB's parser decides), else ReadOnlyViolation."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as err:
        raise ReadOnlyViolation(f"{err}") from None
    if len(statements) != 1:
        raise ReadOnlyViolation(f"{len(statements)} statements given; {READ_ONLY_NOTE}")
    kind = statements[0].type.name
    if kind not in _READ_TYPES:
        raise ReadOnlyViolation(f"{kind} statements are not allowed; {READ_ONLY_NOTE}")
    return statements[0]


def run_query(con: duckdb.DuckDBPyConnection, sql: str,
              limit: int | None = None) -> tuple[duckdb.DuckDBPyRelation, Result]:
    """Validate, lock the connection down, run. Returns DuckDB's relation (limited to `limit` rows
    when given) and the fetched rows: all of them, or the first `limit` (`Result.more` says whether
    there are others; they are neither computed beyond the engine's next chunk nor fetched)."""
    check_statement(con, sql)
    lock_down(con)
    try:
        rel = con.sql(sql)
    except duckdb.PermissionException as err:
        raise ReadOnlyViolation(f"{err}; {READ_ONLY_NOTE}") from None
    if rel is None:  # not a query after all (cannot happen for SELECT/EXPLAIN, but never print None)
        return rel, Result([], [], [])
    columns, types = list(rel.columns), [str(t) for t in rel.types]
    if limit is None:
        return rel, Result(columns, types, rel.fetchall())
    rows = rel.limit(limit + 1).fetchall()
    return rel.limit(limit), Result(columns, types, rows[:limit], more=len(rows) > limit)


def run_interruptible(con: duckdb.DuckDBPyConnection, work, timeout_s: float | None):
    """`work()` (which runs statements on `con`) in a worker thread; after `timeout_s` seconds, or on
    Ctrl-C, `con.interrupt()` stops the statement and QueryStopped is raised. A second Ctrl-C while
    DuckDB winds down exits at once (130). Ctrl-C is taken by a handler of our own while the
    statement runs, not as a KeyboardInterrupt: one raised inside `Thread.join` can leave the thread
    looking finished while DuckDB still runs in it (then closing the connection aborts the process)."""
    import signal

    box: dict[str, Any] = {}
    done = threading.Event()
    ctrl_c: list[int] = []

    def run():
        try:
            box["value"] = work()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            box["error"] = err
        finally:
            done.set()

    def on_sigint(_sig, _frame):
        ctrl_c.append(1)
        if len(ctrl_c) > 1:
            print("\nwse sql: interrupted", file=sys.stderr, flush=True)
            os._exit(130)
        con.interrupt()

    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
    try:
        threading.Thread(target=run, name="wse-sql-query", daemon=True).start()
        start, timed_out = time.monotonic(), False
        while not done.wait(0.05):
            if timeout_s and not timed_out and time.monotonic() - start > timeout_s:
                timed_out = True
                con.interrupt()
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, old)
    if ctrl_c:
        raise QueryStopped("interrupted (Ctrl-C)", by_user=True)
    if timed_out and isinstance(box.get("error"), duckdb.InterruptException):
        raise QueryStopped(f"the query ran longer than the statement timeout ({timeout_s:g} s) and was stopped; "
                           "--timeout SECONDS allows more (0 = no limit)", by_user=False)
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---- rendering -------------------------------------------------------------------------------

def _plain(v: Any) -> Any:
    """A JSON/CSV-friendly value: dates and decimals as text/numbers, bytes as hex."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (dt.date, dt.datetime, dt.time, dt.timedelta)):
        return v.isoformat() if hasattr(v, "isoformat") else str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


def _text(v: Any) -> str:
    if v is None:
        return "NULL"
    p = _plain(v)
    return p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)


def render_table(rel: duckdb.DuckDBPyRelation, res: Result, width: int | None, max_rows: int) -> str:
    """DuckDB's own box rendering (as its CLI prints it), at most `width` characters wide
    (None: all columns), plus a line naming the columns it had to hide."""
    buf = io.StringIO()
    kwargs: dict[str, Any] = {"max_rows": max_rows, "max_col_width": 40 if width else 10_000}
    kwargs["max_width"] = width if width else 1_000_000
    with contextlib.redirect_stdout(buf):
        rel.show(**kwargs)
    text = buf.getvalue().rstrip("\n")
    hidden = hidden_columns(text, res.columns)
    if hidden:
        names = textwrap.fill(", ".join(hidden), width=max(width or 80, 40), initial_indent="  ",
                              subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        text += (f"\n{len(hidden)} of {len(res.columns)} columns hidden to fit {width} characters:\n{names}\n"
                 "(select fewer columns, or use --format vertical, or -o FILE)")
    if res.more:
        text += f"\n(first {len(res.rows)} rows; {MORE_NOTE})"
    return text + "\n"


def hidden_columns(rendered: str, columns: list[str]) -> list[str]:
    """The columns DuckDB's box left out. It keeps the first and last ones and replaces the middle
    by one "…" column (header names themselves may be shortened with "…", so count, don't match)."""
    header = next((ln for ln in rendered.splitlines() if ln.startswith("│")), "")
    cells = [c.strip() for c in header.strip().strip("│").split("│")]
    if "…" not in cells or len(cells) > len(columns):
        return []
    cut = cells.index("…")
    after = len(cells) - cut - 1
    return columns[cut:len(columns) - after]


def render_vertical(res: Result, max_rows: int | None) -> str:
    rows = res.rows if max_rows is None else res.rows[:max_rows]
    pad = max((len(c) for c in res.columns), default=0)
    out = []
    for i, row in enumerate(rows, 1):
        out.append(f"-[ row {i} ]" + "-" * max(0, pad - 6))
        out.extend(f"{c.ljust(pad)} | {_text(v)}" for c, v in zip(res.columns, row))
    out.append(_footer(res, len(rows)))
    return "\n".join(out) + "\n"


def render_markdown(res: Result, max_rows: int | None) -> str:
    rows = res.rows if max_rows is None else res.rows[:max_rows]
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(esc(c) for c in res.columns) + " |",
           "|" + "|".join("---" for _ in res.columns) + "|"]
    out.extend("| " + " | ".join(esc(_text(v)) for v in row) + " |" for row in rows)
    return "\n".join(out) + "\n"


def render_csv(res: Result, max_rows: int | None) -> str:
    rows = res.rows if max_rows is None else res.rows[:max_rows]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(res.columns)
    for row in rows:
        w.writerow(["" if v is None else _text(v) for v in row])
    return buf.getvalue()


def render_json(res: Result, max_rows: int | None) -> str:
    rows = res.rows if max_rows is None else res.rows[:max_rows]
    records = [{c: _plain(v) for c, v in zip(res.columns, row)} for row in rows]
    return json.dumps(records, ensure_ascii=False, indent=1) + "\n"


MORE_NOTE = "more rows not fetched: --limit N shows more, -o FILE writes all"


def _footer(res: Result, shown: int) -> str:
    n = len(res.rows)
    if res.more:
        return f"(first {shown} rows; {MORE_NOTE})"
    return f"({n} row{'s' if n != 1 else ''}" + (f", {shown} shown)" if shown < n else ")")


def shown_rows(fmt: str, width: int | None, limit: int | None) -> int | None:
    """How many rows `fmt` shows (None: all): --limit, else 40 on a terminal for table/vertical."""
    if fmt in ("table", "vertical") and width:
        return limit or DEFAULT_TABLE_ROWS
    return limit


def render(rel, res: Result, fmt: str, *, width: int | None, limit: int | None) -> str:
    if fmt == "table":
        return render_table(rel, res, width, shown_rows(fmt, width, limit) or 10**9)
    if fmt == "vertical":
        return render_vertical(res, shown_rows(fmt, width, limit))
    return {"csv": render_csv, "json": render_json, "markdown": render_markdown}[fmt](res, limit)


# ---- the command ----------------------------------------------------------------------------

def terminal_width() -> int:
    return shutil.get_terminal_size((120, 24)).columns


def main(settings, query: str, fmt: str = "table", output: str | None = None, limit: int | None = None,
         width: int | None = None, timeout: float | None = DEFAULT_TIMEOUT_S,
         memory: str = DEFAULT_MEMORY_LIMIT) -> int:
    """`wse sql`: exit 0 with the result, 1 on an SQL error or the statement timeout, 2 on a refused
    statement or no warehouse, 130 on Ctrl-C."""
    from wse_platform.warehouse import Warehouse

    if not settings.warehouse.exists():
        print(f"error: no warehouse at {settings.warehouse} yet (run `wse demo` or `wse materialize`)",
              file=sys.stderr)
        return 2
    width = None if output else (width or terminal_width())

    def work():
        progress = sys.stdout.isatty() and not output  # DuckDB's progress bar writes to stdout: a terminal's only
        con.execute(f"SET enable_progress_bar = {str(progress).lower()}")
        rel, res = run_query(con, query, limit=shown_rows(fmt, width, limit))
        return res, render(rel, res, fmt, width=width, limit=limit)

    try:
        with Warehouse(settings.warehouse).connect(read_only=True, config={"memory_limit": memory}) as con:
            res, text = run_interruptible(con, work, timeout)
    except ReadOnlyViolation as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except QueryStopped as err:
        print(f"{'' if err.by_user else 'error: '}{err}", file=sys.stderr)
        return 130 if err.by_user else 1
    except duckdb.Error as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"{len(res.rows)} rows × {len(res.columns)} columns written to {output} ({fmt})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
