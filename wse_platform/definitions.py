"""The one `Definitions` of the project: assets, checks, resources, sensors and schedules.

Built from the config (`wse.yaml`, or $WSE_CONFIG) because the partitions are the config's
model × architecture cells. `build_definitions(settings_path)` lets tests build it for another
config; `defs` is what `dagster dev -w workspace.yaml` loads.
"""
from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    AssetSpec,
    Definitions,
    SourceAsset,
)

warnings.filterwarnings("ignore", message=".*is currently in beta.*")
warnings.filterwarnings("ignore", message=".*is currently in preview.*")

from assets.partitions import build_partitions  # noqa: E402
from assets.sql_models import build_sql_model_assets
from resources import LLMResource, SettingsResource, WarehouseResource, settings_for
from wse_platform.run_console import console_logger

# Asset modules, each exposing build(settings, parts) -> list (see assets/core.py).
ASSET_MODULES: tuple[str, ...] = (
    "assets.core",
    "assets.versioning",
    "assets.source_files",
    "assets.wse.sources",
    "assets.wse.generation",
    "assets.wse.judging",
    "assets.wse.tables",
    "assets.ncp.specs",
    "assets.ncp.episodes",
    "assets.ncp.tables",
    "assets.endings.stories",
    "assets.endings.generation",
    "assets.endings.forecasting",
    "assets.endings.tables",
    "assets.endings.rubric",
    "assets.endings.reports",
)  # assets.checks is built last, from the assets above (see build_definitions)


def _asset_keys(objs: Iterable[object]) -> set[str]:
    keys: set[str] = set()
    for o in objs:
        if isinstance(o, AssetsDefinition):
            keys |= {k.to_user_string() for k in o.keys}
        elif isinstance(o, (AssetSpec, SourceAsset)):
            keys.add(o.key.to_user_string())
    return keys


def build_definitions(config_path: str | None = None, no_cache: bool = False) -> Definitions:
    settings = settings_for(config_path)
    parts = build_partitions(settings)
    objs: list[object] = []
    for name in ASSET_MODULES:
        objs.extend(importlib.import_module(name).build(settings, parts))
    objs.extend(build_sql_model_assets(_asset_keys(objs)))
    from assets import checks
    objs.extend(checks.build(settings, parts, known={
        s.key.to_user_string(): s.partitions_def is not None
        for o in objs if isinstance(o, AssetsDefinition) and o.is_materializable for s in o.specs}))

    from assets import sync, sync_rebuilding
    from assets.automation import build_automation, with_automation  # sensors, schedules, conditions
    from assets.core import with_llm_calls_lineage
    from assets.helpers import describe_tables

    # every asset: its automation condition, table name / column schema / owner / tags; llm_calls
    # drawn downstream of every LLM asset
    from assets.groups import regroup  # groups by role: sources → cells → verdicts → tables

    objs = describe_tables(with_automation(regroup(with_llm_calls_lineage(objs))), settings.warehouse)

    sensors, schedules, jobs = build_automation(settings, parts, objs)
    # the `wse status` verdict as an `in_sync` check per asset, reported by each asset's own step
    objs, sync_checks, sync_sensors = sync.build(objs)
    objs += sync_checks
    sensors += sync_sensors
    return Definitions(
        assets=[o for o in objs if not isinstance(o, AssetChecksDefinition)],
        asset_checks=[o for o in objs if isinstance(o, AssetChecksDefinition)],
        resources={
            "settings": SettingsResource(config_path=config_path),
            "warehouse": WarehouseResource(config_path=config_path),
            "llm": LLMResource(config_path=config_path, no_cache=no_cache),
        },
        sensors=sensors,
        schedules=schedules,
        jobs=jobs,
        loggers={"console": console_logger},  # one line per record on the terminal (run_console)
        # One process per run, not per step: a step-per-process executor would pay Python
        # start-up and an embedded-model reload for every step.
        # (it first says `in_sync` of what the run rebuilds where its planned checks hide it)
        executor=sync_rebuilding.in_process_saying(objs),
    )


def __getattr__(name: str):
    """`defs`, built on first access (Dagster's loader reads `wse_platform.definitions:defs`).

    Lazy so that importing `build_definitions` (the CLI builds for its own --config) does not
    build the definitions a second time for the default config: ~1 s on every `wse` command."""
    if name == "defs":
        globals()["defs"] = built = build_definitions()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
