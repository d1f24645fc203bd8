"""Issue 21, "true while it rebuilds": no moment of a rebuild where a check shows nothing or "Running"
with no text. Read with Dagster's own resolution of what the UI shows (`shown_in_ui`: the GraphQL's
`executionForLatestMaterialization`, which hides a row describing an older materialization unless the
row is the run's that wrote the newest one).

- `in_sync`: between a step's materialization and its hook's verdict (the hook computes the status:
  seconds under load), the check shows the run's "rebuilding" mark, not nothing (main: the mark was a
  runless row of the materialization before, hidden from the moment the step wrote the new one);
- the `sync_status` sensor says a verdict on an asset a run in flight has planned in that run's row;
- data checks show the verdict said before, marked, while the run is planned or in flight, then
  their own result; after a failed run, what is true (not evaluated, or the verdict before)."""
from __future__ import annotations

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetChecksDefinition, AssetCheckSeverity, AssetCheckResult, AssetKey, DagsterEvent, DagsterEventType,
                     DagsterInstance, DataVersion, Definitions, MaterializeResult, asset, asset_check,
                     build_run_status_sensor_context)

import assets.sync as sync
from assets.sync import IN_SYNC, build, record_in_runs, sync_events
from assets.sync_rebuilding import SENSOR, in_run, mark_data_checks, unmark_data_checks
from wse_platform.dagster_private import shown_in_ui
from wse_platform.runner import RunPlanStep, run_in_location

DATA = "has_rows"


def _setup():
    """cell → verdicts (with a data check `has_rows`) → table; `state["fail"]` fails the verdicts step."""
    state = {"cell": "a", "rows": 3, "fail": False, "during": None}

    @asset(name="cell", code_version="1")
    def cell():
        return MaterializeResult(data_version=DataVersion(state["cell"]))

    @asset(name="verdicts", deps=["cell"], code_version="1")
    def verdicts(context):
        if state["during"]:
            state["during"](context)
        if state["fail"]:
            raise RuntimeError("the re-judge failed")
        return MaterializeResult()

    @asset_check(asset="verdicts", name=DATA)
    def has_rows():
        return AssetCheckResult(passed=state["rows"] > 0,
                                description=None if state.get("silent") else f"{state['rows']} rows checked")

    @asset(name="table", deps=["verdicts"], code_version="1")
    def table():
        return MaterializeResult()

    objs, checks, sensors = build([cell, verdicts, table, has_rows])  # as the project's definitions
    return Definitions(assets=[o for o in objs if not isinstance(o, AssetChecksDefinition)],
                       asset_checks=[*checks, has_rows], sensors=sensors), state


def _materialize(defs, instance, *names):
    return run_in_location(defs, RunPlanStep([AssetKey(n) for n in names], None), instance, {})


def _shown(instance, name: str, check: str = IN_SYNC) -> tuple[str, str] | None:
    got = shown_in_ui(instance, AssetCheckKey(AssetKey(name), check))
    if got is None:
        return None
    status, ev = got
    return status, (getattr(ev, "description", None) or "")


def _stale():
    """Everything built, then the cell rebuilt with a new output and the sensor's tick said so."""
    defs, state = _setup()
    instance = DagsterInstance.ephemeral()
    assert _materialize(defs, instance, "cell", "verdicts", "table").success
    state["cell"] = "b"
    assert _materialize(defs, instance, "cell").success
    for ev in sync_events(defs.resolve_asset_graph(), instance, {})[0]:
        instance.report_runless_asset_event(ev)
    assert _shown(instance, "verdicts")[0] == "FAILED"
    return defs, state, instance


def test_between_a_steps_materialization_and_its_hook_the_check_shows_the_runs_mark(monkeypatch):
    defs, state, instance = _stale()
    seen: dict = {}
    original = sync.report_own_verdicts

    def hook(graph, inst, run_id, keys):  # the step's hook starts: its materialization exists, no verdict yet
        for k in keys:
            seen[k.to_user_string()] = (_shown(inst, k.to_user_string()), run_id)
        return original(graph, inst, run_id, keys)

    monkeypatch.setattr(sync, "report_own_verdicts", hook)
    assert _materialize(defs, instance, "verdicts", "table").success
    for name in ("verdicts", "table"):  # main: None (the mark described the materialization before)
        shown, run_id = seen[name]
        assert shown is not None, name
        assert shown[0] == "FAILED" and shown[1].startswith(f"rebuilding in run {run_id[:8]}; until then: "), shown
        assert _shown(instance, name)[0] == "SUCCEEDED", name  # then the rebuild's own verdict


