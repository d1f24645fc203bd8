"""`in_sync` while a run rebuilds: the verdict stays visible from the moment the run is created.

When a run is created, Dagster stores a *planned* evaluation of every check the run will execute
(`AssetCheckEvaluationPlanned`, one row per check, newer than any evaluation before it). The UI and
its GraphQL (`executionForLatestMaterialization`: the check's latest row, by id) show that row as
"Running" with no text until the run evaluates the check, hiding the verdict said before — e.g. the
`sync_status` sensor's "stale … (wse-gen › horizon: 2 → 3)" on an asset the run is about to rebuild.

`say_rebuilding` says that verdict again, right after the planned rows exist, as a runless evaluation
of the asset's newest materialization (so the newest row, and one the UI counts as describing the
newest materialization): "rebuilding in run <id>; until then: <verdict>". Said by
- whatever creates the run where it is ours: `wse materialize` (`saying_rebuilding` wraps the
  instance's run creation in `runner.run_in_location`);
- the run itself, before its first step (`in_process_saying`: the project's executor, Dagster's
  in-process one preceded by `say_rebuilding`), for a run no one said it for yet;
- the `sync_rebuilding` run-status sensor (every 5 s, on runs entering the queue: the automation's,
  backfills', the UI's "Materialize"), for the runs Dagster's daemon creates from a sensor's request.
The step that builds the asset then reports its own verdict on what it wrote (`assets/sync.py`
`with_own_check`), which supersedes this one; after a run failed or was canceled, the
`sync_rebuild_failed` / `sync_rebuild_canceled` sensors say the verdict again, unmarked, on the assets
it did not rebuild (`unmark_ended`). The `sync_status` sensor takes a marked verdict for the same one.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetKey, DagsterRun, DagsterRunStatus,
                     DefaultSensorStatus, Executor, ExecutorDefinition, RunStatusSensorContext, executor,
                     in_process_executor, run_status_sensor)

from assets.automation import LazyGraph
from assets.sync import IN_SYNC, _evaluation, status_by_asset, verdict
from wse_platform.dagster_private import AssetGraph, latest_check_executions

SENSOR = "sync_rebuilding"
RUN_ID_SHOWN = 8  # the UI shows a run's id by its first 8 characters
MARK, UNTIL = "rebuilding in run ", "; until then: "
log = logging.getLogger(__name__)


def rebuilding_text(run_id: str, description: str) -> str:
    return f"{MARK}{run_id[:RUN_ID_SHOWN]}{UNTIL}{description}"


def _run_check_keys(run: DagsterRun) -> list[AssetCheckKey]:
    """The run's `in_sync` checks: its check selection, else those of its selected assets."""
    if run.asset_check_selection is not None:
        keys = [k for k in run.asset_check_selection if k.name == IN_SYNC]
    else:
        keys = [AssetCheckKey(k, IN_SYNC) for k in (run.asset_selection or ())]
    return sorted(keys, key=lambda k: k.asset_key.to_user_string())


def planned_by(instance, run: DagsterRun) -> list[AssetKey]:
    """The assets whose latest `in_sync` row is this run's planned evaluation (one query)."""
    keys = _run_check_keys(run)
    latest = latest_check_executions(instance, keys) if keys else {}
    return [k.asset_key for k, rec in latest.items()
            if rec.run_id == run.run_id and not isinstance(rec.evaluation, AssetCheckEvaluation)]


def _newest(instance, keys: Sequence[AssetKey]) -> dict[AssetKey, object]:
    return {r.asset_entry.asset_key: r.asset_entry.last_materialization_record
            for r in instance.get_asset_records(list(keys)) if r.asset_entry.last_materialization_record is not None}


def unmarked(description: str) -> str:
    """A verdict's text without an earlier run's "rebuilding in run …; until then: " mark."""
    if description.startswith(MARK) and UNTIL in description:
        return description.split(UNTIL, 1)[1]
    return description


