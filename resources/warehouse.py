"""The DuckDB warehouse as a Dagster resource (see `wse_platform.warehouse` for the locking scheme)."""
from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource

from resources.settings import settings_for
from wse_platform.warehouse import Warehouse


@lru_cache(maxsize=16)
def _warehouse(path: str) -> Warehouse:
    return Warehouse(path)


class WarehouseResource(ConfigurableResource):
    config_path: str | None = None

    def get(self) -> Warehouse:
        wh = _warehouse(str(settings_for(self.config_path).warehouse))
        wh.ensure_schema()
        return wh
