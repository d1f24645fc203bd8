"""Sensors, schedules and jobs: re-judging when a judge/auditor changes, and final-table refresh.

- `config_observer` (sensor, every 30 s under the daemon / `dagster dev`): recomputes the
  fingerprints of every config source asset (`assets/versioning.py`) and records an
  observation when one changed, so the UI marks exactly the affected cells unsynced. When a
  *judge* configuration changed, it requests re-judging runs for every cell whose trajectories
  exist (never a generation run), tagged with the judge backend for the run queue's limits.
- `rejudge_schedule` (cron `rejudge_cron` from the config, default nightly): the same sweep for
  cells whose verdicts come from an outdated judge configuration (e.g. after the daemon was off).
- `final_tables_sensor`: when a partition upstream of an unpartitioned final table was
  materialized after that table, and nothing upstream is still running, rebuild the
  benchmark's final tables. This also covers Dagster's ≥100-upstream-partitions blind spot.
"""
from __future__ import annotations

from collections.abc import Callable

from dagster import (
    AssetKey,
    AssetObservation,
    AssetSelection,
    AssetsDefinition,
    AssetSpec,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    SourceAsset,
    schedule,
    sensor,
)
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.partitions import BenchmarkPartitions, cell_of
from resources.settings import settings_for
from wse_platform import versions
from wse_platform.config import Settings

BACKEND_TAG = "wse/backend"
TRIGGER_TAG = "wse/trigger"


def _judge_sources(s: Settings) -> dict[str, tuple[Callable[[], str], str | None]]:
    """judge source asset -> (current fingerprint, judge model name)."""
    wj = s.wse.consistency_judge or s.wse.richness_judge
    ra = s.ncp.reaudit_auditors[0].model if s.ncp.reaudit_auditors else None
    return {
        "wse_judge_config": (lambda: versions.wse_judge_version(s), wj.model if wj else None),
        "ncp_reaudit_config": (lambda: versions.ncp_reaudit_version(s), ra),
        "endings_judge_config": (lambda: versions.endings_judge_version(s), s.endings.judge),
    }


def _cell_sources(s: Settings, parts: BenchmarkPartitions) -> dict[str, Callable[[], dict[str, str]]]:
    out: dict[str, Callable[[], dict[str, str]]] = {}
    if parts.wse is not None:
        out["wse_cell_config"] = lambda: {k: versions.wse_cell_version(s, *cell_of(k)) for k in parts.wse.get_partition_keys()}
    if parts.ncp is not None:
        out["ncp_cell_config"] = lambda: {k: versions.ncp_cell_version(s, *cell_of(k)) for k in parts.ncp.get_partition_keys()}
    if parts.endings is not None:
        out["endings_set_config"] = lambda: {k: versions.endings_set_version(s, k) for k in parts.endings.get_partition_keys()}
    return out


def _last_version(instance, key: AssetKey, partition: str | None = None) -> str | None:
    rec = instance.get_latest_data_version_record(key, is_source=True, partition_key=partition)
    if rec is None or rec.asset_observation is None:
        return None
    return rec.asset_observation.tags.get(DATA_VERSION_TAG)


class _LazyGraph:
    """The asset graph of `objs`, built on first use (sensors run long after definitions load)."""

    def __init__(self, objs: list):
        self._objs = [o for o in objs if isinstance(o, (AssetsDefinition, AssetSpec, SourceAsset))]
        self._graph: AssetGraph | None = None

    def __getattr__(self, name):
        if self._graph is None:
            from dagster import Definitions
            self._graph = Definitions(assets=self._objs).resolve_asset_graph()
        return getattr(self._graph, name)


def _backend(s: Settings, model: str | None) -> str:
    return s.models[model].backend if model and model in s.models else "none"


def _same_partition_closure(graph, key: AssetKey) -> list[AssetKey]:
    """`key` and its materializable descendants with the same partitions (e.g. vote aggregates),
    so one run re-judges a cell and rebuilds what is computed from its verdicts."""
    pdef = graph.get(key).partitions_def
    out, frontier = {key}, [key]
    while frontier:
        for c in graph.get(frontier.pop()).child_keys:
            node = graph.get(c)
            if c not in out and node.is_materializable and node.partitions_def == pdef:
                out.add(c)
                frontier.append(c)
    return sorted(out, key=lambda k: k.to_user_string())


