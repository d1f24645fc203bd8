"""Issue 24 item 3: a run whose rebuild changed nothing (every materialization replaced one with the
same data version, its assets in sync before and after: a cell rerun on cached answers) does not
compute the status of what is downstream (the final tables read every cell) in its `sync_checks`
step; a rebuild that changed something still reports the downstream verdicts at once (issue 21).
Counted, not timed; a synthetic graph (no LLM) on an in-memory instance."""
from __future__ import annotations

from dagster import (AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, DataVersion, Definitions,
                     MaterializeResult, StaticPartitionsDefinition, asset, materialize)

import assets.sync as sync
from assets.sync import IN_SYNC, build
from wse_platform.runner import QUIET_RUN_CONFIG

CELLS = StaticPartitionsDefinition(["a", "b"])


def _defs(state: dict):
    @asset(name="cell", partitions_def=CELLS, code_version=state.get("code", "1"))
    def cell():
        return MaterializeResult(data_version=DataVersion(state["out"]))

    @asset(name="verdict", partitions_def=CELLS, deps=["cell"], code_version="1")
    def verdict():
        return MaterializeResult()

    @asset(name="table", deps=["verdict"], code_version="1")
    def table():
        return MaterializeResult()

    assets, checks, sensors = build([cell, verdict, table])
    return Definitions(assets=assets, asset_checks=checks, sensors=sensors)


def _run(defs, instance, names, partition=None):
    result = materialize([*defs.assets, *defs.asset_checks], instance=instance, run_config=QUIET_RUN_CONFIG,
                         partition_key=partition, selection=AssetSelection.assets(*names))
    assert result.success


def _latest(instance, name: str):
    rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey(name), IN_SYNC))
    return rec.evaluation if rec is not None else None


def _counting(monkeypatch) -> list:
    calls = []
    real = sync.compute_status
    monkeypatch.setattr(sync, "compute_status", lambda *a, **k: calls.append(k.get("assets")) or real(*a, **k))
    return calls


def _build_all(defs, instance) -> None:
    for pk in CELLS.get_partition_keys():
        _run(defs, instance, ["cell", "verdict"], pk)
    _run(defs, instance, ["table"])
    assert all(_latest(instance, n).passed for n in ("cell", "verdict", "table"))


def test_a_rerun_with_the_same_outputs_computes_no_downstream_status(monkeypatch):
    state = {"out": "x"}
    defs = _defs(state)
    instance = DagsterInstance.ephemeral()
    _build_all(defs, instance)
    calls = _counting(monkeypatch)
    _run(defs, instance, ["cell", "verdict"], "b")  # a cached rerun: the same data versions
    # one computation per step (its own hook), none in sync_checks (old code: a third, for the table)
    assert calls == [[AssetKey("cell")], [AssetKey("verdict")]], calls
    assert all(_latest(instance, n).passed for n in ("cell", "verdict", "table"))


def test_a_rerun_with_a_new_output_still_reports_downstream_at_once(monkeypatch):
    state = {"out": "x"}
    defs = _defs(state)
    instance = DagsterInstance.ephemeral()
    _build_all(defs, instance)
    state["out"] = "y"  # cell b regenerated with a new output: verdict b and the table out of sync
    calls = _counting(monkeypatch)
    _run(defs, instance, ["cell"], "b")
    assert len(calls) == 2  # the hook, and sync_checks for what is downstream
    assert _latest(instance, "cell").passed
    for name in ("verdict", "table"):
        assert not _latest(instance, name).passed, name


def test_a_rebuild_that_repairs_a_stale_asset_reports_downstream():
    """Same data version, but the asset was out of sync before (a new code version): what is
    downstream showed "upstream stale" and changes too, so it is computed and reported."""
    state = {"out": "x"}
    instance = DagsterInstance.ephemeral()
    _build_all(_defs(state), instance)
    state["code"] = "2"
    defs = _defs(state)
    events, _ = sync.sync_events(defs.resolve_asset_graph(), instance, {})  # a sensor tick: cell b, a stale
    for ev in events:
        instance.report_runless_asset_event(ev)
    assert not _latest(instance, "cell").passed and not _latest(instance, "table").passed
    for pk in CELLS.get_partition_keys():
        _run(defs, instance, ["cell"], pk)
    assert all(_latest(instance, n).passed for n in ("cell", "verdict", "table"))


def _defs_with_calls(state: dict):
    """`cell` records its (cached) calls in the external `llm_calls`, as an LLM asset's step does
    (`assets/core.py` `mark_llm_calls`); `usage` reads `llm_calls` (as `llm_usage` does)."""
    from dagster import AssetMaterialization, AssetSpec

    @asset(name="cell", partitions_def=CELLS, code_version="1")
    def cell(context):
        context.log_event(AssetMaterialization(asset_key="llm_calls",
                                               tags={"dagster/data_version": context.run.run_id[:8]}))
        return MaterializeResult(data_version=DataVersion(state["out"]))

    @asset(name="table", deps=["cell"], code_version="1")
    def table():
        return MaterializeResult()

    @asset(name="usage", deps=["llm_calls"], code_version="1")
    def usage():
        return MaterializeResult()

    assets, checks, sensors = build([cell, table, usage, AssetSpec("llm_calls", deps=["cell"])])
    return Definitions(assets=assets, asset_checks=checks, sensors=sensors)


def test_a_cached_rerun_that_recorded_calls_reports_the_readers_of_llm_calls(monkeypatch):
    """Same data versions, but the run's calls (cache hits are recorded too) are a new version of
    `llm_calls`: the verdict of what reads it is reported at once, and only its status is computed
    (not the final tables')."""
    defs = _defs_with_calls({"out": "x"})
    instance = DagsterInstance.ephemeral()
    for pk in CELLS.get_partition_keys():
        _run(defs, instance, ["cell"], pk)
    _run(defs, instance, ["table", "usage"])
    assert all(_latest(instance, n).passed for n in ("cell", "table", "usage"))
    calls = _counting(monkeypatch)
    _run(defs, instance, ["cell"], "b")
    assert calls == [[AssetKey("cell")], [AssetKey("usage")]], calls  # the hook; sync_checks: usage only
    assert _latest(instance, "cell").passed and _latest(instance, "table").passed
    assert not _latest(instance, "usage").passed  # llm_calls has a new data version
    assert "llm_calls" in _latest(instance, "usage").description


def test_the_readers_of_llm_calls_are_found_however_many_runs_recorded_calls_since():
    """A run's calls are found in its own materializations, not among the newest few of `llm_calls`:
    a cell run's `sync_checks` names `usage` even when 12 other runs recorded calls since (main: the
    last 10 only, and the verdict waited for the `sync_status` sensor)."""
    from dagster import AssetMaterialization

    defs = _defs_with_calls({"out": "x"})
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, ["cell"], "a")
    _run(defs, instance, ["table", "usage"])
    [calls_run] = [r.run_id for r in instance.get_runs() if r.tags.get("dagster/partition") == "a"]
    [other] = [r.run_id for r in instance.get_runs() if r.run_id != calls_run]
    for i in range(12):  # other runs' batches of calls, newer than this run's
        instance.report_runless_asset_event(AssetMaterialization("llm_calls", tags={"dagster/data_version": f"o{i}"}))
    graph = defs.resolve_asset_graph()
    assert sync.readers_of_new_calls(graph, instance, calls_run) == [AssetKey("usage")]
    assert sync.readers_of_new_calls(graph, instance, other) == []  # recorded no calls
