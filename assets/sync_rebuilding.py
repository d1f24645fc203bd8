"""`in_sync` while a run rebuilds: the verdict stays visible from the moment the run is created.

When a run is created, Dagster stores a *planned* evaluation of every check the run will execute
(`AssetCheckEvaluationPlanned`, one row per check, newer than any evaluation before it). The UI and
its GraphQL (`executionForLatestMaterialization`: the check's latest row, by id) show that row as
"Running" with no text until the run evaluates the check, hiding the verdict said before — e.g. the
`sync_status` sensor's "stale … (wse-gen › horizon: 2 → 3)" on an asset the run is about to rebuild.

`say_rebuilding` says that verdict again, right after the planned rows exist, as the run's evaluation
of the asset's newest materialization (in the planned row itself, so the newest row, and one the UI
counts as describing the newest materialization): "rebuilding in run <id>; until then: <verdict>". Said by
- whatever creates the run where it is ours: `wse materialize` (`saying_rebuilding` wraps the
  instance's run creation in `runner.run_in_location`);
- the run itself, before its first step (`in_process_saying`: the project's executor, Dagster's
  in-process one preceded by `say_rebuilding`), for a run no one said it for yet;
- the instance's run queue (`assets/run_queue.py`, `mark_submitted`), for the runs Dagster's daemon
  creates (the automation's and sensors' requests, backfills, the UI's "Materialize"): when the run is
  submitted, right after Dagster created it and its planned rows, before it is queued, the verdicts
  said before are copied (nothing computed);
- the `sync_rebuilding` run-status sensor (every 5 s, on runs entering the queue), computed then: a
  verdict that changed since it was said (the run may exist because of that change), and every run's
  under a user's own `dagster.yaml` (no run queue of ours).
The step that builds the asset then reports its own verdict on what it wrote (`assets/sync.py`
`with_own_check`), which supersedes this one. The mark is the run's own evaluation (`in_run`: it fills
the run's planned row), not a runless row: the UI shows a run's row also once the run has written the
asset, so the step's new materialization is never without an evaluation until its hook has said the
verdict on it (a runless mark describes the materialization before, which the UI then hides: a blank
check for the seconds the hook takes). The run's data checks (`mark_data_checks`) show their verdict
said before, marked, until the run evaluates them in the same row; one never evaluated before says "first
evaluation in run …; not evaluated yet" (a warning, never a pass), likewise replaced by the run's result. After a run failed or was canceled, the
`sync_rebuild_failed` / `sync_rebuild_canceled` sensors say the verdict again, unmarked, on the assets
it did not rebuild (`unmark_ended`, and `unmark_data_checks` for the data checks). The `sync_status`
sensor takes a marked verdict for the same one, and says a changed one on an asset whose check a run
in flight has planned as that run's mark.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetCheckSeverity, AssetKey, AssetRecordsFilter,
                     DagsterEvent, DagsterEventType, DagsterRun, DagsterRunStatus, DefaultSensorStatus, Executor,
                     ExecutorDefinition, RunStatusSensorContext, executor, in_process_executor, run_status_sensor)

from assets.automation import LazyGraph
from assets.sync import IN_SYNC, PARTITION_TAG, _evaluation, status_by_asset, verdict
from wse_platform.dagster_private import (AssetCheckEvaluationTargetMaterializationData, AssetGraph, check_history,
                                          latest_check_executions, latest_materialization_heads)

SENSOR = "sync_rebuilding"
RUN_ID_SHOWN = 8  # the UI shows a run's id by its first 8 characters
MARK, UNTIL = "rebuilding in run ", "; until then: "
log = logging.getLogger(__name__)


def rebuilding_text(run_id: str, description: str) -> str:
    return f"{MARK}{run_id[:RUN_ID_SHOWN]}{UNTIL}{description}"


MARK_KEY = "rebuilding_in_run"   # the metadata entry of a marked verdict: the run's id


def marked(run_id: str, passed: bool, description: str, meta) -> tuple:
    """(passed, description, metadata) of a verdict marked as being rebuilt by run `run_id`."""
    return passed, rebuilding_text(run_id, description), {**unmarked_meta(meta), MARK_KEY: run_id}


def unmarked_meta(meta) -> dict:
    """A verdict's metadata without an earlier run's mark."""
    return {k: v for k, v in meta.items() if k != MARK_KEY}


def _run_check_keys(run: DagsterRun) -> list[AssetCheckKey]:
    """The run's `in_sync` checks: its check selection, else those of its selected assets."""
    if run.asset_check_selection is not None:
        keys = [k for k in run.asset_check_selection if k.name == IN_SYNC]
    else:
        keys = [AssetCheckKey(k, IN_SYNC) for k in (run.asset_selection or ())]
    return sorted(keys, key=lambda k: k.asset_key.to_user_string())


