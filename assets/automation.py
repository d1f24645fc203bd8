"""What keeps the UI truthful: declarative automation on every asset, plus two hand-written pieces.

- **Automation conditions** (`rebuild_condition`, on every materializable asset, evaluated by the
  `wse_automation` automation-condition sensor): an asset partition is requested when one of its
  inputs got a *new data version* (a config fingerprint, a re-judged cell, a rebuilt table; a run
  that rewrote identical rows keeps its data version and triggers nothing), when its code
  version changed, or when it newly became missing (e.g. a model was added); never while an
  input is missing or in progress. This covers "re-judge when the judge configuration changes"
  (verdict assets depend on the judge-config asset only), "rebuild a cell when its config
  changes", "rebuild final tables when their inputs changed" and "`llm_usage` follows
  `llm_calls`". The UI shows each asset's condition and, per tick, which dependency fired.
- `config_observer` (sensor, every 30 s): automation conditions read the event log, they cannot
  read a file. This sensor fingerprints `wse.yaml` and the prompt files and records a
  materialization of each config asset partition whose fingerprint changed (see
  `assets/versioning.py`); the conditions then react to the new data versions.
- `rejudge_schedule` (cron `rejudge_cron`): a condition reacts to a *change*; it cannot compare
  the judge configuration stored in each cell's provenance with the current one. The nightly
  sweep does, and re-judges cells whose verdicts still come from an older judge configuration
  (e.g. a re-judging run failed, or the change happened while nothing was running).
- (`assets/sync.py`) the `in_sync` check and its `sync_status` sensor show the `wse status` verdict
  in the UI, which Dagster does not compute for partitioned assets. The runs this automation
  requests are created by Dagster's daemon; the instance's run queue (`assets/run_queue.py`) marks
  their planned checks "rebuilding in run …; until then: <verdict said before>" as each run is
  submitted, before it is queued (`assets/sync_rebuilding.py`).
"""
from __future__ import annotations

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetSelection,
    AssetsDefinition,
    AssetSpec,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    SourceAsset,
    schedule,
    sensor,
)

from assets.partitions import BenchmarkPartitions
from assets.source_files import file_events, file_source_specs
from assets.versioning import config_events, config_specs, current_versions
from resources.settings import settings_for
from wse_platform.config import Settings
from wse_platform.dagster_private import IMPLICIT_ASSET_JOB_NAME, AssetGraph

# Runs are requested per partition with an asset selection; they go to Dagster's implicit asset
# job, which (unlike an `AssetSelection.all()` target) may hold assets of different partitions.
ASSET_JOB = IMPLICIT_ASSET_JOB_NAME
BACKEND_TAG = "wse/backend"
TRIGGER_TAG = "wse/trigger"
AUTOMATION_SENSOR = "wse_automation"


def _rebuild_trigger() -> AutomationCondition:
    changed_input = AutomationCondition.any_deps_match(
        AutomationCondition.data_version_changed()).with_label("an input's data version changed")
    code_changed = AutomationCondition.code_version_changed().with_label("code version changed")
    newly_missing = AutomationCondition.newly_missing().with_label("newly missing")
    return newly_missing | changed_input | code_changed


def _pending() -> AutomationCondition:
    """This asset partition waits to be rebuilt: its trigger fired and no request handled it yet."""
    return _rebuild_trigger().since_last_handled()


def inputs_settled() -> AutomationCondition:
    """No input is in progress, nor about to be rebuilt itself (its own trigger fired and was not
    handled yet: requested this tick, or waiting for its inputs).

    Without the second half, a table and the re-judge of the cells it reads were requested in the
    same tick once the cells' trajectories were rebuilt (both react to the new trajectories), as
    separate runs (different partitions), and the table run read the old verdicts and failed
    (`TableInputError … re-judge`). `will_be_requested()` does not see this: it only counts
    assets that can run in the same run (same partitions)."""
    # Materializable inputs only: a config or file source is never requested (it is recorded by a
    # sensor), and `llm_calls` is written by the LLM runs (`no_calls_being_added` covers it).
    return ~AutomationCondition.any_deps_match(AutomationCondition.in_progress() | _pending()).allow(
        AssetSelection.all().materializable()).with_label("no input in progress or about to be rebuilt")


def rebuild_condition() -> AutomationCondition:
    """Like Dagster's `eager()`, but a dependency counts as updated only when its data version
    changed (a no-op rebuild upstream triggers nothing), a code change counts too, and a rebuild
    waits until its inputs have settled (`inputs_settled`)."""
    return (
        _pending()
        & ~AutomationCondition.any_deps_missing()
        & inputs_settled()
        & ~AutomationCondition.in_progress()
    ).with_label("rebuild when an input, the code or the config changed")


def no_calls_being_added() -> AutomationCondition:
    """No LLM asset (an upstream of `llm_calls`) is running or about to be requested this tick.

    For what reads the external `llm_calls` table (`llm_usage`): its trigger ("`llm_calls` got a
    new version") is consumed when it is materialized, so if it ran *alongside* an LLM run (e.g.
    a cell's re-audit requested in the same tick as `llm_usage`), the calls that run added after
    `llm_usage` read the table never triggered it again and it stayed out of date. Waiting until
    no LLM asset runs or is about to run closes that race."""
    # Not `will_be_requested()`: it only counts assets that could run in the same run (same
    # partitions), and the LLM cells are partitioned while `llm_usage` is not. An LLM asset whose
    # own trigger fired this tick is about to be requested (or waits on something running).
    busy = AutomationCondition.in_progress() | _rebuild_trigger()
    return (~AutomationCondition.any_deps_match(AutomationCondition.any_deps_match(busy))).with_label(
        "no LLM asset running or about to be requested")