def rejudge_requests(instance, graph, source: str, fingerprint: str, backend: str) -> list[RunRequest]:
    """One run per (judged asset, partition with existing trajectories), keyed by the new fingerprint."""
    requests = []
    src = AssetKey(source)
    if not graph.has(src):
        return []
    judged = [c for c in graph.get(src).child_keys if graph.get(c).is_materializable]
    # A judged asset downstream of another judged asset rides in that one's run.
    roots = [c for c in judged if not any(c in _same_partition_closure(graph, o) for o in judged if o != c)]
    for child in sorted(roots, key=lambda k: k.to_user_string()):
        node = graph.get(child)
        selection = _same_partition_closure(graph, child)
        tags = {BACKEND_TAG: backend, TRIGGER_TAG: "judge-change"}
        if node.partitions_def is None:
            requests.append(RunRequest(run_key=f"{child.to_user_string()}:{fingerprint}", asset_selection=selection, tags=tags))
            continue
        gen_parents = [p for p in node.parent_keys if graph.get(p).is_materializable
                       and graph.get(p).partitions_def == node.partitions_def]
        done: set[str] | None = None
        for p in gen_parents:
            mats = set(instance.get_materialized_partitions(p))
            done = mats if done is None else done & mats
        for pk in sorted(done or []):
            requests.append(RunRequest(run_key=f"{child.to_user_string()}:{pk}:{fingerprint}", asset_selection=selection,
                                       partition_key=pk, tags=tags))
    return requests


def final_table_requests(instance, graph: AssetGraph) -> list[RunRequest]:
    """Rebuild unpartitioned tables whose partitioned upstream changed after their last build."""
    from dagster import AssetRecordsFilter

    active = instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.STARTED,
                                                           DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]), limit=1)
    if active:
        return []  # wait until the cells settle, then rebuild once
    stale: list[AssetKey] = []
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        if node.partitions_def is not None:
            continue
        wide = [p for p in node.parent_keys if graph.get(p).partitions_def is not None]
        if not wide:
            continue
        last = instance.get_latest_materialization_event(key)
        if last is None:
            stale.append(key)
            continue
        for p in wide:
            newer = instance.fetch_materializations(AssetRecordsFilter(asset_key=p, after_storage_id=last.storage_id), limit=1)
            if newer.records:
                stale.append(key)
                break
    if not stale:
        return []
    # Everything downstream of the stale tables that is unpartitioned rebuilds in the same run.
    selection = set(stale)
    frontier = list(stale)
    while frontier:
        for c in graph.get(frontier.pop()).child_keys:
            if graph.get(c).partitions_def is None and c not in selection and graph.get(c).is_materializable:
                selection.add(c)
                frontier.append(c)
    marker = max(instance.get_latest_materialization_event(p).storage_id
                 for k in stale for p in graph.get(k).parent_keys
                 if instance.get_latest_materialization_event(p) is not None)
    return [RunRequest(run_key=f"final-tables:{marker}", asset_selection=sorted(selection, key=lambda k: k.to_user_string()),
                       tags={TRIGGER_TAG: "upstream-cells-changed"})]


def build_automation(settings: Settings, parts: BenchmarkPartitions, objs: list) -> tuple[list, list, list]:
    config_path = settings.source_file
    graph = _LazyGraph(objs)

    def sweep(instance, observe: bool) -> tuple[list[RunRequest], list[AssetObservation]]:
        s = settings_for(config_path)
        requests: list[RunRequest] = []
        events: list[AssetObservation] = []
        for source, (fp, judge_model) in _judge_sources(s).items():
            if not graph.has(AssetKey(source)):
                continue
            current = fp()
            last = _last_version(instance, AssetKey(source))
            if last == current:
                continue
            if observe:
                events.append(AssetObservation(asset_key=source, tags={DATA_VERSION_TAG: current}))
            if last is not None or not observe:  # first-ever observation: nothing judged yet
                requests += rejudge_requests(instance, graph, source, current, _backend(s, judge_model))
        if observe:
            for source, fps in _cell_sources(s, parts).items():
                for pk, current in fps().items():
                    if _last_version(instance, AssetKey(source), pk) != current:
                        events.append(AssetObservation(asset_key=source, partition=pk, tags={DATA_VERSION_TAG: current}))
        return requests, events

    @sensor(name="config_observer", target=AssetSelection.all(), minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING,
            description="Observes wse.yaml and prompt files; re-judges every existing trajectory when a judge changes.")
    def config_observer(context: SensorEvaluationContext):
        requests, events = sweep(context.instance, observe=True)
        if not requests and not events:
            return SkipReason("no configuration change")
        return SensorResult(run_requests=requests, asset_events=events)

    @sensor(name="final_tables_sensor", target=AssetSelection.all(), minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
            description="Rebuilds final tables once upstream cells changed and no run is in flight.")
    def final_tables_sensor(context: SensorEvaluationContext):
        requests = final_table_requests(context.instance, graph)
        return requests or SkipReason("final tables are up to date")

    @schedule(name="rejudge_schedule", target=AssetSelection.all(), cron_schedule=settings.rejudge_cron, default_status=DefaultScheduleStatus.RUNNING,
              description="Nightly sweep: re-judge cells whose verdicts come from an outdated judge configuration.")
    def rejudge_schedule(context: ScheduleEvaluationContext):
        requests, _ = sweep(context.instance, observe=False)
        return requests or SkipReason("all verdicts use the current judge configuration")

    return [config_observer, final_tables_sensor], [rejudge_schedule], []