def planned_by(instance, run: DagsterRun, marked_too: bool = False) -> dict[AssetKey, AssetCheckEvaluation | None]:
    """The assets whose latest `in_sync` row is this run's planned evaluation (-> None) and, with
    `marked_too`, those where it is this run's "rebuilding" mark (-> that evaluation). One query."""
    keys = _run_check_keys(run)
    latest = latest_check_executions(instance, keys) if keys else {}
    mark = rebuilding_text(run.run_id, "")
    out: dict[AssetKey, AssetCheckEvaluation | None] = {}
    for k, rec in latest.items():
        if rec.run_id != run.run_id:
            continue
        ev = rec.evaluation
        if not isinstance(ev, AssetCheckEvaluation):
            out[k.asset_key] = None
        elif marked_too and (ev.description or "").startswith(mark):
            out[k.asset_key] = ev
    return out


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
            return ev.passed, unmarked(ev.description or ""), unmarked_meta(ev.metadata)
    return None


def in_run(instance, run: DagsterRun, ev: AssetCheckEvaluation) -> None:
    """Record `ev` as run `run`'s evaluation of the check: Dagster stores it in the row the run's plan
    inserted (the same row the run's own result later fills), not in a new runless row. The UI keeps
    showing a run's row once the run has written the asset (it describes "the latest materialization"
    when that comes from the same run), so no moment exists between a step's materialization and the
    verdict on it (its hook, its check step) where the asset's newest materialization has no
    evaluation; a runless row of the materialization before would be hidden from that moment."""
    instance.report_dagster_event(DagsterEvent(DagsterEventType.ASSET_CHECK_EVALUATION.value,
                                               job_name=run.job_name, event_specific_data=ev), run_id=run.run_id)


def say_rebuilding(graph: Callable[[], AssetGraph], instance, run: DagsterRun,
                   compute: bool = True, missing: bool = True, again: bool = False) -> list[AssetCheckEvaluation]:
    """Report, for each asset whose `in_sync` the run's plan has hidden behind a planned row, the
    verdict on its newest materialization, marked as being rebuilt by the run, as the run's own
    evaluation (`in_run`): computed now (`compute`: the run may exist because something changed
    since the verdict was said), else the verdict said before on that materialization (copied: two
    queries and one per asset), computed only where none was (`missing=False`: left planned, nothing
    computed). An asset never built has no verdict to hide (none said). `again` (with `compute`):
    also the assets already showing this run's mark (copied when the run was submitted), reported
    only where the verdict computed now differs. The run's data checks get theirs too
    (`mark_data_checks`). Returns the `in_sync` evaluations reported."""
    hidden = planned_by(instance, run, marked_too=again and compute)
    built = latest_materialization_heads(instance, list(hidden)) if hidden else {}
    events = []
    if built:
        order = sorted(built, key=lambda k: k.to_user_string())
        judged = {} if compute else {k: j for k in order if (j := _said_before(instance, k, built[k].storage_id))}
        todo = [k for k in order if k not in judged] if compute or missing else []
        rows = status_by_asset(graph(), instance, assets=todo) if todo else {}
        for key in order:
            if key in judged:
                passed, description, meta = judged[key]
            elif key in todo:
                passed, description, meta = verdict(rows.get(key.to_user_string(), []))
            else:
                continue  # no verdict said on the newest materialization, none computed: left planned
            shown = hidden[key]
            if (shown is not None and shown.passed == passed and unmarked(shown.description or "") == description
                    and shown.target_materialization_data is not None
                    and shown.target_materialization_data.storage_id == built[key].storage_id):
                continue  # marked with this verdict already
            events.append(_evaluation(key, built[key], marked(run.run_id, passed, description, meta)))
        # a step of the run may be writing one of them meanwhile: its row is the run's, so its
        # result (and the step's hook, a newer row) supersede this one whatever the order
        for ev in events:
            in_run(instance, run, ev)
    mark_data_checks(graph, instance, run)
    return events


def mark_submitted(instance, run: DagsterRun, graph: Callable[[], AssetGraph]) -> list[AssetCheckEvaluation]:
    """When a run Dagster created (a sensor's or the automation's request, a backfill, the UI) is
    submitted to the queue (`assets/run_queue.py`): its planned rows get the verdicts said before,
    copied and marked; nothing is computed (`graph` may be the workspace's remote graph: it is only
    asked for the check keys of the run's assets). An asset with no verdict on its newest
    materialization stays planned until the `sync_rebuilding` sensor's tick computes one."""
    return say_rebuilding(graph, instance, run, compute=False, missing=False)