def _said_before(instance, key: AssetKey, storage_id: int) -> tuple | None:
    """(passed, description, metadata) of the latest `in_sync` evaluation behind the planned rows, if
    it describes materialization `storage_id` (the newest)."""
    for rec in instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(key, IN_SYNC), limit=5):
        ev = rec.evaluation
        if isinstance(ev, AssetCheckEvaluation):
            target = ev.target_materialization_data
            if target is None or target.storage_id != storage_id:
                return None
            meta = {k: v for k, v in ev.metadata.items() if k != "rebuilding_in_run"}
            return ev.passed, unmarked(ev.description or ""), meta
    return None


def say_rebuilding(graph: Callable[[], AssetGraph], instance, run: DagsterRun,
                   compute: bool = True, racing: bool = True) -> list[AssetCheckEvaluation]:
    """Report, for each asset whose `in_sync` the run's plan has hidden behind a planned row, the
    verdict on its newest materialization, marked as being rebuilt by the run: computed now
    (`compute`: the run may exist because something changed since the verdict was said), else the
    verdict said before on that materialization (copied: two queries and one per asset), computed
    only where none was. An asset never built has no verdict to hide (none said). `racing`: the run
    may be executing meanwhile (said from another process).
    Returns the evaluations reported."""
    hidden = planned_by(instance, run)
    built = _newest(instance, hidden) if hidden else {}
    if not built:
        return []
    order = sorted(built, key=lambda k: k.to_user_string())
    judged = {} if compute else {k: j for k in order if (j := _said_before(instance, k, built[k].storage_id))}
    todo = [k for k in order if k not in judged]
    rows = status_by_asset(graph(), instance, assets=todo) if todo else {}
    events = []
    for key in order:
        passed, description, meta = judged.get(key) or verdict(rows.get(key.to_user_string(), []))
        events.append(_evaluation(key, built[key], (passed, rebuilding_text(run.run_id, description),
                                                    {**meta, "rebuilding_in_run": run.run_id})))
    # a step of the run may have written one of them meanwhile (its hook said the verdict on that):
    # the evaluation of an older materialization would hide it
    if racing:
        now = _newest(instance, order)
        events = [ev for ev in events if getattr(now.get(ev.asset_key), "storage_id", None)
                  == ev.target_materialization_data.storage_id]
    for ev in events:
        instance.report_runless_asset_event(ev)
    return events


def _say_safely(graph: Callable[[], AssetGraph], instance, run: DagsterRun, compute: bool) -> list:
    """`say_rebuilding` before the run executes (its creator, its executor)."""
    try:
        return say_rebuilding(graph, instance, run, compute, racing=False)
    except Exception as exc:  # noqa: BLE001 - the UI's note must not stop the build
        log.warning("could not report `in_sync` of the assets run %s rebuilds: %s: %s",
                    run.run_id, type(exc).__name__, exc)
        return []


def saying_rebuilding(create: Callable, graph: Callable[[], AssetGraph], instance) -> Callable:
    """`create` (an instance's `create_run_for_job`) followed by `say_rebuilding` of the run it
    created, copying the verdicts said on the newest materializations (`wse materialize` runs one run
    after another, each run's `sync_checks` saying what changed elsewhere; cheap per cell run). A
    failure to say it is logged, never fails the run."""
    def create_run_for_job(*args, **kwargs):
        run = create(*args, **kwargs)
        _say_safely(graph, instance, run, compute=False)
        return run
    return create_run_for_job


class _SayingFirst(Executor):
    """An executor that says `say_rebuilding` before the steps `inner` executes."""

    def __init__(self, inner: Executor, graph: LazyGraph):
        self._inner, self._graph = inner, graph

    def execute(self, plan_context, execution_plan):
        _say_safely(self._graph.resolved, plan_context.instance, plan_context.dagster_run, compute=True)
        yield from self._inner.execute(plan_context, execution_plan)

    @property
    def retries(self):
        return self._inner.retries

    @property
    def step_dependency_config(self):
        return self._inner.step_dependency_config


