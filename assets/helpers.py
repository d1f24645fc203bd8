"""Shared helpers for thin assets: write a table and report what was written.

Every table materialization carries what a Dagster user expects on a table asset:
``dagster/row_count`` of the *whole* table (``partition_row_count`` for the partition just
written), ``dagster/table_name``, ``dagster/column_schema`` read back from the warehouse, a typed
table preview (``MetadataValue.table``), plots inline on the Overview page (see `plot_metadata`),
embedded in markdown and their path (relative to the config's folder), and a data version computed from the rows written, so a run that writes identical
rows does not make anything downstream look changed.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
from dagster import (
    DataVersion,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
)

from wse_platform import plot_server
from wse_platform.config import Settings
from wse_platform.warehouse import Warehouse

PREVIEW_ROWS = 10
MAX_CELL_CHARS = 60


def markdown_preview(df: pl.DataFrame, rows: int = PREVIEW_ROWS, max_chars: int = MAX_CELL_CHARS) -> str:
    """A small markdown table of the first rows (long cells shortened)."""
    if df.is_empty():
        return "_(no rows)_"
    head = df.head(rows)
    cols = head.columns

    def cell(v: Any) -> str:
        s = "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= max_chars else s[: max_chars - 1] + "…"

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in head.iter_rows():
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    if df.height > rows:
        lines.append(f"\n_{df.height - rows} more rows_")
    return "\n".join(lines)


# ---- typed metadata -------------------------------------------------------------------------
_INT = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)


def _column_type(dtype: pl.DataType) -> str:
    if dtype in _INT:
        return "int"
    if dtype in (pl.Float32, pl.Float64):
        return "float"
    if dtype == pl.Boolean:
        return "bool"
    return "string"


def table_preview(df: pl.DataFrame, rows: int = PREVIEW_ROWS, max_chars: int = MAX_CELL_CHARS) -> MetadataValue:
    """The first rows as a typed table (numbers stay numbers; long text is shortened)."""
    schema = TableSchema(columns=[TableColumn(c, _column_type(t)) for c, t in df.schema.items()])

    def value(v: Any, kind: str) -> Any:
        if v is None:
            return None
        if kind in ("int", "float", "bool"):
            return v
        s = str(v).replace("\n", " ")
        return s if len(s) <= max_chars else s[: max_chars - 1] + "…"

    kinds = [c.type for c in schema.columns]
    records = [TableRecord({c: value(v, k) for c, v, k in zip(df.columns, row, kinds)})
               for row in df.head(rows).iter_rows()]
    return MetadataValue.table(records=records, schema=schema)


def pick_ids(items: list, wanted, id_of, setting: str, table: str) -> list:
    """The stored `items` whose id (`id_of(item)`) is in `wanted`, in stored order (the config's
    `ncp.spec_ids` / `wse.seed_ids`); an id that is not stored fails, naming it."""
    have = [id_of(i) for i in items]
    missing = sorted(set(wanted) - set(have))
    if missing:
        raise ValueError(f"{setting}: {missing} not in {table} (ids look like {have[:3]})")
    keep = set(wanted)
    return [i for i, k in zip(items, have) if k in keep]


def warehouse_table_name(wh: Warehouse, table: str) -> str:
    """Fully qualified name as DuckDB shows it: <database (file stem)>.main.<table>."""
    return f"{Path(wh.path).stem}.main.{table}"


def warehouse_column_schema(wh: Warehouse, table: str) -> TableSchema | None:
    """Column names and SQL types of a warehouse table, as it exists now."""
    try:
        cols = wh.query("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [table])
    except Exception:  # noqa: BLE001 - metadata must never fail a materialization
        return None
    if cols.is_empty():
        return None
    return TableSchema(columns=[TableColumn(n, t) for n, t in cols.iter_rows()])


def whole_table_rows(wh: Warehouse, table: str) -> int | None:
    try:
        return int(wh.query(f'SELECT count(*) AS n FROM "{table}"')["n"][0])
    except Exception:  # noqa: BLE001
        return None


# Columns naming the `llm_calls` rows of the run that wrote the row: a call id hashes the run id
# (`wse_platform/llm/client.py`), so a rerun on cached answers writes the same answers with new ids.
# Nothing downstream reads them (the final tables, SQL models and plots read the answers), so they
# are left out of a table's data version: a cached rerun keeps it, and the run's `sync_checks` step
# skips the status of what is downstream (`rebuilt_as_before` in assets/sync.py). The rows keep them.
RUN_BOUND_COLUMNS = ("llm_call_ids", "llm_call_id")


def content_version(df: pl.DataFrame) -> str:
    """A data version from the rows themselves (schema, order and values): identical rows give
    the identical version, so a no-op rebuild does not mark downstream assets as changed. The
    call-id columns (`RUN_BOUND_COLUMNS`) are not part of it: only their presence is."""
    bound = [c for c in RUN_BOUND_COLUMNS if c in df.columns]
    if bound:
        df = df.drop(bound)
    h = hashlib.sha256(str(list(df.schema.items())).encode())
    if bound:  # (a table without them hashes as before)
        h.update(str(bound).encode())
    h.update(str(df.height).encode())
    if df.height:
        try:
            h.update(df.hash_rows(seed=0, seed_1=1, seed_2=2, seed_3=3).to_numpy().tobytes())
        except Exception:  # noqa: BLE001 - exotic dtypes: fall back to the serialized rows
            h.update(df.write_json().encode())
    return h.hexdigest()[:16]


def table_metadata(wh: Warehouse, table: str, df: pl.DataFrame, partitioned: bool) -> dict[str, Any]:
    """Row counts (whole table; partition), table name, column schema and typed preview."""
    meta: dict[str, Any] = {"dagster/table_name": warehouse_table_name(wh, table), "table": table}
    total = whole_table_rows(wh, table)
    meta["dagster/row_count"] = total if total is not None else df.height
    if partitioned:
        meta["partition_row_count"] = df.height
    schema = warehouse_column_schema(wh, table)
    if schema is not None:
        meta["dagster/column_schema"] = schema
    meta["preview"] = table_preview(df)
    return meta


def transcripts(settings: Settings, page: str, **params: str) -> dict[str, Any]:
    """`transcripts`: a link to this cell's transcripts in `wse view` (empty when `view_port: 0`)."""
    from wse_platform.view.links import view_url
    url = view_url(settings.view_port, page, **params)
    return {"transcripts": MetadataValue.url(url)} if url else {}