def _data_check_keys(graph: Callable[[], AssetGraph], run: DagsterRun) -> list[AssetCheckKey]:
    """The run's checks other than `in_sync`: its check selection, else those of its selected assets."""
    if run.asset_check_selection is not None:
        keys = run.asset_check_selection
    else:
        assets = set(run.asset_selection or ())
        keys = [k for k in graph().asset_check_keys if k.asset_key in assets] if assets else []
    return sorted((k for k in keys if k.name != IN_SYNC), key=lambda k: (k.asset_key.to_user_string(), k.name))


def _run_rows(instance, run: DagsterRun, keys: Sequence[AssetCheckKey]):
    """(check key, the run's row, the latest evaluated row of the same check and partition before it,
    None when the check was never evaluated on that partition) for each check of `keys` the run planned
    (partitioned checks: the run's partition)."""
    partition = run.tags.get(PARTITION_TAG)
    for key in keys:
        mine = before = None
        for part in dict.fromkeys((partition, None)):  # a run's unpartitioned checks have no partition
            limit = 4
            while True:
                recs = check_history(instance, key, part, limit=limit)
                mine = next((r for r in recs if r.run_id == run.run_id), None)
                if mine is None:
                    break
                before = next((r for r in recs if r.id < mine.id and _is_verdict(r.evaluation)), None)
                if before is not None or len(recs) < limit or limit >= _HISTORY_LIMIT:
                    break  # found, or every row of the check seen: never evaluated before
                limit = _HISTORY_LIMIT  # planned rows of other runs in front of it: look further back
            if mine is not None:
                break
        if mine is not None:
            yield key, mine, before


_HISTORY_LIMIT = 1000  # rows of one check read to tell "never evaluated" (beyond it: said as not evaluated yet)
FIRST = "first evaluation in run "  # a data check with no verdict before: its text until the run evaluates it
NO_VERDICT_KEY = "not_evaluated"  # metadata of such a row (and of what a failed run leaves of it): no verdict


def _is_verdict(ev) -> bool:
    """An evaluation that says a verdict (not a planned row, not a "not evaluated yet" row)."""
    return isinstance(ev, AssetCheckEvaluation) and NO_VERDICT_KEY not in ev.metadata


def first_text(run_id: str) -> str:
    return f"{FIRST}{run_id[:RUN_ID_SHOWN]}; not evaluated yet"


def _newest_record(instance, key: AssetCheckKey, partition: str | None):
    """The newest materialization record of `key`'s asset (of `partition`), or None."""
    res = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key.asset_key, asset_partitions=[partition] if partition else None), limit=1)
    return res.records[0] if res.records else None


def _newest_target(instance, key: AssetCheckKey, partition: str | None):
    """The materialization a check of `key`'s asset describes now (its newest, of `partition`), or None."""
    rec = _newest_record(instance, key, partition)
    if rec is None:
        return None
    return AssetCheckEvaluationTargetMaterializationData(storage_id=rec.storage_id, run_id=rec.run_id,
                                                         timestamp=rec.timestamp)


def _bare_verdict(ev: AssetCheckEvaluation) -> str:
    """What a verdict said with no text ("until then: " must not end in nothing)."""
    return "passed" if ev.passed else f"failed ({ev.severity.value.lower()})"


def mark_data_checks(graph: Callable[[], AssetGraph], instance, run: DagsterRun) -> int:
    """The run's data checks (the other asset checks: the checks kit's, the specs' and corpora's) show
    the verdict said before on the same partition, marked "rebuilding in run …; until then: …", instead
    of the planned row's "Running" with no text: copied into the run's row (`in_run`; the check's own
    result replaces it in the same row when the run evaluates it). A check never evaluated before on
    that partition says so instead of Dagster's "Running" with no text: "first evaluation in run …; not
    evaluated yet", a warning (never a pass: nothing was examined), describing the asset's newest
    materialization so that the UI shows it; the run's result replaces it in the same row. Returns how
    many were marked."""
    n = 0
    targets: dict = {}  # (asset, partition) -> its newest materialization: one read for all its checks

    def target(key: AssetCheckKey, partition: str | None):
        if (key.asset_key, partition) not in targets:
            targets[key.asset_key, partition] = _newest_target(instance, key, partition)
        return targets[key.asset_key, partition]

    for key, mine, before in _run_rows(instance, run, _data_check_keys(graph, run)):
        if isinstance(mine.evaluation, AssetCheckEvaluation):
            continue  # evaluated (or marked) already
        if before is None:  # nothing said before: say that it is not evaluated yet
            in_run(instance, run, AssetCheckEvaluation(
                asset_key=key.asset_key, check_name=key.name, passed=False, severity=AssetCheckSeverity.WARN,
                description=first_text(run.run_id), metadata={MARK_KEY: run.run_id, NO_VERDICT_KEY: True},
                target_materialization_data=target(key, mine.partition), partition=mine.partition))
            n += 1
            continue
        ev = before.evaluation
        passed, description, meta = marked(run.run_id, ev.passed, unmarked(ev.description or "") or _bare_verdict(ev),
                                           ev.metadata)
        in_run(instance, run, AssetCheckEvaluation(
            asset_key=ev.asset_key, check_name=ev.check_name, passed=passed, severity=ev.severity,
            description=description, metadata=meta,
            target_materialization_data=ev.target_materialization_data, partition=mine.partition))
        n += 1
    return n


