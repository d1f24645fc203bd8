"""`dagster_private.latest_materialization_ids` and `latest_observation_ids` (what `status.event_marks`
reads, issue 24 item 3) answer what `instance.get_asset_records` and `fetch_observations` answer, without
deserializing the stored materializations and in one query for all observed assets."""
from __future__ import annotations

import time

from dagster import (AssetKey, AssetMaterialization, AssetObservation, Definitions, MaterializeResult,
                     StaticPartitionsDefinition, TableColumn, TableSchema, asset, instance_for_test, materialize)

from wse_platform import status
from wse_platform.dagster_private import latest_materialization_ids, latest_observation_ids

PARTS = StaticPartitionsDefinition(["a", "b"])
SCHEMA = TableSchema(columns=[TableColumn(f"c{i}", "int") for i in range(20)])


@asset(partitions_def=PARTS)
def cell() -> MaterializeResult:
    return MaterializeResult(metadata={"dagster/column_schema": SCHEMA, "rows": 3})


@asset(deps=[cell])
def table() -> MaterializeResult:
    return MaterializeResult(metadata={"dagster/column_schema": SCHEMA})


KEYS = [AssetKey("cell"), AssetKey("table"), AssetKey("never")]


def _from_records(instance) -> dict:
    return {r.asset_entry.asset_key: r.asset_entry.last_materialization_storage_id
            for r in instance.get_asset_records(KEYS) if r.asset_entry.last_materialization_storage_id}


def test_the_ids_are_those_of_the_asset_records_through_builds_a_wipe_and_a_rebuild():
    with instance_for_test() as instance:
        assert latest_materialization_ids(instance, KEYS) == _from_records(instance) == {}
        for pk in PARTS.get_partition_keys():
            materialize([cell], instance=instance, partition_key=pk)
        materialize([cell, table], instance=instance, selection=[table])
        instance.report_runless_asset_event(AssetMaterialization("cell", partition="a"))
        seen = latest_materialization_ids(instance, KEYS)
        assert seen == _from_records(instance) and set(seen) == {AssetKey("cell"), AssetKey("table")}
        newest = instance.fetch_materializations(AssetKey("cell"), limit=1).records[0]
        assert seen[AssetKey("cell")] == newest.storage_id
        instance.wipe_assets([AssetKey("cell")])
        assert latest_materialization_ids(instance, KEYS) == _from_records(instance)
        assert AssetKey("cell") not in latest_materialization_ids(instance, KEYS)
        materialize([cell], instance=instance, partition_key="b")
        assert latest_materialization_ids(instance, KEYS) == _from_records(instance)
        assert AssetKey("cell") in latest_materialization_ids(instance, KEYS)


def test_a_row_without_a_stored_record_is_answered_by_dagster_from_the_event_log():
    with instance_for_test() as instance:
        materialize([cell, table], instance=instance, partition_key="a", selection=[cell])
        materialize([cell, table], instance=instance, selection=[table])
        storage = instance.event_log_storage
        with storage.index_connection() as conn:  # as an older Dagster left it: no record on the row
            conn.exec_driver_sql("UPDATE asset_keys SET last_materialization = NULL WHERE asset_key LIKE '%cell%'")
        seen = latest_materialization_ids(instance, KEYS)
        assert seen == _from_records(instance) and AssetKey("cell") in seen


def test_event_marks_deserializes_no_materialization(monkeypatch):
    """On the old code (`get_asset_records`) every asset's stored materialization, with its metadata,
    was deserialized: ~85 % of `event_marks`."""
    import dagster._core.storage.event_log.sql_event_log as sql_event_log
    real, read = sql_event_log.deserialize_value, []

    def counting(value, *args, **kwargs):
        read.append(value)
        return real(value, *args, **kwargs)
    with instance_for_test() as instance:
        materialize([cell, table], instance=instance, partition_key="a", selection=[cell])
        materialize([cell, table], instance=instance, selection=[table])
        graph = Definitions(assets=[cell, table]).resolve_asset_graph()
        monkeypatch.setattr(sql_event_log, "deserialize_value", counting)
        marks = status.event_marks(graph, instance)
    assert all(m[0] for m in marks.values())
    assert not [v for v in read if "AssetMaterialization" in str(v)]


