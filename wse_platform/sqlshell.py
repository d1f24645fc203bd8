"""`wse sql`: one read-only query against the warehouse, rendered for a terminal or a file.

Read-only is enforced twice, by DuckDB itself rather than by inspecting SQL text:
- the statement: exactly one, of a type that only reads (DuckDB's own parser classifies it);
- the connection: opened read-only, then `enable_external_access = false` (no ATTACH, no
  COPY … TO, no reading other files: read_csv, 'file.parquet', extensions) and
  `lock_configuration = true` (no SET/PRAGMA can lift that afterwards).

Rendering: `table` is DuckDB's own box renderer (the DuckDB CLI's), truncated to the terminal
width with the hidden columns named below it; `vertical` shows one field per line (for wide
rows); `csv`, `json`, `markdown` are for files and other tools (`-o FILE`).
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import decimal
import io
import json
import shutil
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

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


def lock_down(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Forbid external access and further configuration changes on an open connection."""
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


def run_query(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[duckdb.DuckDBPyRelation, Result]:
    """Validate, lock the connection down, run. Returns DuckDB's relation and the fetched rows."""
    check_statement(con, sql)
    lock_down(con)
    try:
        rel = con.sql(sql)
    except duckdb.PermissionException as err:
        raise ReadOnlyViolation(f"{err}; {READ_ONLY_NOTE}") from None
    if rel is None:  # not a query after all (cannot happen for SELECT/EXPLAIN, but never print None)
        return rel, Result([], [], [])
    return rel, Result(list(rel.columns), [str(t) for t in rel.types], rel.fetchall())


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


def _footer(res: Result, shown: int) -> str:
    n = len(res.rows)
    return f"({n} row{'s' if n != 1 else ''}" + (f", {shown} shown)" if shown < n else ")")


def render(rel, res: Result, fmt: str, *, width: int | None, limit: int | None) -> str:
    if fmt == "table":
        return render_table(rel, res, width, (limit or DEFAULT_TABLE_ROWS) if width else (limit or 10**9))
    if fmt == "vertical":
        return render_vertical(res, limit or (DEFAULT_TABLE_ROWS if width else None))
    return {"csv": render_csv, "json": render_json, "markdown": render_markdown}[fmt](res, limit)


# ---- the command ----------------------------------------------------------------------------

def terminal_width() -> int:
    return shutil.get_terminal_size((120, 24)).columns


def main(settings, query: str, fmt: str = "table", output: str | None = None, limit: int | None = None,
         width: int | None = None) -> int:
    """`wse sql`: exit 0 with the result, 1 on an SQL error, 2 on a refused statement or no warehouse."""
    from wse_platform.warehouse import Warehouse

    if not settings.warehouse.exists():
        print(f"error: no warehouse at {settings.warehouse} yet (run `wse demo` or `wse materialize`)",
              file=sys.stderr)
        return 2
    try:
        with Warehouse(settings.warehouse).connect(read_only=True) as con:
            rel, res = run_query(con, query)
            text = render(rel, res, fmt, width=None if output else (width or terminal_width()), limit=limit)
    except ReadOnlyViolation as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except duckdb.Error as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"{len(res.rows)} rows × {len(res.columns)} columns written to {output} ({fmt})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
