"""One Dagster asset per dbt-like SQL model; its SQL shows in the asset description."""
from __future__ import annotations

from dagster import AssetKey, AssetsDefinition, DataVersion, MaterializeResult, asset

from assets.helpers import content_version, table_metadata
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
        model.build(wh)
        df = wh.query(f'SELECT * FROM "{model.name}"')  # summary tables: small
        # data version from the rows: an identical rebuild does not trigger what reads this table
        return MaterializeResult(metadata=table_metadata(wh, model.name, df, partitioned=False),
                                 data_version=DataVersion(content_version(df)))

    return _build


def _sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_sql_model_assets(known_tables: set[str]) -> list[AssetsDefinition]:
    """One asset per model. A model reading a table that this config does not build (its benchmark
    is switched off, e.g. the tiny test grids) is left out; a ref naming no table at all is an error."""
    from assets.helpers import ddl_column_schemas

    models = load_models()
    ddl_tables = set(ddl_column_schemas())
    names = {m.name for m in models}
    check_refs(models, known_tables | (ddl_tables - names))
    kept = list(models)
    while True:
        have = known_tables | {m.name for m in kept}
        keep = [m for m in kept if all(r in have for r in m.refs)]
        if len(keep) == len(kept):
            break
        kept = keep
    return [_model_asset(m) for m in kept]
