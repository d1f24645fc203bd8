"""Issue 21, "true while it rebuilds", for the runs the automation requests: Dagster's daemon creates
them (and their planned checks, "Running" with no text in the UI) in its own code, then submits each
to the instance's run queue. From that moment every planned check of the run shows the verdict said
before, marked "rebuilding in run …" (the run queue of the project's `dagster.yaml`,
`assets/run_queue.py`), not only after the `sync_rebuilding` sensor's next tick (5–9 s on main).

Driven the way the daemon drives it: Dagster's asset daemon evaluates the automation sensor of an
in-process code location (the synthetic cell → verdicts → table graph of `test_sync_in_run`) on an
instance configured by the project's `dagster.yaml`, and nothing else runs (no run-status sensor)."""
from __future__ import annotations

import time

import yaml
from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetKey,
                     AutomationConditionSensorDefinition, DagsterRunStatus, DefaultSensorStatus, Definitions,
                     asset_check, instance_for_test)

from assets.automation import with_automation
from assets.sync import IN_SYNC, sync_events
from tests.orchestration.test_sync_in_run import DATA, _materialize, _setup, _shown

LOCATION_ATTRIBUTE = "daemon_defs"


NEW_CHECK = "has_no_duplicates"  # a data check added after everything was built: never evaluated


def _automated(new_check: bool = False) -> tuple[Definitions, dict]:
    """The synthetic graph with the project's automation conditions and an automation sensor (the
    project's `wse_automation` is the same kind of sensor, every 30 s; here every second, so that two
    ticks fit in a test); `new_check`: with a second data check on `verdicts`."""
    defs, state = _setup()
    sensor = AutomationConditionSensorDefinition("automation", target="*", minimum_interval_seconds=1,
                                                 default_status=DefaultSensorStatus.RUNNING, emit_backfills=False)
    extra = []
    if new_check:
        @asset_check(asset="verdicts", name=NEW_CHECK)
        def has_no_duplicates():
            return AssetCheckResult(passed=True, description="0 duplicates")
        extra = [has_no_duplicates]
    return Definitions(assets=with_automation(list(defs.assets)), asset_checks=[*defs.asset_checks, *extra],
                       sensors=[*defs.sensors, sensor]), state


daemon_defs = _automated()[0]  # what the daemon's code location loads (this module, by name)
daemon_defs_new_check = _automated(new_check=True)[0]  # the same after a data check was added to the code


def _project_run_queue(tmp_path) -> dict:
    """The `run_coordinator` entry of the `dagster.yaml` the project writes."""
    from resources.settings import settings_for
    from tests.conftest import write_config
    from wse_platform.runner import dagster_yaml

    return yaml.safe_load(dagster_yaml(settings_for(str(write_config(tmp_path)))))["run_coordinator"]


def _daemon_tick(workspace_context) -> None:
    """One iteration of Dagster's asset daemon (evaluates the automation sensor, creates and submits
    the runs it requests)."""
    from dagster._daemon.asset_daemon import AssetDaemon

    daemon = AssetDaemon(settings=workspace_context.instance.get_auto_materialize_settings(),
                         pre_sensor_interval_seconds=0)
    daemon._run_iteration_impl(workspace_context, threadpool_executor=None, amp_tick_futures={},
                               debug_crash_flags={})


def _run_rows(instance, run_id: str, keys) -> dict[str, object]:
    """check -> the run's row of it (planned, or the evaluation recorded in it)."""
    out = {}
    for key in keys:
        for rec in instance.event_log_storage.get_asset_check_execution_history(key, limit=10):
            if rec.run_id == run_id:
                out[f"{key.asset_key.to_user_string()}:{key.name}"] = rec.evaluation
    return out


