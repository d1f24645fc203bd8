"""Sensors and schedules: re-judging when a judge/auditor changes, and final-table refresh.

- `config_observer` (sensor, every 30 s under the daemon / `dagster dev`): recomputes the
  fingerprints of every config source asset (`assets/versioning.py`) and records an
  observation for each changed one, so the UI marks exactly the affected cells unsynced. When a
  *judge* configuration changed, it requests one re-judging run per cell whose trajectories
  exist (selection: the judged assets and their same-partition descendants, never a generation
  asset), tagged with the judge backend for the run queue's limits.
- `rejudge_schedule` (cron `rejudge_cron` from the config, default nightly): re-judges every cell
  whose latest verdicts were made with another judge configuration (read from their data
  provenance), e.g. after the daemon was off or a re-judging run failed.
- `final_tables_sensor`: when a partition upstream of an unpartitioned final table was
  materialized after that table, and nothing is running, rebuild the final tables. This also
  covers Dagster's ≥100-upstream-partitions blind spot.
"""
from __future__ import annotations

from dagster import (
    AssetKey,
    AssetObservation,
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
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME

from assets.partitions import BenchmarkPartitions
from assets.versioning import changed_observations, last_observed_version, source_versions
from resources.settings import settings_for
from wse_platform.config import Settings

# Runs are requested per partition with an asset selection; they go to Dagster's implicit asset
# job, which (unlike an `AssetSelection.all()` target) may hold assets of different partitions.
ASSET_JOB = IMPLICIT_ASSET_JOB_NAME
BACKEND_TAG = "wse/backend"
TRIGGER_TAG = "wse/trigger"


def _judge_models(s: Settings) -> dict[str, str | None]:
    """judge source asset -> the judge model it configures (for the run queue's backend tag)."""
    wj = s.wse.consistency_judge or s.wse.richness_judge
    ra = s.ncp.reaudit_auditors[0].model if s.ncp.reaudit_auditors else None
    return {"wse_judge_config": wj.model if wj else None, "ncp_reaudit_config": ra,
            "endings_judge_config": s.endings.judge}


class _LazyGraph:
    """The asset graph of `objs`, built on first use (sensors run long after definitions load)."""

    def __init__(self, objs: list):
        self._objs = [AssetsDefinition(specs=[o]) if isinstance(o, AssetSpec) else o
                      for o in objs if isinstance(o, (AssetsDefinition, AssetSpec, SourceAsset))]
        self._graph: AssetGraph | None = None

    def __getattr__(self, name):
        if self._graph is None:  # straight from the assets: no resources needed to know the graph
            self._graph = AssetGraph.from_assets(self._objs)
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


def judged_version(instance, key: AssetKey, partition: str | None, source: AssetKey) -> str | None:
    """The judge-config data version the latest materialization of (key, partition) was made with."""
    from dagster._core.definitions.data_version import extract_data_provenance_from_entry

    rec = instance.get_latest_data_version_record(key, is_source=False, partition_key=partition)
    prov = extract_data_provenance_from_entry(rec.event_log_entry) if rec is not None else None
    if prov is None or source not in prov.input_data_versions:
        return None
    return prov.input_data_versions[source].value


def rejudge_requests(instance, graph, source: str, fingerprint: str, backend: str) -> list[RunRequest]:
    """Runs re-judging every cell with existing trajectories whose verdicts were not made with the
    judge configuration `fingerprint` (or do not exist): one run per partition, selecting only the
    judged assets and their same-partition descendants — never a generation asset."""
    src = AssetKey(source)
    if not graph.has(src):
        return []
    judged = [c for c in graph.get(src).child_keys if graph.get(c).is_materializable]
    # A judged asset downstream of another judged asset rides in that one's run.
    roots = sorted((c for c in judged if not any(c in _same_partition_closure(graph, o) for o in judged if o != c)),
                   key=lambda k: k.to_user_string())
    tags = {BACKEND_TAG: backend, TRIGGER_TAG: "judge-change"}
    per_partition: dict[str | None, set[AssetKey]] = {}
    for root in roots:
        node = graph.get(root)
        if node.partitions_def is None:
            candidates: list[str | None] = [None]
        else:
            gen_parents = [p for p in node.parent_keys if graph.get(p).is_materializable
                           and graph.get(p).partitions_def == node.partitions_def]
            have: set[str] | None = None
            for p in gen_parents:  # cells whose trajectories / transcripts / stories exist
                mats = set(instance.get_materialized_partitions(p))
                have = mats if have is None else have & mats
            candidates = sorted(have or [])
        for pk in candidates:
            if judged_version(instance, root, pk, src) != fingerprint:
                per_partition.setdefault(pk, set()).update(_same_partition_closure(graph, root))
    requests = []
    for pk in sorted(per_partition, key=str):
        selection = sorted(per_partition[pk], key=lambda k: k.to_user_string())
        run_key = f"rejudge:{source}:{pk or '-'}:{fingerprint}:{'+'.join(k.to_user_string() for k in selection)}"
        requests.append(RunRequest(run_key=run_key, asset_selection=selection, partition_key=pk, tags=tags))
    return requests


def _latest_record(instance, key: AssetKey):
    """The latest materialization record (with its storage id) of an asset, or None."""
    from dagster import AssetRecordsFilter
    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
    return res.records[0] if res.records else None


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
        last = _latest_record(instance, key)
        if last is None:  # never built: build it once some upstream cell exists
            if any(_latest_record(instance, p) is not None for p in wide):
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
    parents = {p for k in stale for p in graph.get(k).parent_keys}
    marker = max((r.storage_id for r in (_latest_record(instance, p) for p in parents) if r is not None), default=0)
    return [RunRequest(run_key=f"final-tables:{marker}", asset_selection=sorted(selection, key=lambda k: k.to_user_string()),
                       tags={TRIGGER_TAG: "upstream-cells-changed"})]


def build_automation(settings: Settings, parts: BenchmarkPartitions, objs: list) -> tuple[list, list, list]:
    config_path = settings.source_file
    graph = _LazyGraph(objs)

    sources = [o for o in objs if isinstance(o, SourceAsset) and o.is_observable]

    def sweep(instance, on_change_only: bool) -> tuple[list[RunRequest], list[AssetObservation]]:
        """Observation events for changed config fingerprints, and re-judging requests:
        on_change_only (sensor) only right after a judge configuration changed; otherwise
        (schedule) for every cell whose verdicts used another judge configuration."""
        s = settings_for(config_path)
        current = {src.key.to_user_string(): source_versions(src) for src in sources}
        events: list[AssetObservation] = []
        for src in sources:
            if current[src.key.to_user_string()] is not None:
                events += changed_observations(instance, src, current[src.key.to_user_string()])
        requests: list[RunRequest] = []
        for source, judge_model in _judge_models(s).items():
            versions_now = current.get(source)
            if not versions_now or not graph.has(AssetKey(source)):
                continue
            fingerprint = versions_now[None]
            if on_change_only:
                last = last_observed_version(instance, AssetKey(source))
                if last is None or last == fingerprint:  # unchanged, or first observation: nothing judged yet
                    continue
            requests += rejudge_requests(instance, graph, source, fingerprint, _backend(s, judge_model))
        return requests, events

    @sensor(name="config_observer", job_name=ASSET_JOB, minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING,
            description="Observes wse.yaml and prompt files; re-judges every existing trajectory when a judge changes.")
    def config_observer(context: SensorEvaluationContext):
        requests, events = sweep(context.instance, on_change_only=True)
        if not requests and not events:
            return SkipReason("no configuration change")
        return SensorResult(run_requests=requests, asset_events=events)

    @sensor(name="final_tables_sensor", job_name=ASSET_JOB, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
            description="Rebuilds final tables once upstream cells changed and no run is in flight.")
    def final_tables_sensor(context: SensorEvaluationContext):
        requests = final_table_requests(context.instance, graph)
        return requests or SkipReason("final tables are up to date")

    @schedule(name="rejudge_schedule", job_name=ASSET_JOB, cron_schedule=settings.rejudge_cron, default_status=DefaultScheduleStatus.RUNNING,
              description="Nightly sweep: re-judge cells whose verdicts come from an outdated judge configuration.")
    def rejudge_schedule(context: ScheduleEvaluationContext):
        requests, events = sweep(context.instance, on_change_only=False)
        for ev in events:  # runs record the judge version they read: observe it first
            context.instance.report_runless_asset_event(ev)
        return requests or SkipReason("all verdicts use the current judge configuration")

    return [config_observer, final_tables_sensor], [rejudge_schedule], []
