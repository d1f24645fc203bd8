"""Config assets: what each generation cell and each judge configuration depends on.

Each is an *external* asset (``AssetSpec``, no compute) whose data version is a fingerprint from
`wse_platform.versions`. Whoever notices the config (the `config_observer` sensor every 30 s,
`wse materialize` / `wse status` at start) records a *runless materialization* carrying the
fingerprint as its data version, for each partition whose fingerprint changed. Materializations
(rather than observations) so the UI shows a config asset as built, with its current version,
instead of "Missing" / "0 % filled".

Generation assets depend on the cell-config asset of their benchmark (same partitions, so a
cell becomes unsynced only when *its* model, prompts, architecture code or scale change);
judging assets depend on the judge-config asset (so a judge change makes every verdict cell
unsynced while trajectories stay fresh).

Dependencies to declare (by key):
    WSE:      trajectories  -> wse_cell_config;      verdicts  -> wse_judge_config
    NCP:      episodes      -> ncp_cell_config;      re-audits -> ncp_reaudit_config
    Endings:  stories/predictions -> endings_set_config; verdicts -> endings_judge_config
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import AssetKey, AssetMaterialization, AssetSpec, MetadataValue

from assets.partitions import BenchmarkPartitions, build_partitions
from resources.settings import settings_for
from wse_platform import versions
from wse_platform.config import Settings
from wse_platform.dagster_private import DATA_VERSION_TAG
from wse_platform.status import record_data_version

CONFIG_ASSETS = {
    "wse": ("wse_cell_config", "wse_judge_config"),
    "ncp": ("ncp_cell_config", "ncp_reaudit_config"),
    "endings": ("endings_set_config", "endings_judge_config"),
}
CONFIG_TAG = "wse/config_asset"        # tag on the config AssetSpecs
CONFIG_FILE_META = "config_file"       # definition metadata: the config file the fingerprints read
CHANGES_META, INPUTS_META = versions.CHANGES_META, versions.INPUTS_META


def code_version(*files: str | Path) -> str:
    """Code version of an asset: hash of the domain source files it runs (repo-relative paths)."""
    return versions.code_version_of(*files)


# key -> (BenchmarkPartitions field or None, what it fingerprints, fingerprint(settings, partition key))
_Fingerprint = Callable[[Settings, str | None], str]
CONFIG_SOURCES: dict[str, tuple[str | None, str, _Fingerprint]] = versions.CONFIG_FINGERPRINTS
GROUPS = {"wse": "wse_bench", "ncp": "ncp_bench", "endings": "endings"}


def _desc(what: str) -> str:
    return (f"Fingerprint of {what}, read from `wse.yaml` and the prompt files. Recorded as a "
            "materialization whenever it changes (by the `config_observer` sensor, and by `wse materialize` / "
            "`wse status`); its data version is the fingerprint, so a change marks exactly the downstream "
            "cells unsynced and the automation conditions rebuild them.")


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    config_file = str(settings.source_file or "")
    out = []
    for key, (kind, what, _) in CONFIG_SOURCES.items():
        bench = key.split("_", 1)[0]
        bench_parts = getattr(parts, bench)
        if bench_parts is None:
            continue
        meta = {CONFIG_FILE_META: MetadataValue.path(config_file)} if config_file else {}
        out.append(AssetSpec(key, partitions_def=getattr(parts, kind) if kind else None, group_name=GROUPS[bench],
                             description=_desc(what), kinds={"yaml"}, tags={CONFIG_TAG: "true"},
                             metadata=meta))
    return out


def current_versions(key: str, settings: Settings, parts: BenchmarkPartitions | None = None) -> dict[str | None, str]:
    """The current fingerprint of each partition of a config asset (None = unpartitioned)."""
    kind, _, fp = CONFIG_SOURCES[key]
    if kind is None:
        return {None: fp(settings, None)}
    pdef = getattr(parts or build_partitions(settings), kind)
    return {pk: fp(settings, pk) for pk in pdef.get_partition_keys()} if pdef is not None else {}


def _latest_records(instance, key: AssetKey, partitioned: bool) -> dict[str | None, Any]:
    """The latest materialization record of each partition (two queries per asset)."""
    from dagster import AssetRecordsFilter, DagsterEventType

    if not partitioned:
        res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
        return {None: res.records[0]} if res.records else {}
    ids = instance.get_latest_storage_id_by_partition(key, DagsterEventType.ASSET_MATERIALIZATION)
    if not ids:
        return {}
    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, storage_ids=list(ids.values())),
                                          limit=len(ids))
    return {r.partition_key: r for r in res.records}


def _inputs(record) -> list | None:
    mat = record.asset_materialization if record is not None else None
    value = mat.metadata.get(INPUTS_META) if mat is not None else None
    data = getattr(value, "data", None)
    return data if isinstance(data, list) else None


def config_events(instance, spec: AssetSpec, settings: Settings | None = None) -> list[AssetMaterialization]:
    """Runless materializations for the partitions of a config asset whose fingerprint changed,
    each with what it hashed (`inputs`) and, against the previous one, what changed."""
    s = settings or settings_for(_config_file(spec))
    name = spec.key.to_user_string()
    current = current_versions(name, s)
    records = _latest_records(instance, spec.key, spec.partitions_def is not None)
    fp = CONFIG_SOURCES[name][2]
    events = []
    for pk, v in current.items():
        previous = records.get(pk)
        if previous is not None and record_data_version(previous) == v:
            continue
        _, inputs = versions.with_inputs(fp, s, pk)
        changes = versions.describe_changes(_inputs(previous), inputs) if previous is not None else ["(first version)"]
        events.append(AssetMaterialization(
            asset_key=spec.key, partition=pk, tags={DATA_VERSION_TAG: v},
            metadata={"fingerprint": v, "previous": record_data_version(previous) or "(none)",
                      CHANGES_META: MetadataValue.md("\n".join(f"- {c}" for c in changes)),
                      INPUTS_META: MetadataValue.json(inputs)}))
    return events



def _config_file(spec: AssetSpec) -> str | None:
    meta = spec.metadata.get(CONFIG_FILE_META)
    path = getattr(meta, "path", meta)
    return str(path) if path else None


def config_specs(objs) -> list[AssetSpec]:
    """The config asset specs among definitions objects (tagged by `build`)."""
    return [o for o in objs if isinstance(o, AssetSpec) and o.tags.get(CONFIG_TAG) == "true"]


def record_config_versions(instance, objs) -> list[str]:
    """Record the changed config fingerprints as runless materializations, and the changed input
    files as runless observations (`assets/source_files.py`); returns the changed keys."""
    from assets.source_files import file_events, file_source_specs

    changed = []
    for spec in config_specs(objs):
        events = config_events(instance, spec)
        for ev in events:
            instance.report_runless_asset_event(ev)
        if events:
            changed.append(spec.key.to_user_string())
    for spec in file_source_specs(objs):
        key = spec.key.to_user_string()
        for ev in file_events(instance, key, spec):
            instance.report_runless_asset_event(ev)
            changed.append(key)
    return changed
