"""The step hooks' `in_sync` status (assets/sync.py `report_own_verdicts`) asks one stale-status resolver per
run, not one per hook (issue 24: ~0.75 CPU s per WSE cell run went to the hooks' resolvers, each reading the
same ancestors again), and a new one as soon as something it may have read changed: then the verdict is the
one a fresh computation gives."""
from __future__ import annotations

from dagster import (AssetChecksDefinition, AssetKey, AssetMaterialization, DagsterInstance, DataVersion,
                     Definitions, MaterializeResult, StaticPartitionsDefinition, asset)

import assets.sync as sync
import wse_platform.status as status
from assets.sync import build
from wse_platform.dagster_private import DATA_VERSION_TAG
from wse_platform.runner import RunPlanStep, run_in_location

PARTS = StaticPartitionsDefinition(["a", "b"])


def _defs(partitioned: bool):
    """source → cell → verdicts → summary (one step each); partitioned: cell, verdicts and summary by PARTS."""
    pdef = PARTS if partitioned else None

    @asset(name="source", code_version="1")
    def source():
        return MaterializeResult(data_version=DataVersion("s1"))

    @asset(name="cell", deps=["source"], code_version="1", partitions_def=pdef)
    def cell():
        return MaterializeResult(data_version=DataVersion("c1"))

    @asset(name="verdicts", deps=["cell"], code_version="1", partitions_def=pdef)
    def verdicts():
        return MaterializeResult(data_version=DataVersion("v1"))

    @asset(name="summary", deps=["verdicts"], code_version="1", partitions_def=pdef)
    def summary():
        return MaterializeResult(data_version=DataVersion("m1"))

    objs, checks, sensors = build([source, cell, verdicts, summary])
    return Definitions(assets=[o for o in objs if not isinstance(o, AssetChecksDefinition)], asset_checks=checks)


def _run(defs, instance, names, pk=None):
    result = run_in_location(defs, RunPlanStep([AssetKey(n) for n in names], pk), instance, {})
    assert result.success
    return result


def _hooks(monkeypatch, before_hook=None) -> dict:
    """Counts the resolvers made during the step hooks and keeps each hook's verdicts;
    `before_hook(asset names)` runs as a hook starts (what another run could do meanwhile)."""
    seen = {"resolvers": 0, "verdicts": {}}
    make, report = status._resolver, sync.report_own_verdicts

    def counted(graph, instance):
        seen["resolvers"] += seen.get("in_hook", 0)
        return make(graph, instance)

    def hook(graph, instance, run_id, keys):
        if before_hook:
            before_hook(instance, [k.to_user_string() for k in keys])
        seen["in_hook"] = 1
        try:
            events = report(graph, instance, run_id, keys)
        finally:
            seen["in_hook"] = 0
        seen["verdicts"].update({e.asset_key.to_user_string(): (e.passed, e.description) for e in events})
        return events

    monkeypatch.setattr(status, "_resolver", counted)
    monkeypatch.setattr(sync, "report_own_verdicts", hook)
    return seen


def _new_version(instance, asset: str, pk: str | None = None) -> None:
    """Another run wrote `asset` (of `pk`) with a new data version meanwhile."""
    instance.report_runless_asset_event(AssetMaterialization(asset, partition=pk, tags={DATA_VERSION_TAG: "new"}))


def test_the_hooks_of_one_run_ask_one_resolver(monkeypatch):
    defs, instance = _defs(False), DagsterInstance.ephemeral()
    _run(defs, instance, ["source"])
    seen = _hooks(monkeypatch)
    _run(defs, instance, ["cell", "verdicts", "summary"])
    assert seen["resolvers"] == 1                       # before: 3, one per hook
    assert {a: v[0] for a, v in seen["verdicts"].items()} == {"cell": True, "verdicts": True, "summary": True}


def test_an_ancestor_written_meanwhile_makes_a_new_resolver_and_the_verdict_says_stale(monkeypatch):
    defs, instance = _defs(False), DagsterInstance.ephemeral()
    _run(defs, instance, ["source"])

    def meanwhile(inst, names):
        if names == ["verdicts"]:
            _new_version(inst, "source")  # read (cached) by the first hook
    seen = _hooks(monkeypatch, meanwhile)
    _run(defs, instance, ["cell", "verdicts", "summary"])
    assert seen["resolvers"] == 2                       # the first hook's, then a new one
    passed, text = seen["verdicts"]["verdicts"]
    assert not passed and "cell: upstream (unpartitioned) stale" in text, text  # as a fresh computation says
    fresh = sync.status_by_asset(defs.resolve_asset_graph(), instance, assets=[AssetKey("verdicts")])
    assert sync.verdict(fresh["verdicts"])[:2] == (passed, text)


def test_another_partition_written_meanwhile_makes_a_new_resolver_too(monkeypatch):
    """A hook also recomputes the other partitions whose inputs changed (the verdict is the asset's):
    the resolver may have read any partition of what it covered."""
    defs, instance = _defs(True), DagsterInstance.ephemeral()
    _run(defs, instance, ["source"])
    for pk in ("a", "b"):
        _run(defs, instance, ["cell", "verdicts", "summary"], pk)

    def other_cell(inst, names):  # another cell's run writes its partition meanwhile
        if names == ["verdicts"]:
            _new_version(inst, "cell", "b")
    seen = _hooks(monkeypatch, other_cell)
    _run(defs, instance, ["cell", "verdicts", "summary"], "a")
    assert seen["resolvers"] == 2
    passed, text = seen["verdicts"]["verdicts"]
    assert not passed and "b: stale" in text and "cell[b]" in text, text
    fresh = sync.status_by_asset(defs.resolve_asset_graph(), instance, assets=[AssetKey("verdicts")])
    assert sync.verdict(fresh["verdicts"])[:2] == (passed, text)