def unmark_data_checks(graph: Callable[[], AssetGraph], instance, run: DagsterRun, word: str) -> int:
    """After run `run` failed or was canceled: its data checks still showing its mark say so in the
    run's row: the verdict said before, unmarked, where the run did not rebuild the asset (partition);
    where it did, that the check was not evaluated on what the run wrote (a warning: a check that
    examined nothing does not pass). Returns how many rows were rewritten."""
    mark, first = rebuilding_text(run.run_id, ""), first_text(run.run_id)
    n = 0
    for key, mine, _ in _run_rows(instance, run, _data_check_keys(graph, run)):
        ev = mine.evaluation
        if not isinstance(ev, AssetCheckEvaluation) or not ((ev.description or "").startswith(mark)
                                                            or ev.description == first):
            continue
        never = ev.description == first  # never evaluated before on this partition
        before = "none (never evaluated)" if never else unmarked(ev.description or "")
        newest = _newest_record(instance, key, mine.partition)
        rebuilt = newest is not None and newest.run_id == run.run_id
        meta = unmarked_meta(ev.metadata)
        passed, severity, text = ev.passed, ev.severity, before
        if never and not rebuilt:
            text = f"not evaluated: run {run.run_id[:RUN_ID_SHOWN]} {word} before this check ran; it has no verdict yet"
        elif rebuilt:
            passed, severity = False, AssetCheckSeverity.WARN
            text = (f"not evaluated: run {run.run_id[:RUN_ID_SHOWN]} {word} before this check ran on what it wrote; "
                    f"the verdict on the materialization before: {before}")
        in_run(instance, run, AssetCheckEvaluation(
            asset_key=ev.asset_key, check_name=ev.check_name, passed=passed, severity=severity, description=text,
            metadata=meta, target_materialization_data=ev.target_materialization_data, partition=mine.partition))
        n += 1
    return n


def _say_safely(graph: Callable[[], AssetGraph], instance, run: DagsterRun, compute: bool) -> list:
    """`say_rebuilding` before the run executes (its creator, its executor)."""
    try:
        return say_rebuilding(graph, instance, run, compute)
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
        from wse_platform.procs import freeze_long_lived
        freeze_long_lived()  # the run's process has loaded the code: left out of the collector's scans
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
    built = latest_materialization_heads(instance, marked) if marked else {}
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
        n = unmark_data_checks(graph.resolved, context.instance, context.dagster_run, word)
        context.log.info(f"run {context.dagster_run.run_id[:RUN_ID_SHOWN]} {word}: `{IN_SYNC}` said again on "
                         f"{len(events)} assets it did not rebuild; {n} data checks unmarked")
    return ended


def build_sensor(graph) -> object:
    """`sync_rebuilding`: for each run entering the queue (created by Dagster's daemon: the
    automation's requests, backfills, the UI), `say_rebuilding` computed now — within seconds of the
    creation, not at the `sync_status` sensor's next tick (30 s) or the run's first step. The run
    queue (`assets/run_queue.py`) has marked the run's rows with the verdicts said before when it
    queued the run; this says a verdict that changed since (`again`), and the ones it could not copy."""
    @run_status_sensor(run_status=DagsterRunStatus.QUEUED, name=SENSOR, minimum_interval_seconds=5,
                       default_status=DefaultSensorStatus.RUNNING,
                       description="Keeps the `in_sync` verdict visible on the assets a queued run will rebuild "
                                   "(Dagster shows the run's planned check as \"Running\" with no text).")
    def sync_rebuilding(context: RunStatusSensorContext):
        # nothing returned: a tick may see several runs, and one tick takes one skip reason at most
        events = say_rebuilding(graph.resolved, context.instance, context.dagster_run, again=True)
        context.log.info(f"run {context.dagster_run.run_id[:RUN_ID_SHOWN]}: reported `{IN_SYNC}` of "
                         f"{len(events)} assets it rebuilds (computed now; unchanged ones not said again)")
    return sync_rebuilding
