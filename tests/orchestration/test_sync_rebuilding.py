"""Issue 21, "true while it rebuilds": from the moment a run is created, an asset it rebuilds shows
its `in_sync` verdict (e.g. stale, naming why) marked as being rebuilt by the run, not the run's
planned evaluation ("Running", no text). Read as the UI's GraphQL does
(`executionForLatestMaterialization`): the check's latest execution row, shown only when it describes
the newest materialization. A synthetic graph (no LLM) on an in-memory instance."""
from __future__ import annotations

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetKey, DagsterEvent, DagsterEventType, DagsterInstance,
                     build_run_status_sensor_context)

from assets.sync import IN_SYNC, sync_events
from assets.sync_rebuilding import SENSOR
from tests.orchestration.test_sync_own_step import NAMES, _describes_newest, _latest, _run, _setup
from wse_platform.runner import RunPlanStep, run_in_location


def _shown(instance, name: str) -> tuple[str, str] | None:
    """(status, text) the UI shows for `name`'s `in_sync`: the latest row if it is an evaluation of
    the newest materialization; ("RUNNING", "") for a run's planned row (no text)."""
    rec = _latest(instance, name)
    if rec is None:
        return None
    if not isinstance(rec.evaluation, AssetCheckEvaluation):
        return ("RUNNING", "")
    if not _describes_newest(instance, name):
        return None
    return ("PASSED" if rec.evaluation.passed else "FAILED", rec.evaluation.description or "")


def _stale_verdicts(during):
    """cell → verdicts → table built, then the cell rebuilt with a new output and the sensor's tick
    said so: verdicts and table show "stale"."""
    defs, version = _setup(during)
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, *NAMES)
    version["cell"] = "b"
    _run(defs, instance, "cell")
    for ev in sync_events(defs.resolve_asset_graph(), instance, {})[0]:
        instance.report_runless_asset_event(ev)
    status, text = _shown(instance, "verdicts")
    assert status == "FAILED" and "stale" in text
    return defs, instance


def test_a_cli_run_shows_the_stale_verdict_of_what_it_rebuilds_from_its_creation():
    seen = {}

    def during(context, graph):  # the run's first step, before it writes anything
        if "on" in seen:
            seen["verdicts"] = _shown(context.instance, "verdicts")
            seen["table"] = _shown(context.instance, "table")
            seen["run"] = context.run.run_id

    defs, instance = _stale_verdicts(during)
    seen["on"] = True
    result = run_in_location(defs, RunPlanStep([AssetKey("verdicts"), AssetKey("table")], None), instance, {})
    assert result.success
    for name in ("verdicts", "table"):  # main: ("RUNNING", "") until each step's hook
        status, text = seen[name]
        assert status == "FAILED", (name, seen[name])
        assert text.startswith(f"rebuilding in run {seen['run'][:8]}; until then: ") and "stale" in text, text
    for name in ("verdicts", "table"):  # then the rebuild's own verdict supersedes it
        assert _shown(instance, name)[0] == "PASSED", name


def test_the_queued_run_sensor_says_the_verdict_of_a_run_created_elsewhere():
    defs, instance = _stale_verdicts(lambda context, graph: None)
    job = defs.resolve_implicit_global_asset_job_def()
    keys = {AssetKey("verdicts"), AssetKey("table")}
    # as Dagster's daemon creates a run from a sensor's request: its planned checks, nothing executed
    run = instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=frozenset(keys))
    assert _shown(instance, "verdicts") == ("RUNNING", "")  # what the UI shows on main until the first step
    [sensor] = [s for s in defs.sensors if s.name == SENSOR]
    event = DagsterEvent(DagsterEventType.RUN_ENQUEUED.value, job_name=run.job_name)
    sensor(build_run_status_sensor_context(SENSOR, event, instance, run))
    for name in ("verdicts", "table"):
        status, text = _shown(instance, name)
        assert status == "FAILED" and text.startswith(f"rebuilding in run {run.run_id[:8]}; until then: "), text
        assert "stale" in text
    # the `sync_status` sensor's next tick does not say the same verdict again without the mark
    assert sync_events(defs.resolve_asset_graph(), instance, {})[0] == []
    n = len(instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(AssetKey("table"), IN_SYNC),
                                                                          limit=50))
    sensor(build_run_status_sensor_context(SENSOR, event, instance, run))  # said once per run
    assert len(instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey("table"), IN_SYNC), limit=50)) == n


_SEEN: dict = {}


def _record(context, graph):
    if "on" in _SEEN:
        _SEEN["verdicts"] = _shown(context.instance, "verdicts")
        _SEEN["run"] = context.run.run_id


def _defs_with_executor():
    """The synthetic graph with the project's executor (`in_process_saying`), rebuilt identically in
    the run's process (a reconstructable job)."""
    from dagster import Definitions, define_asset_job

    from assets.sync_rebuilding import in_process_saying
    defs, version = _setup(_record)
    objs = [*defs.assets, *defs.asset_checks]
    return Definitions(assets=defs.assets, asset_checks=defs.asset_checks, sensors=defs.sensors,
                       jobs=[define_asset_job("everything")], executor=in_process_saying(objs)), version


