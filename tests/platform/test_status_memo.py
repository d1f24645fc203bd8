"""What `wse_platform.status` keeps per process for the status computations a run makes (each step
hook's `in_sync`, issue 24 item 3): the partition keys of a static partitions definition and the
definitions' signatures, once per object; and the saved result's rows written without a deep copy.
The same values as computed anew (the saved file reads back the same)."""
from __future__ import annotations

import json
from dataclasses import asdict

from dagster import (AssetKey, DynamicPartitionsDefinition, MultiPartitionsDefinition, StaticPartitionsDefinition,
                     asset)

from wse_platform import status
from wse_platform.dagster_private import AssetGraph
from wse_platform.status_rows import CellStatus

CELLS = MultiPartitionsDefinition({"model": StaticPartitionsDefinition(["m1", "m2"]),
                                   "arch": StaticPartitionsDefinition(["B1", "B2", "B3"])})


@asset(partitions_def=CELLS)
def cell() -> None: ...


@asset(deps=[cell], code_version="1")
def table() -> None: ...


def test_rows_are_written_as_asdict_writes_them():
    rows = [CellStatus("a", "B1|m1", "stale", ["x: has a new data version"], {"own": [["k", "line"]], "ext": {"c": ["y"]}}),
            CellStatus("b", None, "missing", [])]
    assert [status._row(r) for r in rows] == [asdict(r) for r in rows]
    assert json.dumps([status._row(r) for r in rows]) == json.dumps([asdict(r) for r in rows])


def test_static_partition_keys_are_made_once_per_definition_and_handed_out_as_new_lists(monkeypatch):
    asked: list[int] = []
    real = MultiPartitionsDefinition.get_partition_keys

    def counting(self, *args, **kwargs):
        asked.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MultiPartitionsDefinition, "get_partition_keys", counting)
    first = status.partition_keys(CELLS)
    first.append("changed by a caller")
    assert status.partition_keys(CELLS) == list(real(CELLS)) and len(asked) == 1
    dynamic = DynamicPartitionsDefinition(name="narrators")
    assert not status._static(dynamic)
    assert not status._static(MultiPartitionsDefinition({"a": StaticPartitionsDefinition(["x"]), "b": dynamic}))


def test_signatures_are_computed_once_per_graph_and_equal_a_fresh_computation(monkeypatch):
    graph = AssetGraph.from_assets([cell, table])
    made: list[int] = []
    real = status._graph_signatures
    monkeypatch.setattr(status, "_graph_signatures", lambda g: made.append(1) or real(g))
    sig = status._signatures(graph)
    sig["cell"] = "changed by a caller"
    again = status._signatures(graph)
    assert again == real(graph) and len(made) == 1
    assert json.loads(again["cell"])[4] == list(CELLS.get_partition_keys())
    other = AssetGraph.from_assets([cell, table])  # reloaded definitions: computed for that graph
    assert status._signatures(other) == again and len(made) == 2
    assert status._signatures(graph) == again and len(made) == 2
    assert AssetKey("table") in graph.toposorted_asset_keys


def _saved(rows: list[CellStatus], mark: int) -> dict:
    return {"format": status._CACHE_FORMAT, "signatures": {"cell": "s"}, "marks": {"cell": [mark, 0]},
            "pending": {}, "rows": [status._row(r) for r in rows]}


def test_the_result_this_process_saved_is_read_back_without_parsing_until_another_process_replaces_it(
        tmp_path, monkeypatch):
    path = tmp_path / status.STATUS_CACHE
    rows = [CellStatus("cell", "B1|m1", "fresh", []), CellStatus("cell", "B2|m1", "stale", ["code"], {"own": [["k", "x"]]})]
    data = _saved(rows, 7)
    path.write_text(json.dumps(data), encoding="utf-8")
    status._remember_saved(path, data)
    parsed: list[int] = []
    real = json.loads
    monkeypatch.setattr(status.json, "loads", lambda text, *a, **k: parsed.append(1) or real(text, *a, **k))
    first = status._load_cache(path)
    assert not parsed
    first["marks"]["cell"] = [0, 0]                         # a caller changes the marks it got
    second = status._load_cache(path)
    assert second["rows"] == rows and second["marks"] == {"cell": [7, 0]} and not parsed
    monkeypatch.setattr(status.json, "loads", real)
    assert second == {**json.loads(path.read_text()), "rows": rows}  # what parsing the file gives
    other = tmp_path / "other.json"                         # another process saves its result
    other.write_text(json.dumps(_saved(rows[:1], 9)), encoding="utf-8")
    other.replace(path)
    third = status._load_cache(path)
    assert third["marks"] == {"cell": [9, 0]} and third["rows"] == rows[:1]