def plot_metadata(plots: Mapping[str, str | Path] | None, settings: Settings | None = None) -> dict[str, Any]:
    """Each plot three ways: `<name>` a short markdown image the UI shows inline on the asset's
    Overview (served by `wse ui`, see `wse_platform.plot_server`; only with `settings` and a
    `plots_port`), `<name>_embedded` the PNG itself in markdown (works anywhere, one click away)
    and `<name>_file` the PNG's path, relative to the config file's folder when inside it — never an
    absolute `file://` address of wherever the run happened (issue 21); the inline image is served
    from the current artifacts folder when it is viewed, so both survive moving the folder."""
    meta: dict[str, Any] = {}
    for name, path in (plots or {}).items():
        p = Path(path)
        if settings is not None and settings.plots_port and p.exists():
            url = plot_server.plot_url(settings.plots_port, plot_server.publish(p, settings.artifacts))
            meta[name] = MetadataValue.md(f"![{name}]({url})")
        meta[f"{name}_embedded"] = MetadataValue.md(_inline_png(p))
        meta[f"{name}_file"] = MetadataValue.path(portable_path(p, settings))
    return meta


def portable_path(path: Path, settings: Settings | None) -> str:
    """`path` as recorded in metadata: relative to the config file's folder when inside it (so it
    stays right when that folder, warehouse and artifacts included, is moved), else absolute."""
    p = Path(path).resolve()
    base = Path(settings.source_file).resolve().parent if settings is not None and settings.source_file else None
    if base is not None and p.is_relative_to(base):
        return str(p.relative_to(base))
    return str(p)


