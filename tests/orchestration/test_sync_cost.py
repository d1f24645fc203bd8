"""Issue 24 item 3: what `in_sync` costs inside a run, counted (not timed).

Each asset's step reports its own verdict (a success hook, `assets/sync.py`), so a run computes the
status once per step, then once more in its `sync_checks` step for what its rebuild changed
downstream. A computation for some assets (`compute_status(assets=...)`) used to leave what is
downstream of them to be recomputed *in full* by the next one, so every hook also computed the run's
later steps (on the materializations they were about to replace) to keep them incremental. Now the
partitions left for later are saved as pending: the next computation recomputes just those, and each
partition status a run needs is computed once. (On the old code the counts below are higher: the
second hook recomputed every partition of `verdict`, and a cell run asked about its later steps'
partitions twice.)"""
from __future__ import annotations

from dagster import (AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, DataVersion, Definitions,
                     MaterializeResult, StaticPartitionsDefinition, asset, instance_for_test, materialize)

from assets.sync import IN_SYNC, build
from wse_platform import status
from tests.orchestration._resolver_asks import record_asks
from wse_platform.runner import QUIET_RUN_CONFIG

CELLS = StaticPartitionsDefinition(["a", "b", "c"])


BUILDS = [0]


@asset(partitions_def=CELLS, code_version="1")
def cell() -> MaterializeResult:
    BUILDS[0] += 1  # a new output every time: what reads it is stale
    return MaterializeResult(data_version=DataVersion(str(BUILDS[0])))


@asset(partitions_def=CELLS, deps=[cell], code_version="1")
def verdict() -> None:
    return None


@asset(partitions_def=CELLS, deps=[verdict], code_version="1")
def score() -> None:
    return None


@asset(deps=[score], code_version="1")
def table() -> None:
    return None


def _build_all(instance) -> None:
    for pk in CELLS.get_partition_keys():
        materialize([cell, verdict, score], instance=instance, partition_key=pk)
    materialize([table], instance=instance, selection=[table])


def test_a_computation_for_some_assets_leaves_only_the_partitions_below_them_pending(monkeypatch):
    defs = Definitions(assets=[cell, verdict, score, table])
    with instance_for_test() as instance:
        _build_all(instance)
        full = status.compute_status(defs, instance, only_problems=False)
        asked = record_asks(monkeypatch)
        materialize([cell], instance=instance, partition_key="b", selection=[cell])  # a cell run's first step
        status.compute_status(defs, instance, only_problems=False, assets=[AssetKey("cell")])
        assert asked == [("cell", "b")]
        materialize([verdict], instance=instance, partition_key="b", selection=[verdict])  # its second step
        rows = status.compute_status(defs, instance, only_problems=False, assets=[AssetKey("verdict")])
        assert asked == [("cell", "b"), ("verdict", "b")]  # old code: verdict a, b and c
        fresh = status.compute_status(defs, instance, only_problems=False, use_cache=False)
        assert rows == [r for r in fresh if r.asset in ("cell", "verdict")]
        asked.clear()  # the next full computation: the partition below the run's, and the table reading it
        assert status.compute_status(defs, instance, only_problems=False) == fresh
        assert asked == [("score", "b"), ("table", None)]  # old code: score a, b and c
        assert {(r.asset, r.partition) for r in fresh if r.status == "stale"} == {("score", "b"), ("table", None)}
        assert full != fresh
        asked.clear()
        assert status.compute_status(defs, instance, only_problems=False) == fresh and asked == []


def test_pending_partitions_survive_a_computation_that_does_not_reach_them(monkeypatch):
    """Two computations for other assets in a row (two cells' runs) keep both cells pending below them."""
    defs = Definitions(assets=[cell, verdict, score, table])
    with instance_for_test() as instance:
        _build_all(instance)
        status.compute_status(defs, instance, only_problems=False)
        asked = record_asks(monkeypatch)
        for pk in ("a", "c"):
            materialize([cell], instance=instance, partition_key=pk, selection=[cell])
            status.compute_status(defs, instance, only_problems=False, assets=[AssetKey("cell")])
        assert asked == [("cell", "a"), ("cell", "c")]
        asked.clear()
        fresh = status.compute_status(defs, instance, only_problems=False, use_cache=False)
        asked.clear()
        assert status.compute_status(defs, instance, only_problems=False) == fresh
        assert sorted(asked) == [("score", "a"), ("score", "c"), ("table", None), ("verdict", "a"), ("verdict", "c")]
        assert {(r.asset, r.partition) for r in fresh if r.status == "stale"} == \
            {("verdict", "a"), ("verdict", "c"), ("score", "a"), ("score", "c"), ("table", None)}


def test_a_cell_run_computes_each_partition_status_it_needs_once(monkeypatch):
    """A cell run of three steps (its hooks and its `sync_checks` step) asks about each of its three
    partitions once and about the table below them once; its verdicts equal `wse status --full`'s."""
    assets, checks, sensors = build([cell, verdict, score, table])
    defs = Definitions(assets=assets, asset_checks=checks, sensors=sensors)
    instance = DagsterInstance.ephemeral()
    everything = [*defs.assets, *defs.asset_checks]
    for pk in CELLS.get_partition_keys():
        assert materialize(everything, instance=instance, run_config=QUIET_RUN_CONFIG, partition_key=pk,
                           selection=AssetSelection.assets("cell", "verdict", "score")).success
    assert materialize(everything, instance=instance, run_config=QUIET_RUN_CONFIG,
                       selection=AssetSelection.assets("table")).success
    asked = record_asks(monkeypatch)
    assert materialize(everything, instance=instance, run_config=QUIET_RUN_CONFIG, partition_key="b",
                       selection=AssetSelection.assets("cell", "verdict", "score")).success
    # old code: verdict[b] and score[b] asked again by each later step's hook (on what it was replacing)
    assert sorted(asked) == [("cell", "b"), ("score", "b"), ("table", None), ("verdict", "b")]
    rows = {r.asset: r for r in status.compute_status(defs, instance, only_problems=False, use_cache=False)
            if r.partition in ("b", None)}
    for name in ("cell", "verdict", "score", "table"):
        rec = instance.get_latest_asset_check_evaluation_record(
            AssetCheckKey(AssetKey(name), IN_SYNC))
        assert rec.evaluation.passed == (rows[name].status == "fresh"), name
    assert rows["table"].status == "stale"