def test_the_sync_status_sensor_says_a_verdict_in_the_row_of_the_run_in_flight():
    defs, state, instance = _stale()
    job = defs.resolve_implicit_global_asset_job_def()
    keys = frozenset({AssetKey("verdicts"), AssetKey("table")})
    run = instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=keys)
    assert _shown(instance, "verdicts") == ("IN_PROGRESS", "")  # planned: "Running", no text
    in_flight: list = []
    events, _ = sync_events(defs.resolve_asset_graph(), instance, {}, in_flight=in_flight)
    assert events == []  # main: runless rows of the materialization before (blank once the run writes it)
    assert sorted(ev.asset_key.to_user_string() for _, ev in in_flight) == ["table", "verdicts"]
    assert {r.run_id for r, _ in in_flight} == {run.run_id}
    record_in_runs(instance, in_flight)
    for name in ("verdicts", "table"):
        rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey(name), IN_SYNC))
        assert rec.run_id == run.run_id  # the run's own row, filled
        status, text = _shown(instance, name)
        assert status == "FAILED" and text.startswith(f"rebuilding in run {run.run_id[:8]}") and "stale" in text
    # the next tick has nothing to say (the same verdict, marked)
    again: list = []
    assert sync_events(defs.resolve_asset_graph(), instance, {}, in_flight=again)[0] == [] and again == []


def _data_run(defs, instance):
    """A run of `verdicts` created as Dagster's daemon creates one (its planned checks, nothing executed)."""
    job = defs.resolve_implicit_global_asset_job_def()
    keys = frozenset({AssetKey("verdicts")})
    return instance.create_run_for_job(job.get_subset(asset_selection=keys), asset_selection=keys)


def test_a_data_check_shows_its_verdict_before_marked_while_a_run_rebuilds():
    defs, state, instance = _stale()
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", "3 rows checked")
    run = _data_run(defs, instance)
    assert _shown(instance, "verdicts", DATA) == ("IN_PROGRESS", "")  # what Dagster shows: "Running", no text
    [sensor] = [s for s in defs.sensors if s.name == SENSOR]  # the queued-run sensor (as for the daemon's runs)
    sensor(build_run_status_sensor_context(SENSOR, DagsterEvent(DagsterEventType.RUN_ENQUEUED.value,
                                                                job_name=run.job_name), instance, run))
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", f"rebuilding in run {run.run_id[:8]}; until then: "
                                                               "3 rows checked")
    assert mark_data_checks(defs.resolve_asset_graph, instance, run) == 0  # once per run


def test_a_data_check_that_said_no_text_is_marked_with_its_verdict_word():
    defs, state = _setup()
    instance = DagsterInstance.ephemeral()
    state["silent"] = True
    assert _materialize(defs, instance, "cell", "verdicts", "table").success
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", "")
    run = _data_run(defs, instance)
    assert mark_data_checks(defs.resolve_asset_graph, instance, run) == 1
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", f"rebuilding in run {run.run_id[:8]}; until then: passed")


def test_during_and_after_a_run_the_data_check_says_the_mark_then_its_result():
    defs, state, instance = _stale()
    seen = []
    state["during"] = lambda context: seen.append(_shown(context.instance, "verdicts", DATA))
    state["rows"] = 0
    assert _materialize(defs, instance, "verdicts").success
    [(status, text)] = seen  # main: ("IN_PROGRESS", "")
    assert status == "SUCCEEDED" and text.startswith("rebuilding in run ") and text.endswith("3 rows checked")
    assert _shown(instance, "verdicts", DATA) == ("FAILED", "0 rows checked")  # its own result, same row


def _failed_run(defs, state, instance):
    """A run of `verdicts` that fails: what its data check showed during it, and the run."""
    state["fail"] = True
    seen = []
    state["during"] = lambda context: seen.append(_shown(context.instance, "verdicts", DATA))
    result = _materialize(defs, instance, "verdicts")
    assert not result.success
    return seen, instance.get_run_by_id(result.run_id)


