"""Issue 21, "true while it rebuilds": an asset's `in_sync` verdict on a materialization is recorded
by the step that wrote it, before the run goes on, and is the latest evaluation whatever the
`sync_status` sensor reported while the run was planned or in flight. A synthetic graph (no LLM)
on an in-memory instance; the sensor's computation (`sync_events`) is called from inside the run,
as its tick would be while the run is in flight."""
from __future__ import annotations

from dagster import (AssetCheckEvaluation, AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, DataVersion,
                     Definitions, MaterializeResult, asset, materialize)

from assets.automation import LazyGraph
from assets.sync import IN_SYNC, build, sync_events
from wse_platform.runner import QUIET_RUN_CONFIG

NAMES = ("cell", "verdicts", "table")


def _latest(instance, name: str):
    return instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey(name), IN_SYNC))


def _newest(instance, name: str) -> int | None:
    recs = instance.get_asset_records([AssetKey(name)])
    return recs[0].asset_entry.last_materialization_storage_id if recs else None


def _describes_newest(instance, name: str) -> bool:
    """The latest `in_sync` row is an evaluation (not a run's planned one) of the newest materialization."""
    rec = _latest(instance, name)
    ev = rec.evaluation if rec is not None else None
    return (isinstance(ev, AssetCheckEvaluation) and ev.target_materialization_data is not None
            and ev.target_materialization_data.storage_id == _newest(instance, name))


def _setup(during_verdicts):
    """cell → verdicts → table; `during_verdicts(context, graph)` runs inside the verdicts step,
    before it writes anything."""
    version = {"cell": "a"}

    @asset(name="cell", code_version="1")
    def cell():
        return MaterializeResult(data_version=DataVersion(version["cell"]))

    @asset(name="verdicts", deps=["cell"], code_version="1")
    def verdicts(context):
        during_verdicts(context, graph.resolved())
        return MaterializeResult()

    @asset(name="table", deps=["verdicts"], code_version="1")
    def table():
        return MaterializeResult()

    graph = LazyGraph([cell, verdicts, table])
    assets, checks, sensors = build([cell, verdicts, table])
    return Definitions(assets=assets, asset_checks=checks, sensors=sensors), version


def _run(defs, instance, *names):
    result = materialize([*defs.assets, *defs.asset_checks], instance=instance, run_config=QUIET_RUN_CONFIG,
                         selection=AssetSelection.assets(*names))
    assert result.success
    return result


def test_a_step_reports_in_sync_on_what_it_built_before_the_run_goes_on():
    seen = []  # while the verdicts step runs: does `cell`, built earlier in the run, show a verdict on it?

    def during(context, graph):
        seen.append((_describes_newest(context.instance, "cell"), _latest(context.instance, "cell").evaluation.passed
                     if isinstance(_latest(context.instance, "cell").evaluation, AssetCheckEvaluation) else None))

    defs, _ = _setup(during)
    instance = DagsterInstance.ephemeral()
    run_id = _run(defs, instance, *NAMES).run_id
    assert seen == [(True, True)]  # on main: the run's planned evaluation ("Running", no text) until its end
    for name in NAMES:  # after the run: no planned row left, each verdict on the newest materialization
        assert _describes_newest(instance, name) and _latest(instance, name).evaluation.passed, name
        # the run's own row (planned at its creation) got the same verdict: not "Skipped" in the history
        [own] = [r for r in instance.event_log_storage.get_asset_check_execution_history(
            AssetCheckKey(AssetKey(name), IN_SYNC), limit=10) if r.run_id == run_id]
        assert own.evaluation.passed and own.evaluation.description == _latest(instance, name).evaluation.description


def test_a_sensor_verdict_recorded_while_the_run_is_in_flight_is_superseded_by_the_rebuild():
    state = {"tick": False}

    def during(context, graph):  # the sensor ticks while the re-judge runs: verdicts is still out of sync
        if state["tick"]:
            events, _ = sync_events(graph, context.instance, {})
            for ev in events:
                context.instance.report_runless_asset_event(ev)
            state["reported"] = sorted(e.asset_key.to_user_string() for e in events if not e.passed)

    defs, version = _setup(during)
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, *NAMES)
    version["cell"] = "b"  # the cell is regenerated with a new output: verdicts and table out of sync
    _run(defs, instance, "cell")
    state["tick"] = True
    _run(defs, instance, "verdicts", "table")
    assert "verdicts" in state["reported"]  # the sensor said "out of sync" on the old materialization ...
    for name in ("verdicts", "table"):  # ... and the rebuild's own verdict is the latest (main: the sensor's)
        assert _describes_newest(instance, name), name
        assert _latest(instance, name).evaluation.passed, name


def test_the_sensor_says_the_verdict_again_when_a_run_has_planned_the_check():
    """A verdict said before a run was planned is hidden by the run's planned evaluation (the UI shows
    "Running" with no text for the whole rebuild): the next tick says it again, on the materialization
    that exists, even though it did not change."""
    state: dict = {}

    def during(context, graph):
        if "cursor" in state:
            events, _ = sync_events(graph, context.instance, state["cursor"])
            state["during"] = {e.asset_key.to_user_string(): e.passed for e in events}

    defs, version = _setup(during)
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, *NAMES)
    version["cell"] = "b"
    _run(defs, instance, "cell")  # verdicts and table out of sync, said by that run
    graph = defs.resolve_asset_graph()
    events, state["cursor"] = sync_events(graph, instance, {})  # a tick before the re-judge: nothing new to say
    assert events == []
    _run(defs, instance, "verdicts", "table")
    assert state["during"] == {"verdicts": False, "table": False}  # main: {} (the cursor said "already said")
