"""`compute_status` past Dagster's 100-upstream-partitions blind spot, on a synthetic graph:
a config source and a 144-cell asset (the WSE paper grid's size) feeding one final table.
No LLM; runs go to an in-memory Dagster instance."""
from __future__ import annotations

import pytest
from dagster import (
    AssetKey,
    AssetSelection,
    BackfillPolicy,
    DagsterInstance,
    DataVersionsByPartition,
    Definitions,
    MaterializeResult,
    StaticPartitionsDefinition,
    asset,
    materialize,
    observable_source_asset,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from wse_platform.cli import stale_partitions
from wse_platform.runner import QUIET_RUN_CONFIG, observe_sources
from wse_platform.status import PARTITION_THRESHOLD, compute_status

CELLS = [f"c{i:03d}" for i in range(144)]


def _graph(versions: dict[str, str]):
    cells_def = StaticPartitionsDefinition(CELLS)

    @observable_source_asset(name="grid_config", partitions_def=cells_def)
    def grid_config():
        return DataVersionsByPartition(dict(versions))

    @asset(name="grid_cells", partitions_def=cells_def, deps=["grid_config"], code_version="1",
           backfill_policy=BackfillPolicy.single_run())
    def grid_cells():
        return MaterializeResult()

    @asset(name="grid_table", deps=["grid_cells"], code_version="1")
    def grid_table():
        return MaterializeResult()

    @asset(name="grid_summary", deps=["grid_table"], code_version="1")
    def grid_summary():
        return MaterializeResult()

    return Definitions(assets=[grid_config, grid_cells, grid_table, grid_summary])


def _run(defs, instance, names, partition=None, last=None):
    """One run: a partition, a partition range `partition`..`last` (one run, many cells), or none."""
    tags = {ASSET_PARTITION_RANGE_START_TAG: partition, ASSET_PARTITION_RANGE_END_TAG: last} if last else {}
    result = materialize(defs.assets, instance=instance, partition_key=None if last else partition, tags=tags,
                         run_config=QUIET_RUN_CONFIG, selection=AssetSelection.assets(*names))
    assert result.success


def _states(defs, instance):
    return {(c.asset, c.partition): c for c in compute_status(defs, instance)}


@pytest.fixture
def grid():
    versions = {k: "v1" for k in CELLS}
    defs = _graph(versions)
    instance = DagsterInstance.ephemeral()
    observe_sources(defs, instance)
    _run(defs, instance, ["grid_cells"], CELLS[0], last=CELLS[-2])  # the last cell stays missing for now
    assert len(instance.get_materialized_partitions(AssetKey("grid_cells"))) == len(CELLS) - 1
    _run(defs, instance, ["grid_table", "grid_summary"])
    return defs, instance, versions


def test_threshold_is_below_the_paper_grid():
    assert len(CELLS) >= PARTITION_THRESHOLD


def test_missing_upstream_cell_makes_the_table_incomplete_not_stale(grid):
    defs, instance, _ = grid
    states = _states(defs, instance)
    assert set(states) == {("grid_cells", "c143"), ("grid_table", None), ("grid_summary", None)}
    assert states[("grid_cells", "c143")].status == "missing"
    assert states[("grid_table", None)].status == "incomplete"
    assert states[("grid_table", None)].causes == ["grid_cells: upstream c143 missing"]
    assert states[("grid_summary", None)].status == "incomplete"
    # --stale runs the missing cell, then both tables
    todo = stale_partitions(defs, instance, [AssetKey(n) for n in ("grid_cells", "grid_table", "grid_summary")])
    assert todo == {AssetKey("grid_cells"): ["c143"], AssetKey("grid_table"): None, AssetKey("grid_summary"): None}


def test_rematerialized_upstream_cell_makes_the_table_stale(grid):
    defs, instance, _ = grid
    _run(defs, instance, ["grid_cells"], "c143")
    states = _states(defs, instance)
    assert set(states) == {("grid_table", None), ("grid_summary", None)}
    table = states[("grid_table", None)]
    assert table.status == "stale"
    assert table.causes[0].startswith("grid_cells: upstream partition(s) c143 updated (checked explicitly: 144")
    assert states[("grid_summary", None)].status == "stale"  # propagated
    # Dagster's own resolver does not see it (the limit this rule exists for)
    from wse_platform.status import StaleStatus, _resolver
    assert _resolver(defs.resolve_asset_graph(), instance).get_status(AssetKey("grid_table")) == StaleStatus.FRESH

    _run(defs, instance, ["grid_table", "grid_summary"])
    assert _states(defs, instance) == {}


def test_changed_cell_config_makes_that_cell_and_the_table_stale(grid):
    defs, instance, versions = grid
    _run(defs, instance, ["grid_cells"], "c143")
    _run(defs, instance, ["grid_table", "grid_summary"])
    assert _states(defs, instance) == {}

    versions["c007"] = "v2"
    assert observe_sources(defs, instance) == ["grid_config"]
    states = _states(defs, instance)
    assert set(states) == {("grid_cells", "c007"), ("grid_table", None), ("grid_summary", None)}
    assert states[("grid_cells", "c007")].causes == ["grid_config[c007]: has a new dependency data version"]
    assert states[("grid_table", None)].status == "stale"
    assert states[("grid_table", None)].causes == ["grid_cells: upstream c007 stale"]
    todo = stale_partitions(defs, instance, [AssetKey(n) for n in ("grid_cells", "grid_table", "grid_summary")])
    assert todo == {AssetKey("grid_cells"): ["c007"], AssetKey("grid_table"): None, AssetKey("grid_summary"): None}
    assert observe_sources(defs, instance) == []  # unchanged config: nothing recorded
