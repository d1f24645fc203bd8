"""One Dagster asset per dbt-like SQL model; its SQL shows in the asset description."""
from __future__ import annotations

from dagster import AssetKey, AssetsDefinition, MaterializeResult, MetadataValue, asset

from assets.helpers import markdown_preview
from resources import WarehouseResource
from wse_platform.sql_models import SQLModel, check_refs, load_models

GROUPS = {"wse_": "wse_bench", "ncp_": "ncp_bench", "endings_": "endings", "llm_": "platform"}


def _group(name: str) -> str:
    return next((g for prefix, g in GROUPS.items() if name.startswith(prefix)), "platform")


def _model_asset(model: SQLModel) -> AssetsDefinition:
    @asset(
        name=model.name,
        deps=[AssetKey(r) for r in model.refs],
        group_name=_group(model.name),
        kinds={"duckdb", "sql"},
        description=f"SQL model `dbt_like_models/{model.path.name}`:\n\n```sql\n{model.sql.strip()}\n```",
        code_version=_sha(model.sql),
    )
    def _build(context, warehouse: WarehouseResource) -> MaterializeResult:
        wh = warehouse.get()
        n = model.build(wh)
        df = wh.query(f'SELECT * FROM "{model.name}" LIMIT 10')
        return MaterializeResult(metadata={
            "dagster/row_count": n, "table": model.name, "preview": MetadataValue.md(markdown_preview(df)),
        })

    return _build


def _sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_sql_model_assets(known_tables: set[str]) -> list[AssetsDefinition]:
    models = load_models()
    check_refs(models, known_tables)
    return [_model_asset(m) for m in models]