def in_process_saying(objs: list) -> ExecutorDefinition:
    """Dagster's in-process executor (same name and config), which first says `in_sync` of the assets
    the run rebuilds where its planned checks hide it: in the run's process, before resources and
    steps (the daemon's runs are queued, then a process loads the code: seconds to tens of seconds)."""
    graph = LazyGraph(objs)

    @executor(name=in_process_executor.name, config_schema=in_process_executor.config_schema)
    def in_process(init_context):
        return _SayingFirst(in_process_executor.executor_creation_fn(init_context), graph)
    return in_process


def unmark_ended(graph: Callable[[], AssetGraph], instance, run: DagsterRun) -> list[AssetCheckEvaluation]:
    """After run `run` failed or was canceled: the assets still showing its "rebuilding in run" mark
    (their steps never ran, or failed) get the verdict on their newest materialization, computed now,
    unmarked. Returns the evaluations reported."""
    keys = _run_check_keys(run)
    mark = rebuilding_text(run.run_id, "")
    latest = latest_check_executions(instance, keys) if keys else {}
    marked = [k.asset_key for k, rec in latest.items()
              if isinstance(rec.evaluation, AssetCheckEvaluation) and (rec.evaluation.description or "").startswith(mark)]
    built = _newest(instance, marked) if marked else {}
    if not built:
        return []
    order = sorted(built, key=lambda k: k.to_user_string())
    rows = status_by_asset(graph(), instance, assets=order)
    events = [_evaluation(k, built[k], verdict(rows.get(k.to_user_string(), []))) for k in order]
    for ev in events:
        instance.report_runless_asset_event(ev)
    return events


def build_sensors(graph) -> list:
    """`sync_rebuilding` (runs entering the queue: `say_rebuilding`) and `sync_rebuild_failed` /
    `sync_rebuild_canceled` (`unmark_ended`)."""
    ended = [_ended_sensor(graph, status) for status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)]
    return [build_sensor(graph), *ended]


def _ended_sensor(graph, status: DagsterRunStatus):
    word = {DagsterRunStatus.FAILURE: "failed", DagsterRunStatus.CANCELED: "canceled"}[status]

    @run_status_sensor(run_status=status, name=f"sync_rebuild_{word}", minimum_interval_seconds=15,
                       default_status=DefaultSensorStatus.RUNNING,
                       description=f"After a run {word}: the assets it did not rebuild no longer say \"rebuilding in "
                                   "run …\" in their `in_sync` check (the verdict is said again, computed then).")
    def ended(context: RunStatusSensorContext):
        events = unmark_ended(graph.resolved, context.instance, context.dagster_run)
        context.log.info(f"run {context.dagster_run.run_id[:RUN_ID_SHOWN]} {word}: `{IN_SYNC}` said again on "
                         f"{len(events)} assets it did not rebuild")
    return ended


def build_sensor(graph) -> object:
    """`sync_rebuilding`: for each run entering the queue (created by Dagster's daemon: the
    automation's requests, backfills, the UI), `say_rebuilding` — within seconds of the creation,
    not at the `sync_status` sensor's next tick (30 s) or the run's first step."""
    @run_status_sensor(run_status=DagsterRunStatus.QUEUED, name=SENSOR, minimum_interval_seconds=5,
                       default_status=DefaultSensorStatus.RUNNING,
                       description="Keeps the `in_sync` verdict visible on the assets a queued run will rebuild "
                                   "(Dagster shows the run's planned check as \"Running\" with no text).")
    def sync_rebuilding(context: RunStatusSensorContext):
        # nothing returned: a tick may see several runs, and one tick takes one skip reason at most
        events = say_rebuilding(graph.resolved, context.instance, context.dagster_run)
        context.log.info(f"run {context.dagster_run.run_id[:RUN_ID_SHOWN]}: reported `{IN_SYNC}` of "
                         f"{len(events)} assets it rebuilds")
    return sync_rebuilding
