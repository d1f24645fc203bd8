"""The validated `wse.yaml` as a Dagster resource (loaded once per process per file version)."""
from __future__ import annotations

import os
from functools import lru_cache

from dagster import ConfigurableResource

from wse_platform.config import Settings, load_settings


@lru_cache(maxsize=16)
def _cached(path: str | None, mtime: float, env_key: str) -> Settings:
    return load_settings(path)


def settings_for(config_path: str | None = None) -> Settings:
    """Settings for a path (or $WSE_CONFIG / ./wse.yaml), reloaded when the file changes, except
    while a command runs: then the version it read at start (`wse_platform.config_snapshot`)."""
    from wse_platform import config_snapshot
    if (pinned := config_snapshot.pinned(config_path)) is not None:
        return pinned
    path = config_path or os.environ.get("WSE_CONFIG")
    mtime = os.path.getmtime(path) if path and os.path.exists(path) else 0.0
    env_key = "|".join(os.environ.get(k, "") for k in ("WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR"))
    return _cached(path, mtime, env_key)


class SettingsResource(ConfigurableResource):
    """Path of the config file; `None` means $WSE_CONFIG, ./wse.yaml, or the shipped default."""

    config_path: str | None = None

    def get(self) -> Settings:
        return settings_for(self.config_path)
