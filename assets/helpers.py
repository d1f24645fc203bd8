"""Shared helpers for thin assets: write a table and report what was written."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
from dagster import MaterializeResult, MetadataValue

from wse_platform.warehouse import Warehouse

PREVIEW_ROWS = 10


def markdown_preview(df: pl.DataFrame, rows: int = PREVIEW_ROWS, max_chars: int = 60) -> str:
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


def write_table(
    warehouse: Warehouse,
    table: str,
    df: pl.DataFrame,
    key: Mapping[str, Any] | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    plots: Mapping[str, str | Path] | None = None,
    data_version: str | None = None,
) -> MaterializeResult:
    """Replace the table (or the partition `key` of it) and return a MaterializeResult with
    row count, a markdown preview and optional plots (PNG paths, shown inline in the UI)."""
    n = warehouse.replace_partition(table, df, key or {})
    metadata: dict[str, Any] = {
        "dagster/row_count": n,
        "table": table,
        "preview": MetadataValue.md(markdown_preview(df)),
    }
    for name, path in (plots or {}).items():
        metadata[name] = MetadataValue.path(str(path))
        metadata[f"{name}_image"] = MetadataValue.md(_inline_png(Path(path)))
    metadata.update(extra_metadata or {})
    kwargs: dict[str, Any] = {"metadata": metadata}
    if data_version is not None:
        from dagster import DataVersion
        kwargs["data_version"] = DataVersion(data_version)
    return MaterializeResult(**kwargs)


def _inline_png(path: Path) -> str:
    import base64
    if not path.exists():
        return f"_(missing plot {path})_"
    b64 = base64.b64encode(path.read_bytes()).decode()
    return f"![{path.name}](data:image/png;base64,{b64})"
