"""The status cache after a change of the graph's partitions (issue 21; issue 24 item 3): a model, an
architecture or a narrator added or removed gives the cell assets new partition keys. Each partition's
status is kept with what it was computed from; only the partitions whose inputs changed are asked again —
the new ones, those with a new config version, what reads them — and the answer equals a computation
from scratch (`use_cache=False`, what `wse status --full` does). On the old code an asset whose
partition keys changed was recomputed in full, with everything downstream of it."""
from __future__ import annotations

from dagster import (AssetMaterialization, AssetSpec, DataVersion, Definitions, MaterializeResult,
                     StaticPartitionsDefinition, asset, instance_for_test, materialize)

from tests.orchestration._resolver_asks import record_asks
from wse_platform import status
from wse_platform.runner import QUIET_RUN_CONFIG

BUILDS = [0]


def _defs(keys: list[str], verdict_version: str = "1", fail: str | None = None) -> tuple[Definitions, list]:
    """cell_config (a partitioned config asset, versions recorded from outside) → cell → verdict → table."""
    cells = StaticPartitionsDefinition(keys)
    config = AssetSpec("cell_config", partitions_def=cells)

    @asset(partitions_def=cells, deps=[config], code_version="1")
    def cell(context) -> MaterializeResult:
        BUILDS[0] += 1  # a new output every time: what reads it is stale
        if context.partition_key == fail:
            raise RuntimeError("a failed run")
        return MaterializeResult(data_version=DataVersion(str(BUILDS[0])))

    @asset(partitions_def=cells, deps=[cell], code_version=verdict_version)
    def verdict() -> None:
        return None

    @asset(deps=[verdict], code_version="1")
    def table() -> None:
        return None

    return Definitions(assets=[config, cell, verdict, table]), [cell, verdict, table]


def _version(instance, pk: str, version: str) -> None:
    instance.report_runless_asset_event(AssetMaterialization(
        "cell_config", partition=pk, tags={status.DATA_VERSION_TAG: version}))


def _build(instance, keys, assets, pks) -> None:
    for pk in pks:
        materialize(assets[:2], instance=instance, partition_key=pk, raise_on_error=False,
                    run_config=QUIET_RUN_CONFIG)
    materialize(assets, instance=instance, selection=[assets[2]], run_config=QUIET_RUN_CONFIG)


def _same_as_full(defs, instance) -> dict[tuple[str, str | None], str]:
    rows = status.compute_status(defs, instance, only_problems=False)
    assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
    return {(r.asset, r.partition): r.status for r in rows if r.status != "fresh"}


def _fresh_grid(instance, keys):
    defs, assets = _defs(keys)
    for pk in keys:
        _version(instance, pk, "v1")
    _build(instance, keys, assets, keys)
    assert _same_as_full(defs, instance) == {}
    return defs, assets


def test_cells_added_removed_or_with_a_new_code_version_ask_about_what_changed_only(monkeypatch):
    with instance_for_test() as instance:
        _fresh_grid(instance, ["a", "b"])
        asked = record_asks(monkeypatch)

        defs, _ = _defs(["a", "b", "c"])  # a model added: new cells, never built (no resolver ask)
        _version(instance, "c", "v1")
        status.compute_status(defs, instance)
        assert asked == [("table", None)]
        assert _same_as_full(defs, instance) == {("cell", "c"): "missing", ("verdict", "c"): "missing",
                                                 ("table", None): "incomplete"}

        asked.clear()
        defs, _ = _defs(["a"])  # removed: their rows go, the table is asked again
        status.compute_status(defs, instance)
        assert asked == [("table", None)]
        assert _same_as_full(defs, instance) == {}

        asked.clear()
        defs, _ = _defs(["a", "b"])  # back again: built before, so asked like any built cell
        status.compute_status(defs, instance)
        assert sorted(asked) == [("cell", "b"), ("table", None), ("verdict", "b")]
        assert _same_as_full(defs, instance) == {}

        asked.clear()  # a new code version of `verdict` and a new cell: every built partition of `verdict`
        defs, _ = _defs(["a", "b", "c"], verdict_version="2")
        status.compute_status(defs, instance)
        assert sorted(asked) == [("table", None), ("verdict", "a"), ("verdict", "b")]
        assert _same_as_full(defs, instance) == {("verdict", "a"): "stale", ("verdict", "b"): "stale",
                                                 ("cell", "c"): "missing", ("verdict", "c"): "missing",
                                                 ("table", None): "stale"}


def test_new_config_versions_and_a_failed_run_ask_about_those_cells_and_what_reads_them(monkeypatch):
    with instance_for_test() as instance:
        defs, assets = _fresh_grid(instance, ["a", "b"])
        asked = record_asks(monkeypatch)
        _version(instance, "b", "v2")  # `observe_sources` recording one cell's new config version
        status.compute_status(defs, instance)
        assert sorted(asked) == [("cell", "b"), ("table", None), ("verdict", "b")]
        assert _same_as_full(defs, instance) == {("cell", "b"): "stale", ("verdict", "b"): "stale",
                                                 ("table", None): "stale"}

        asked.clear()  # and a new cell at the same time as another new version
        defs, assets = _defs(["a", "b", "c"], fail="b")
        _version(instance, "c", "v1")
        _version(instance, "a", "v2")
        status.compute_status(defs, instance)
        assert sorted(asked) == [("cell", "a"), ("table", None), ("verdict", "a")]
        assert _same_as_full(defs, instance) == {
            **{(a, pk): "stale" for a in ("cell", "verdict") for pk in ("a", "b")},
            ("cell", "c"): "missing", ("verdict", "c"): "missing", ("table", None): "stale"}

        asked.clear()  # a run: `a` rebuilt, `b` fails, then the table
        _build(instance, ["a", "b", "c"], assets, ["a", "b"])
        status.compute_status(defs, instance)
        assert sorted(asked) == [("cell", "a"), ("table", None), ("verdict", "a")]
        assert _same_as_full(defs, instance) == {("cell", "b"): "stale", ("verdict", "b"): "stale",
                                                 ("cell", "c"): "missing", ("verdict", "c"): "missing",
                                                 ("table", None): "stale"}
