"""Issue 21: after a rebuild, no asset shows an `in_sync` verdict older than the run until the
`sync_status` sensor's next tick (up to 30 s): the run's check step reports the verdicts its rebuild
changed on other assets. A synthetic graph (no LLM) on an in-memory instance, no sensor tick."""
from __future__ import annotations

from dagster import (AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, DataVersion, Definitions,
                     MaterializeResult, asset, materialize)

from assets.sync import IN_SYNC, build
from wse_platform.runner import QUIET_RUN_CONFIG


def _defs(version: dict):
    @asset(name="cell", code_version="1")
    def cell():
        return MaterializeResult(data_version=DataVersion(version["cell"]))

    @asset(name="verdicts", deps=["cell"], code_version="1")
    def verdicts():
        return MaterializeResult()

    @asset(name="table", deps=["verdicts"], code_version="1")
    def table():
        return MaterializeResult()

    assets, checks, sensors = build([cell, verdicts, table])
    return Definitions(assets=assets, asset_checks=checks, sensors=sensors)


def _latest(instance, name: str):
    rec = instance.get_latest_asset_check_evaluation_record(AssetCheckKey(AssetKey(name), IN_SYNC))
    return rec.evaluation if rec is not None else None


def _newest(instance, name: str) -> int:
    return instance.get_asset_records([AssetKey(name)])[0].asset_entry.last_materialization_storage_id


def _run(defs, instance, *names):
    result = materialize([*defs.assets, *defs.asset_checks], instance=instance, run_config=QUIET_RUN_CONFIG,
                         selection=AssetSelection.assets(*names))
    assert result.success


def test_a_rebuild_run_reports_what_it_changed_downstream_without_waiting_for_the_sensor():
    version = {"cell": "a"}
    defs = _defs(version)
    instance = DagsterInstance.ephemeral()
    _run(defs, instance, "cell", "verdicts", "table")
    assert all(_latest(instance, n).passed for n in ("cell", "verdicts", "table"))

    version["cell"] = "b"  # the cell is regenerated with a new output (a new data version)
    _run(defs, instance, "cell")
    assert _latest(instance, "cell").passed  # the run's own evaluation of what it built
    for name in ("verdicts", "table"):  # built from the old cell: out of sync now, said by the same run
        ev = _latest(instance, name)
        assert not ev.passed, name
        assert ev.target_materialization_data.storage_id == _newest(instance, name)
    assert "cell: has a new dependency data version" in _latest(instance, "verdicts").description
    assert "verdicts: upstream (unpartitioned) stale" in _latest(instance, "table").description

    _run(defs, instance, "verdicts")  # the re-judge: the table is still out of sync, now for another reason
    assert _latest(instance, "verdicts").passed
    table = _latest(instance, "table")
    assert not table.passed and "verdicts: has a new dependency" in table.description
    _run(defs, instance, "table")
    assert all(_latest(instance, n).passed for n in ("cell", "verdicts", "table"))