def _asset_job():
    return _defs_with_executor()[0].resolve_job_def("everything")


def test_a_run_nobody_said_it_for_says_the_verdict_before_its_first_step():
    """A run created by a daemon and started before the sensor's tick: the project's executor says it."""
    from dagster import execute_job, reconstructable

    defs, instance = _stale_verdicts(_record)
    _SEEN.clear()
    _SEEN["on"] = True
    with execute_job(reconstructable(_asset_job), instance, asset_selection=[AssetKey("verdicts"), AssetKey("table")],
                     run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}}) as result:
        assert result.success
    status, text = _SEEN["verdicts"]  # main: ("RUNNING", "")
    assert status == "FAILED" and text.startswith(f"rebuilding in run {_SEEN['run'][:8]}; until then: "), text
    assert _shown(instance, "verdicts")[0] == "PASSED"


def test_a_second_run_copies_the_verdict_once_marked(monkeypatch):
    """`wse materialize` copies the verdict said on the newest materialization (no status computed);
    a verdict marked by an earlier run that never built the asset is not marked twice."""
    import assets.sync_rebuilding as rebuilding

    defs, instance = _stale_verdicts(lambda context, graph: None)
    job = defs.resolve_implicit_global_asset_job_def()
    keys = {AssetKey("table")}

    def no_status(*args, **kwargs):
        raise AssertionError("computed, not copied")
    monkeypatch.setattr(rebuilding, "status_by_asset", no_status)
    for _ in range(2):
        run = instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=frozenset(keys))
        [ev] = rebuilding.say_rebuilding(defs.resolve_asset_graph, instance, run, compute=False)
        assert ev.description.count("rebuilding in run") == 1 and run.run_id[:8] in ev.description
        assert not ev.passed and "stale" in ev.description


def test_after_a_failed_run_the_assets_it_did_not_rebuild_lose_the_mark():
    state = {}

    def during(context, graph):
        if state.get("fail"):
            raise RuntimeError("the re-judge failed")

    defs, instance = _stale_verdicts(during)
    state["fail"] = True
    result = run_in_location(defs, RunPlanStep([AssetKey("verdicts"), AssetKey("table")], None), instance, {})
    assert not result.success
    assert _shown(instance, "table")[1].startswith("rebuilding in run ")  # until the sensor's tick
    [sensor] = [s for s in defs.sensors if s.name == "sync_rebuild_failed"]
    run = instance.get_run_by_id(result.run_id)
    sensor(build_run_status_sensor_context("sync_rebuild_failed",
                                           DagsterEvent(DagsterEventType.RUN_FAILURE.value, job_name=run.job_name),
                                           instance, run))
    for name in ("verdicts", "table"):
        status, text = _shown(instance, name)
        assert status == "FAILED" and "stale" in text and "rebuilding" not in text, (name, text)


def test_the_queued_run_sensor_says_a_verdict_that_changed_since_the_run_queue_copied_it():
    """The run queue copies the verdict said before (`mark_submitted`, nothing computed); the run may
    exist because something changed since: the sensor's tick computes it and says the new one in the
    run's row, and says nothing when it is the same."""
    from dagster import AssetMaterialization

    from assets.sync_rebuilding import mark_submitted
    from wse_platform.dagster_private import DATA_VERSION_TAG

    defs, _ = _setup(lambda context, graph: None)
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, *NAMES)
    # a new version of the cell recorded without a run (as `config_observer` records a config edit),
    # no `sync_status` tick since: `verdicts` still shows "in sync"
    instance.report_runless_asset_event(AssetMaterialization("cell", tags={DATA_VERSION_TAG: "b"}))
    assert _shown(instance, "verdicts") == ("PASSED", "in sync with its inputs")
    job = defs.resolve_implicit_global_asset_job_def()
    keys = {AssetKey("verdicts")}
    run = instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=frozenset(keys))
    [copied] = mark_submitted(instance, run, defs.resolve_asset_graph)
    mark = f"rebuilding in run {run.run_id[:8]}; until then: "
    assert _shown(instance, "verdicts") == ("PASSED", mark + "in sync with its inputs")
    [sensor] = [s for s in defs.sensors if s.name == SENSOR]
    event = DagsterEvent(DagsterEventType.RUN_ENQUEUED.value, job_name=run.job_name)
    sensor(build_run_status_sensor_context(SENSOR, event, instance, run))
    status, text = _shown(instance, "verdicts")  # main: the copy stayed until `sync_status` (30 s)
    assert status == "FAILED" and text.startswith(mark) and "stale" in text, text
    rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey("verdicts"), IN_SYNC))
    assert rec.run_id == run.run_id  # in the run's own row
    n = len(instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey("verdicts"), IN_SYNC), limit=50))
    sensor(build_run_status_sensor_context(SENSOR, event, instance, run))  # the same verdict: not said again
    assert len(instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey("verdicts"), IN_SYNC), limit=50)) == n
