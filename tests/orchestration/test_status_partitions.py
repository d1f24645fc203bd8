"""A cell run makes `wse status` (and the `in_sync` check of every run) recompute that cell only.

With 144 cells, re-asking Dagster's stale resolver about every partition of the materialized asset
after each cell run made the per-run check O(cells). Now only the partitions materialized since
the saved report, and the partitions reading them, are asked again; the answer equals a full
recomputation. (The old code asked about all three cells: the test fails there.)
"""
from __future__ import annotations

from dagster import AssetKey, Definitions, StaticPartitionsDefinition, asset, instance_for_test, materialize

from tests.orchestration._resolver_asks import record_asks
from wse_platform import status

CELLS = StaticPartitionsDefinition(["a", "b", "c"])


@asset(partitions_def=CELLS)
def cell() -> int:
    return 1


@asset(partitions_def=CELLS, deps=[cell])
def verdict() -> None:
    return None


@asset(deps=[verdict])
def table() -> None:
    return None


def _all_built_then_record(defs, instance, monkeypatch) -> list[tuple[str, str | None]]:
    """Every cell and the table built and reported fresh; then the (asset, partition) pairs the status
    computation asks Dagster's stale resolver about."""
    for pk in CELLS.get_partition_keys():
        materialize([cell, verdict], instance=instance, partition_key=pk)
    materialize([table], instance=instance, selection=[table])
    assert status.compute_status(defs, instance) == []          # saved report: everything fresh
    return record_asks(monkeypatch)


def test_a_cell_run_recomputes_that_cell_only(monkeypatch):
    defs = Definitions(assets=[cell, verdict, table])
    with instance_for_test() as instance:
        asked = _all_built_then_record(defs, instance, monkeypatch)
        materialize([cell], instance=instance, partition_key="b", selection=[cell])
        rows = status.compute_status(defs, instance, only_problems=False)
        assert sorted(asked) == [("cell", "b"), ("table", None), ("verdict", "b")]
        assert {(r.asset, r.partition): r.status for r in rows if r.status != "fresh"} == \
            {("verdict", "b"): "stale", ("table", None): "stale"}
        assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
        assert AssetKey("cell") in defs.resolve_asset_graph().get(AssetKey("verdict")).parent_keys


def test_a_cell_runs_check_leaves_the_tables_for_the_next_computation(monkeypatch):
    """A run's `in_sync` check computes the status of the run's assets (and their ancestors) only.
    
    A cell run's check recomputed the final tables downstream of the cell too (they turn dirty with
    every cell run), which was most of the check's cost per cell (bench/cell_overhead.py, issue 24
    item 3). Now what is downstream of the run's assets is left for the next computation (`wse status`,
    the sensor, the tables' own run), which recomputes it: the answers stay those of a full computation."""
    defs = Definitions(assets=[cell, verdict, table])
    with instance_for_test() as instance:
        asked = _all_built_then_record(defs, instance, monkeypatch)
        materialize([cell, verdict], instance=instance, partition_key="b")   # a cell run ...
        rows = status.compute_status(defs, instance, only_problems=False,      # ... and its check
                                     assets=[AssetKey("cell"), AssetKey("verdict")])
        assert sorted(asked) == [("cell", "b"), ("verdict", "b")]           # not the table
        full = status.compute_status(defs, instance, only_problems=False, use_cache=False)
        assert rows == [r for r in full if r.asset in ("cell", "verdict")]
        assert {(r.asset, r.partition): r.status for r in full if r.status != "fresh"} == {("table", None): "stale"}

        asked.clear()  # the next computation (wse status, the sensor) recomputes the table, and only it
        assert status.compute_status(defs, instance, only_problems=False) == full
        assert asked == [("table", None)]
        assert status.compute_status(defs, instance, only_problems=False) == full  # saved again
        assert asked == [("table", None)]