def _automation_run(tmp_path, attribute: str, then) -> None:
    """Everything built (by the code without the new check), the cell rebuilt with a new output and
    said stale, then one tick of the daemon on the location's `attribute`: `then(instance, run)` with
    the re-judge run it created and submitted."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget

    target = InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name=__name__, attribute=attribute), location_name="wse"))
    defs, state = _automated()
    (tmp_path / "home").mkdir()
    with instance_for_test(overrides={"run_coordinator": _project_run_queue(tmp_path)},
                           temp_dir=str(tmp_path / "home")) as instance, \
            create_test_daemon_workspace_context(target, instance) as workspace_context:
        assert _materialize(defs, instance, "cell", "verdicts", "table").success
        n = instance.get_runs_count()
        _daemon_tick(workspace_context)  # the first evaluation: everything built, nothing requested
        assert instance.get_runs_count() == n
        state["cell"] = "b"  # the cell rebuilt with a new output, the `sync_status` sensor said "stale"
        assert _materialize(defs, instance, "cell").success
        for ev in sync_events(defs.resolve_asset_graph(), instance, {})[0]:
            instance.report_runless_asset_event(ev)
        assert _shown(instance, "verdicts") == ("FAILED", _shown(instance, "verdicts")[1])
        before = {r.run_id for r in instance.get_runs()}
        time.sleep(1.1)  # the sensor's minimum interval
        _daemon_tick(workspace_context)

        [run] = [r for r in instance.get_runs() if r.run_id not in before]  # the re-judge (verdicts)
        assert run.asset_selection == {AssetKey("verdicts")}
        assert run.status == DagsterRunStatus.QUEUED  # submitted; no run-status sensor has ticked
        then(instance, run)


def test_the_runs_the_automation_requests_show_the_marked_verdict_from_their_submission(tmp_path):
    _automation_run(tmp_path, LOCATION_ATTRIBUTE, _marked_verdicts)


def _marked_verdicts(instance, run) -> None:
    checks = [AssetCheckKey(AssetKey("verdicts"), IN_SYNC), AssetCheckKey(AssetKey("verdicts"), DATA)]
    rows = _run_rows(instance, run.run_id, checks)
    assert sorted(rows) == ["verdicts:has_rows", "verdicts:in_sync"]  # planned by Dagster at its creation
    mark = f"rebuilding in run {run.run_id[:8]}; until then: "
    for name, ev in rows.items():  # main: AssetCheckEvaluationPlanned ("Running", no text)
        assert isinstance(ev, AssetCheckEvaluation), (name, ev)
        assert (ev.description or "").startswith(mark), (name, ev.description)
    assert "stale" in rows["verdicts:in_sync"].description and not rows["verdicts:in_sync"].passed
    assert rows["verdicts:has_rows"].description == mark + "3 rows checked"
    # what the UI shows
    assert _shown(instance, "verdicts")[1].startswith(mark)
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", mark + "3 rows checked")


def test_a_data_check_never_evaluated_says_so_from_the_submission_of_the_run_that_evaluates_it(tmp_path):
    """A data check with no earlier verdict (added to the code after the asset was built): from the
    submission of the daemon's run, "first evaluation in run …; not evaluated yet" (a warning, never a
    pass) instead of "Running" with no text until the run evaluates it (main: 7 s for one of 98 checks
    in the browser walk of issue 21)."""
    def then(instance, run):
        key = AssetCheckKey(AssetKey("verdicts"), NEW_CHECK)
        [ev] = _run_rows(instance, run.run_id, [key]).values()
        assert isinstance(ev, AssetCheckEvaluation), ev  # main: AssetCheckEvaluationPlanned ("Running", no text)
        first = f"first evaluation in run {run.run_id[:8]}; not evaluated yet"
        assert ev.description == first and not ev.passed and ev.severity.value == "WARN"
        assert _shown(instance, "verdicts", NEW_CHECK) == ("FAILED", first)  # what the UI shows: never "Passed"
        mark = f"rebuilding in run {run.run_id[:8]}; until then: "
        assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", mark + "3 rows checked")  # as before
    _automation_run(tmp_path, "daemon_defs_new_check", then)


def test_a_run_is_queued_even_when_marking_it_fails(monkeypatch, caplog):
    import assets.sync_rebuilding as rebuilding
    from assets.run_queue import MarkingRunCoordinator
    from dagster import DagsterInstance, QueuedRunCoordinator, SubmitRunContext

    def broken(*args, **kwargs):
        raise RuntimeError("event log unavailable")

    queued = []
    monkeypatch.setattr(rebuilding, "mark_submitted", broken)
    monkeypatch.setattr(QueuedRunCoordinator, "submit_run", lambda self, context: queued.append(context) or "queued")
    defs, _ = _automated()
    instance = DagsterInstance.ephemeral()
    job = defs.resolve_implicit_global_asset_job_def()
    keys = frozenset({AssetKey("verdicts")})
    run = instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=keys)
    coordinator = MarkingRunCoordinator()
    coordinator.register_instance(instance)
    context = SubmitRunContext(run, workspace=None)
    assert coordinator.submit_run(context) == "queued" and queued == [context]  # Dagster's queue, after all
    assert any("could not mark the checks of run" in r.getMessage() and "event log unavailable" in r.getMessage()
               for r in caplog.records)