def write_table(
    warehouse: Warehouse,
    table: str,
    df: pl.DataFrame,
    key: Mapping[str, Any] | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    plots: Mapping[str, str | Path] | None = None,
    data_version: str | None = None,
    settings: Settings | None = None,
) -> MaterializeResult:
    """Replace the table (or the partition `key` of it) and return a MaterializeResult with the
    table metadata above. `data_version` defaults to a hash of the rows written; `settings`
    (where artifacts live, the plot port) lets plots show inline in the UI."""
    with warehouse.held():  # one connection for the write and its metadata queries
        warehouse.replace_partition(table, df, key or {})
        metadata = table_metadata(warehouse, table, df, partitioned=bool(key))
    metadata.update(plot_metadata(plots, settings))
    metadata.update(extra_metadata or {})
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(data_version or content_version(df)))


def _inline_png(path: Path) -> str:
    import base64
    if not path.exists():
        return f"_(missing plot {path})_"
    b64 = base64.b64encode(path.read_bytes()).decode()
    return f"![{path.name}](data:image/png;base64,{b64})"


# ---- definition-time metadata (from the DDL in sql/) -----------------------------------------
_COMMENT = r"^\s*\"?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\"?\s+[^-]*?--\s*(?P<comment>.+?)\s*$"


def ddl_column_schemas(sql_dir: Path | None = None) -> dict[str, TableSchema]:
    """Column name, SQL type and the DDL's trailing `-- comment` of every table created in `sql/`.

    Types come from DuckDB itself (the DDL runs in an in-memory database); comments from the lines.
    Parsed once per folder and process (definitions, checks and SQL models all ask): treat as read-only.
    """
    from wse_platform.warehouse import SQL_DIR

    return _ddl_column_schemas(Path(sql_dir or SQL_DIR).resolve())


@functools.lru_cache(maxsize=8)
def _ddl_column_schemas(sql_dir: Path) -> dict[str, TableSchema]:
    import re

    import duckdb

    files = sorted(sql_dir.glob("*.sql"))
    comments: dict[tuple[str, str], str] = {}
    con = duckdb.connect(":memory:")
    try:
        for f in files:
            text = f.read_text(encoding="utf-8")
            con.execute(text)
            table = None
            for line in text.splitlines():
                start = re.match(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(\w+)", line, re.I)
                if start:
                    table = start[1]
                    continue
                m = re.match(_COMMENT, line)
                if table and m and m["name"].upper() not in {"CREATE", "ALTER", "SELECT", "FROM", "WHERE"}:
                    comments.setdefault((table, m["name"]), m["comment"])
                if line.strip().startswith(")"):
                    table = None
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    out: dict[str, list[TableColumn]] = {}
    for table, col, dtype in rows:
        out.setdefault(table, []).append(TableColumn(col, dtype, description=comments.get((table, col))))
    return {t: TableSchema(columns=cols) for t, cols in out.items()}


OWNERS = {"wse_bench": "team:wse-bench", "ncp_bench": "team:ncp-bench", "endings": "team:endings",
          "platform": "team:platform"}


def describe_tables(objs: list, warehouse_path: Path) -> list:
    """Definition metadata on every table asset: `dagster/table_name`, `dagster/column_schema` from
    the DDL, an owner per benchmark and tags (benchmark, layer), so the catalog shows them before
    anything is materialized."""
    from dagster import AssetChecksDefinition, AssetsDefinition, AssetSpec

    schemas = ddl_column_schemas()
    db = Path(warehouse_path).stem

    def decorate(spec: AssetSpec) -> AssetSpec:
        name = spec.key.to_user_string()
        meta: dict[str, Any] = {}
        if name in schemas:
            meta["dagster/table_name"] = f"{db}.main.{name}"
            meta["dagster/column_schema"] = schemas[name]
        from assets.groups import BENCH_TAG, benchmark_of

        bench = BENCH_TAG[benchmark_of(name)]
        layer = ("config" if spec.tags.get("wse/config_asset") else "files" if spec.tags.get("wse/file_source")
                 else (spec.group_name or "").rsplit("_", 1)[-1] if spec.group_name != "platform" else "table")
        tags = {"benchmark": bench, "layer": layer}
        owner = OWNERS.get(bench)
        return spec.merge_attributes(metadata=meta, tags=tags,
                                     owners=[owner] if owner and owner not in spec.owners else [])

    out = []
    for o in objs:
        if isinstance(o, AssetChecksDefinition):
            pass
        elif isinstance(o, AssetsDefinition):
            o = o.map_asset_specs(decorate)
        elif isinstance(o, AssetSpec):
            o = decorate(o)
        out.append(o)
    return out