def with_automation(objs: list) -> list:
    """Every materializable asset gets `rebuild_condition()` (checks and external assets unchanged);
    one that reads `llm_calls` also waits for `no_calls_being_added()`."""
    cond = rebuild_condition()
    reads_calls = cond & no_calls_being_added()
    calls = AssetKey("llm_calls")

    def condition(spec):
        return reads_calls if any(d.asset_key == calls for d in spec.deps) else cond

    out = []
    for o in objs:
        if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition) and o.is_materializable:
            o = o.map_asset_specs(lambda spec: spec.replace_attributes(automation_condition=condition(spec)))
        out.append(o)
    return out


def named(items: list[str], most: int = 5) -> str:
    """`a, b, c … and 2 more`: sorted, at most `most` named."""
    items = sorted(items)
    return ", ".join(items[:most]) + (f" … and {len(items) - most} more" if len(items) > most else "")


def recorded_note(events: list) -> str:
    """A `config_observer` tick's line in the UI's tick history. Dagster files a tick that requested
    no run as skipped, and without a reason of ours as "Sensor function returned an empty result",
    even the tick that recorded the edit."""
    keys = [e.asset_key.to_user_string() + (f"[{e.partition}]" if e.partition else "") for e in events]
    return (f"recorded {len(keys)} change{'s' if len(keys) != 1 else ''} (no run to request; `{AUTOMATION_SENSOR}` "
            f"rebuilds what depends on {'them' if len(keys) != 1 else 'it'}): {named(keys)}")


def _judge_models(s: Settings) -> dict[str, str | None]:
    """judge config asset -> the judge model it configures (for the run queue's backend tag)."""
    wj = s.wse.consistency_judge or s.wse.richness_judge
    ra = s.ncp.reaudit_auditors[0].model if s.ncp.reaudit_auditors else None
    return {"wse_judge_config": wj.model if wj else None, "ncp_reaudit_config": ra,
            "endings_judge_config": s.endings.judge,
            "endings_rubric_config": s.endings.rubric.model if s.endings.rubric else None}


class LazyGraph:
    """The asset graph of `objs`, built on first use (sensors and check ops run long after the
    definitions load; a `wse` command that runs neither does not pay for it). Reads like the graph."""

    def __init__(self, objs: list):
        self._objs = [AssetsDefinition(specs=[o]) if isinstance(o, AssetSpec) else o
                      for o in objs if isinstance(o, (AssetsDefinition, AssetSpec, SourceAsset))]
        self._graph: AssetGraph | None = None

    def resolved(self) -> AssetGraph:
        if self._graph is None:  # straight from the assets: no resources needed to know the graph
            self._graph = AssetGraph.from_assets(self._objs)
        return self._graph

    def __getattr__(self, name):
        return getattr(self.resolved(), name)


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
    from wse_platform.dagster_private import extract_data_provenance_from_entry

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


def build_automation(settings: Settings, parts: BenchmarkPartitions, objs: list) -> tuple[list, list, list]:
    config_path = settings.source_file
    graph = LazyGraph(objs)
    specs = config_specs(objs)

    files = file_source_specs(objs)

    def changed_config(instance) -> list:
        s = settings_for(config_path)
        return [ev for spec in specs for ev in config_events(instance, spec, s)] + [
            ev for f in files for ev in file_events(instance, f.key.to_user_string(), f)]

    @sensor(name="config_observer", minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING,
            description="Fingerprints wse.yaml and the prompt files and records a materialization of every config "
                        "asset partition whose fingerprint changed (automation conditions cannot read files), and an "
                        "observation of every input-file source whose files changed; the automation conditions "
                        "then rebuild what depends on them.")
    def config_observer(context: SensorEvaluationContext):
        events = changed_config(context.instance)
        if not events:
            return SkipReason("no configuration or input-file change")
        return SensorResult(asset_events=events, skip_reason=recorded_note(events))

    @schedule(name="rejudge_schedule", job_name=ASSET_JOB, cron_schedule=settings.rejudge_cron,
              default_status=DefaultScheduleStatus.RUNNING,
              description="Nightly sweep: re-judge cells whose verdicts come from an outdated judge configuration "
                          "(compares each cell's provenance with the current fingerprint, which a condition cannot).")
    def rejudge_schedule(context: ScheduleEvaluationContext):
        for ev in changed_config(context.instance):  # runs record the judge version they read: record it first
            context.instance.report_runless_asset_event(ev)
        s = settings_for(config_path)
        requests: list[RunRequest] = []
        for source, judge_model in _judge_models(s).items():
            if not graph.has(AssetKey(source)):
                continue
            fingerprint = current_versions(source, s, parts)[None]
            requests += rejudge_requests(context.instance, graph, source, fingerprint, _backend(s, judge_model))
        return requests or SkipReason("all verdicts use the current judge configuration")

    automation = AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR, target=AssetSelection.all(), default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30, emit_backfills=False, run_tags={TRIGGER_TAG: "automation"},
        description="Evaluates every asset's automation condition: rebuilds what a changed config, code version "
                    "or input data version made out of date, exactly what `wse materialize --stale` would run.")
    return [config_observer, automation], [rejudge_schedule], []
