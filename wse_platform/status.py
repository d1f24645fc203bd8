"""What is stale or missing, per asset and partition, and why.

Uses Dagster's own stale-status resolver (the same logic behind the UI's "unsynced"), plus
one explicit rule for Dagster's known limit: a downstream asset with 100 or more upstream
partitions is not checked for upstream data-version changes
(SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD). For such an edge we compare storage ids:
if any upstream partition was materialized after the downstream's latest materialization,
the downstream is stale ("upstream partition updated").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, Definitions
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.partitions.definition import PartitionsDefinition  # noqa: F401

try:  # the threshold Dagster uses; fall back to its documented value
    from dagster._core.definitions.data_version import (
        SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD as PARTITION_THRESHOLD,
    )
except ImportError:  # pragma: no cover
    PARTITION_THRESHOLD = 100


@dataclass
class CellStatus:
    asset: str
    partition: str | None
    status: str                 # "missing" | "stale" | "fresh"
    causes: list[str] = field(default_factory=list)


def _resolver(defs: Definitions, instance: DagsterInstance) -> CachingStaleStatusResolver:
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._time import get_current_datetime

    graph = defs.resolve_asset_graph()
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def _latest_storage_id(instance: DagsterInstance, key: AssetKey) -> int | None:
    rec = instance.get_latest_materialization_event(key)
    return rec.storage_id if rec is not None else None


def _updated_after(instance: DagsterInstance, key: AssetKey, storage_id: int) -> list[str]:
    res = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, after_storage_id=storage_id), limit=5)
    return sorted({r.partition_key or "-" for r in res.records})


def compute_status(defs: Definitions, instance: DagsterInstance, only_problems: bool = True) -> list[CellStatus]:
    graph = defs.resolve_asset_graph()
    resolver = _resolver(defs, instance)
    out: list[CellStatus] = []
    for key in sorted(graph.materializable_asset_keys, key=lambda k: k.to_user_string()):
        node = graph.get(key)
        pdef = node.partitions_def
        pks: list[str | None] = list(pdef.get_partition_keys()) if pdef else [None]
        wide_parents = [p for p in node.parent_keys
                        if graph.get(p).partitions_def is not None and pdef is None
                        and len(graph.get(p).partitions_def.get_partition_keys()) >= PARTITION_THRESHOLD]
        for pk in pks:
            status = resolver.get_status(key, pk)
            causes = [f"{c.key.asset_key.to_user_string()}"
                      + (f"[{c.key.partition_key}]" if c.key.partition_key else "")
                      + f": {c.reason}" for c in resolver.get_stale_causes(key, pk)] if status == StaleStatus.STALE else []
            if status != StaleStatus.MISSING and wide_parents:
                sid = _latest_storage_id(instance, key)
                for parent in wide_parents:
                    updated = _updated_after(instance, parent, sid) if sid is not None else []
                    if updated:
                        status = StaleStatus.STALE
                        causes.append(f"{parent.to_user_string()}: upstream partition(s) {', '.join(updated)} "
                                      "updated (checked explicitly: ≥100 upstream partitions)")
            label = {StaleStatus.MISSING: "missing", StaleStatus.STALE: "stale"}.get(status, "fresh")
            if label != "fresh" or not only_problems:
                out.append(CellStatus(key.to_user_string(), pk, label, causes))
    return out
