"""Issue 24 item 3: a table reading every cell asks one query per partitioned dependency, not one per
cell (`dagster_private.BatchedStaleStatusResolver`), with the verdicts of Dagster's own resolver."""
from __future__ import annotations

from dagster import (AssetKey, DagsterInstance, DataVersion, Definitions, MaterializeResult,
                     StaticPartitionsDefinition, asset, instance_for_test, materialize)

from wse_platform import status
from wse_platform.dagster_private import CachingStaleStatusResolver

CELLS = StaticPartitionsDefinition([f"c{i:02d}" for i in range(20)])
BUILDS = [0]


@asset(partitions_def=CELLS, code_version="1")
def gen() -> MaterializeResult:
    BUILDS[0] += 1
    return MaterializeResult(data_version=DataVersion(str(BUILDS[0])))


@asset(partitions_def=CELLS, deps=[gen], code_version="1")
def judged() -> MaterializeResult:
    return MaterializeResult(data_version=DataVersion("same"))  # rebuilt: the same output


@asset(deps=[gen, judged], code_version="1")
def table() -> None:
    return None


def _per_partition_asks(monkeypatch) -> list:
    """The resolver's per-partition "newer record after the provenance's cursor" queries from now on."""
    asked: list = []
    real = DagsterInstance.get_latest_data_version_record

    def spy(self, key, is_source=None, partition_key=None, before_cursor=None, after_cursor=None):
        if after_cursor is not None:
            asked.append((key.to_user_string(), partition_key))
        return real(self, key, is_source, partition_key, before_cursor, after_cursor)
    monkeypatch.setattr(DagsterInstance, "get_latest_data_version_record", spy)
    return asked


def test_a_table_over_every_cell_asks_once_per_dependency_not_per_cell(monkeypatch):
    defs = Definitions(assets=[gen, judged, table])
    with instance_for_test() as instance:
        for pk in CELLS.get_partition_keys():
            materialize([gen, judged], instance=instance, partition_key=pk)
        materialize([table], instance=instance, selection=[table])
        status.compute_status(defs, instance, only_problems=False)
        for pk in ("c03", "c11"):  # two cell runs: new gen, judged rebuilt with the same version
            materialize([gen, judged], instance=instance, partition_key=pk)
        asked = _per_partition_asks(monkeypatch)
        rows = status.compute_status(defs, instance, only_problems=False)
        # old code: one query per cell and partitioned dependency (2 x 20 = 40 for the table alone)
        assert [a for a in asked if a[1] is not None] == []
        # the verdicts of Dagster's own resolver, computed in full
        monkeypatch.setattr(status, "BatchedStaleStatusResolver", CachingStaleStatusResolver)
        assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
        tab = next(r for r in rows if r.asset == "table")
        assert tab.status == "stale"
        assert sorted(c.split(":")[0] for c in tab.causes) == ["gen[c03]", "gen[c11]"]


def test_more_records_than_a_batch_fall_back_to_dagsters_query(monkeypatch):
    """With more materializations since the table than one batch reads, a partition not among them is
    asked Dagster's way: the same verdicts."""
    from wse_platform.dagster_private import BatchedStaleStatusResolver
    defs = Definitions(assets=[gen, judged, table])
    with instance_for_test() as instance:
        for pk in CELLS.get_partition_keys():
            materialize([gen, judged], instance=instance, partition_key=pk)
        materialize([table], instance=instance, selection=[table])
        for pk in ("c03", "c11", "c12"):
            materialize([gen, judged], instance=instance, partition_key=pk)
        monkeypatch.setattr(BatchedStaleStatusResolver, "BATCH", 2)
        asked = _per_partition_asks(monkeypatch)
        rows = status.compute_status(defs, instance, only_problems=False, use_cache=False)
        assert asked  # beyond the batch: Dagster's per-partition query
        monkeypatch.setattr(status, "BatchedStaleStatusResolver", CachingStaleStatusResolver)
        assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
        tab = next(r for r in rows if r.asset == "table")
        assert sorted(c.split(":")[0] for c in tab.causes) == ["gen[c03]", "gen[c11]", "gen[c12]"]
