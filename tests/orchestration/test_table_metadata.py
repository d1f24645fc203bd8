"""What a Dagster user expects on every table asset (issue 13): whole-table row counts, table name,
column schema (from the DDL at definition time, from the warehouse at materialization), a typed
preview, owners and tags, and a data version that follows the rows."""
from __future__ import annotations

import polars as pl
from dagster import AssetKey, TableMetadataValue, TableSchema

from assets.helpers import write_table
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse


def _trajs(model, lengths):
    return pl.DataFrame({"model": model, "arch": "B1", "seed_id": [f"s{i}" for i in range(len(lengths))],
                         "length": lengths, "horizon": 2})


def test_write_table_metadata_and_data_version(config_file):
    wh = Warehouse(load_settings(str(config_file)).warehouse)
    first = write_table(wh, "wse_trajectories", _trajs("a", [1, 2, 0]), key={"model": "a", "arch": "B1"})
    second = write_table(wh, "wse_trajectories", _trajs("b", [2]), key={"model": "b", "arch": "B1"})
    meta = second.metadata
    assert meta["dagster/row_count"] == 4 and meta["partition_row_count"] == 1  # whole table, then the cell
    assert meta["dagster/table_name"] == f"{wh.path.stem}.main.wse_trajectories"
    schema = meta["dagster/column_schema"]
    assert isinstance(schema, TableSchema) and {"model", "length"} <= {c.name for c in schema.columns}
    preview = meta["preview"]
    assert isinstance(preview, TableMetadataValue)
    assert preview.value.records[0].data["length"] == 2  # typed: a number, not text
    again = write_table(wh, "wse_trajectories", _trajs("a", [1, 2, 0]), key={"model": "a", "arch": "B1"})
    assert again.data_version == first.data_version  # identical rows, identical version
    other = write_table(wh, "wse_trajectories", _trajs("a", [1, 2, 2]), key={"model": "a", "arch": "B1"})
    assert other.data_version != first.data_version


def test_table_assets_carry_schema_table_name_owner_and_llm_calls_lineage(config_file):
    from wse_platform.definitions import build_definitions

    graph = build_definitions(str(config_file)).resolve_asset_graph()
    for name in ("wse_cell_metrics", "ncp_episodes", "endings_corpus_tension", "wse_trajectory_steps"):
        node = graph.get(AssetKey(name))
        assert isinstance(node.metadata["dagster/column_schema"], TableSchema), name
        assert node.metadata["dagster/table_name"].endswith(f".main.{name}")
        bench, layer = node.group_name.split("_", 1)  # groups by role (assets/groups.py), e.g. wse_tables
        assert node.owners and node.tags.get("benchmark", "").split("_")[0] == bench and node.tags["layer"] == layer
        assert node.automation_condition is not None  # shown in the UI's Automation tab
    llm_assets = {k for k in graph.materializable_asset_keys if "llm" in (graph.get(k).kinds or set())}
    assert llm_assets and llm_assets <= graph.get(AssetKey("llm_calls")).parent_keys
    assert AssetKey("llm_usage") in graph.get(AssetKey("llm_calls")).child_keys


def test_call_ids_are_not_part_of_the_data_version():
    """A rerun on cached answers writes the same verdicts with new call ids (they hash the run id):
    the data version stays, so the run skips the status of what is downstream (issue 24 item 3);
    a changed answer, or a column added or dropped, still gives a new one."""
    from assets.helpers import content_version

    def verdicts(ids, verdict="consistent", **extra):
        return pl.DataFrame({"seed_id": ["s1", "s2"], "verdict": [verdict, "uncertain"],
                             "llm_call_ids": [[f"{ids}-1"], [f"{ids}-2", f"{ids}-3"]], **extra})

    assert content_version(verdicts("run1")) == content_version(verdicts("run2"))
    assert content_version(verdicts("run1")) != content_version(verdicts("run1", verdict="inconsistent"))
    assert content_version(verdicts("run1")) != content_version(verdicts("run1").drop("llm_call_ids"))
    one = pl.DataFrame({"rating": [3, 4], "llm_call_id": ["r1-a", "r1-b"]})
    assert content_version(one) == content_version(one.with_columns(llm_call_id=pl.lit("r2")))
    # a table without call ids keeps the version it had before (no rebuild marked stale by this change)
    assert content_version(pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})) == "edd7c6e7ce1f5296"  # (main before it)