def _observed(instance, keys) -> dict:
    found = {k: instance.fetch_observations(k, limit=1).records for k in keys}
    return {k: r[0].storage_id for k, r in found.items() if r}


def test_the_observation_ids_are_those_fetch_observations_finds_through_a_wipe():
    keys = [AssetKey("src"), AssetKey("other"), AssetKey("never")]
    with instance_for_test() as instance:
        assert latest_observation_ids(instance, keys) == {} and latest_observation_ids(instance, []) == {}
        for name in ("src", "other", "src"):
            instance.report_runless_asset_event(AssetObservation(name, metadata={"v": name}))
        materialize([cell], instance=instance, partition_key="a")  # other events are not observations
        seen = latest_observation_ids(instance, keys)
        assert seen == _observed(instance, keys) and set(seen) == {AssetKey("src"), AssetKey("other")}
        time.sleep(0.01)
        instance.wipe_assets([AssetKey("src")])
        assert latest_observation_ids(instance, keys) == _observed(instance, keys)
        assert AssetKey("src") not in latest_observation_ids(instance, keys)
        time.sleep(0.01)
        instance.report_runless_asset_event(AssetObservation("src"))
        seen = latest_observation_ids(instance, keys)
        assert seen == _observed(instance, keys) and AssetKey("src") in seen


def _heads_from_records(instance) -> dict:
    return {r.asset_entry.asset_key: (rec.storage_id, rec.run_id, rec.timestamp) for r in instance.get_asset_records(KEYS)
            if (rec := r.asset_entry.last_materialization_record) is not None}


def test_the_heads_are_those_of_the_asset_records_through_builds_a_runless_event_a_wipe_and_a_rebuild():
    from wse_platform.dagster_private import latest_materialization_heads

    def heads(instance) -> dict:
        return {k: tuple(h) for k, h in latest_materialization_heads(instance, KEYS).items()}

    with instance_for_test() as instance:
        assert heads(instance) == _heads_from_records(instance) == {}
        materialize([cell, table], instance=instance, partition_key="a", selection=[cell])
        materialize([cell, table], instance=instance, selection=[table])
        seen = heads(instance)
        assert seen == _heads_from_records(instance) and set(seen) == {AssetKey("cell"), AssetKey("table")}
        assert all(run for _, run, _ in seen.values())
        instance.report_runless_asset_event(AssetMaterialization("cell", partition="b"))  # no run id
        assert heads(instance) == _heads_from_records(instance) and heads(instance)[AssetKey("cell")][1] == ""
        instance.wipe_assets([AssetKey("cell")])
        assert heads(instance) == _heads_from_records(instance) and AssetKey("cell") not in heads(instance)
        materialize([cell], instance=instance, partition_key="b")
        assert heads(instance) == _heads_from_records(instance) and AssetKey("cell") in heads(instance)


def test_run_materialized_says_which_assets_a_run_materialized_as_its_records_do():
    from dagster import DagsterEventType

    from wse_platform.dagster_private import run_materialized

    @asset
    def other() -> None:
        ...

    with instance_for_test() as instance:
        first = materialize([cell, table, other], instance=instance, partition_key="a", selection=[cell])
        second = materialize([other], instance=instance)
        for run in (first, second):
            recs = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
            built = {r.event_log_entry.dagster_event.asset_key for r in recs}
            for key in (AssetKey("cell"), AssetKey("table"), AssetKey("other")):
                assert run_materialized(instance, run.run_id, key) == (key in built)
        assert run_materialized(instance, first.run_id, AssetKey("cell"))
        assert not run_materialized(instance, second.run_id, AssetKey("cell"))
