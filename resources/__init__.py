"""Dagster resources: settings, warehouse, LLM client. Thin wrappers over `wse_platform`."""
from resources.llm import LLMResource
from resources.settings import SettingsResource, settings_for
from resources.warehouse import WarehouseResource

__all__ = ["LLMResource", "SettingsResource", "WarehouseResource", "settings_for"]
