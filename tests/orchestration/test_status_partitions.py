"""A cell run makes `wse status` (and the `in_sync` check of every run) recompute that cell only.

With 144 cells, re-asking Dagster's stale resolver about every partition of the materialized asset
after each cell run made the per-run check O(cells). Now only the partitions materialized since
the saved report, and the partitions reading them, are asked again; the answer equals a full
recomputation. (The old code asked about all three cells: the test fails there.)
"""
from __future__ import annotations

from dagster import AssetKey, Definitions, StaticPartitionsDefinition, asset, instance_for_test, materialize

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


def test_a_cell_run_recomputes_that_cell_only(monkeypatch):
    defs = Definitions(assets=[cell, verdict, table])
    with instance_for_test() as instance:
        for pk in CELLS.get_partition_keys():
            materialize([cell, verdict], instance=instance, partition_key=pk)
        materialize([table], instance=instance, selection=[table])
        assert status.compute_status(defs, instance) == []          # saved report: everything fresh

        asked: list[tuple[str, str | None]] = []
        real = status._status_of
        monkeypatch.setattr(status, "_status_of", lambda graph, resolver, inst, seen, key, pk, *rest:
                            asked.append((key.to_user_string(), pk)) or real(graph, resolver, inst, seen, key, pk,
                                                                                 *rest))
        materialize([cell], instance=instance, partition_key="b", selection=[cell])
        rows = status.compute_status(defs, instance, only_problems=False)
        assert sorted(asked) == [("cell", "b"), ("table", None), ("verdict", "b")]
        assert {(r.asset, r.partition): r.status for r in rows if r.status != "fresh"} == \
            {("verdict", "b"): "stale", ("table", None): "stale"}
        assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
        assert AssetKey("cell") in defs.resolve_asset_graph().get(AssetKey("verdict")).parent_keys