def _tick_failed(defs, instance, run) -> None:
    """The `sync_rebuild_failed` sensor's tick for `run`."""
    [sensor] = [s for s in defs.sensors if s.name == "sync_rebuild_failed"]
    sensor(build_run_status_sensor_context("sync_rebuild_failed",
                                           DagsterEvent(DagsterEventType.RUN_FAILURE.value, job_name=run.job_name),
                                           instance, run))


def test_after_a_failed_run_a_data_check_it_did_not_rebuild_says_its_verdict_again():
    defs, state, instance = _stale()
    seen, run = _failed_run(defs, state, instance)
    assert seen[0][1].startswith("rebuilding in run ")
    assert _shown(instance, "verdicts", DATA)[1].startswith("rebuilding in run ")  # until the sensor's tick
    _tick_failed(defs, instance, run)
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", "3 rows checked")  # main: ("EXECUTION_FAILED", "")
    rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey("verdicts"), DATA))
    assert rec.run_id == run.run_id  # in the run's own row


def test_a_run_that_wrote_the_asset_but_not_its_check_leaves_a_warning_not_a_pass():
    defs, state, instance = _stale()
    result = _materialize(defs, instance, "verdicts")
    run = instance.get_run_by_id(result.run_id)
    # its data check's row as if the run had ended before evaluating it: still the mark
    in_run(instance, run, AssetCheckEvaluation(
        asset_key=AssetKey("verdicts"), check_name=DATA, passed=True, severity=AssetCheckSeverity.WARN,
        description=f"rebuilding in run {run.run_id[:8]}; until then: 3 rows checked"))
    assert unmark_data_checks(defs.resolve_asset_graph, instance, run, "failed") == 1
    status, text = _shown(instance, "verdicts", DATA)
    assert status == "FAILED" and text.startswith(f"not evaluated: run {run.run_id[:8]} failed"), text
    assert text.endswith("3 rows checked")


def _never_checked():
    """The cell built, `verdicts` never built: its data check `has_rows` has never been evaluated."""
    defs, state = _setup()
    instance = DagsterInstance.ephemeral()
    assert _materialize(defs, instance, "cell").success
    return defs, state, instance


def test_a_data_check_never_evaluated_says_so_while_a_run_builds_then_its_result():
    defs, state, instance = _never_checked()
    run = _data_run(defs, instance)
    assert _shown(instance, "verdicts", DATA) == ("IN_PROGRESS", "")  # Dagster's "Running", no text
    assert mark_data_checks(defs.resolve_asset_graph, instance, run) == 1  # main: 0 (left "Running")
    first = f"first evaluation in run {run.run_id[:8]}; not evaluated yet"
    assert _shown(instance, "verdicts", DATA) == ("FAILED", first)  # a warning, never "Passed"
    ev = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey("verdicts"), DATA)).event.dagster_event \
        .event_specific_data
    assert ev.severity == AssetCheckSeverity.WARN and not ev.passed
    assert mark_data_checks(defs.resolve_asset_graph, instance, run) == 0  # once per run
    # a run that builds it: the mark from its creation until the check step, then the check's own result
    seen = []
    state["during"] = lambda context: seen.append(_shown(context.instance, "verdicts", DATA))
    result = _materialize(defs, instance, "verdicts")
    assert result.success
    [(status, text)] = seen  # main: ("IN_PROGRESS", "")
    assert (status, text) == ("FAILED", f"first evaluation in run {result.run_id[:8]}; not evaluated yet")
    assert _shown(instance, "verdicts", DATA) == ("SUCCEEDED", "3 rows checked")
    rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey("verdicts"), DATA))
    assert rec.run_id == result.run_id  # the run's own row, replaced by its result


def test_after_a_failed_run_a_data_check_never_evaluated_says_it_was_not_evaluated():
    defs, state, instance = _never_checked()
    seen, run = _failed_run(defs, state, instance)
    assert seen == [("FAILED", f"first evaluation in run {run.run_id[:8]}; not evaluated yet")]
    _tick_failed(defs, instance, run)
    assert _shown(instance, "verdicts", DATA) == (
        "FAILED", f"not evaluated: run {run.run_id[:8]} failed before this check ran; it has no verdict yet")
