"""`wse status` keeps its result and recomputes only what changed (issue 13: ≤ 5 s): the assets
with a new event or definition, and their descendants; every other asset's rows are reused."""
from __future__ import annotations

import pytest
from dagster import AssetKey, AssetMaterialization, Definitions, asset, instance_for_test, materialize

from wse_platform import status


@asset(code_version="1")
def up() -> int:
    return 1


@asset(code_version="1")
def down(up: int) -> int:
    return up + 1


@asset(code_version="1")
def other() -> int:
    return 3


def _defs(version: str = "1") -> Definitions:
    @asset(code_version=version, name="up")
    def up_v() -> int:
        return 1

    return Definitions(assets=[up_v, down, other])


def _spy(monkeypatch) -> list[str]:
    """The assets whose partitions are looked up again (one `_materialized` call per recomputed asset)."""
    asked: list[str] = []
    real = status._materialized
    monkeypatch.setattr(status, "_materialized",
                        lambda instance, key, partitioned: asked.append(key.to_user_string())
                        or real(instance, key, partitioned))
    return asked


def _same_as_full(defs, instance) -> list[tuple[str, str]]:
    """The incremental answer, checked against a recomputation from scratch."""
    rows = status.compute_status(defs, instance, only_problems=False)
    assert rows == status.compute_status(defs, instance, only_problems=False, use_cache=False)
    return [(c.asset, c.status) for c in rows]


def test_recomputes_only_what_changed_and_its_descendants(monkeypatch):
    with instance_for_test() as instance:
        defs = _defs()
        assert [c.status for c in status.compute_status(defs, instance)] == ["missing"] * 3
        materialize([up, down, other], instance=instance)
        asked = _spy(monkeypatch)

        assert _same_as_full(defs, instance) == [("other", "fresh"), ("up", "fresh"), ("down", "fresh")]
        assert sorted(asked[:3]) == ["down", "other", "up"]  # the first call after the runs: all three

        asked.clear()
        assert status.compute_status(defs, instance, only_problems=False, use_cache=True)
        assert asked == []  # nothing changed: every row reused
        assert status.compute_status(defs, instance, refresh=True) == [] and sorted(asked) == ["down", "other", "up"]
        asked.clear()  # `wse status --full` (refresh) asked about everything and saved it
        assert status.compute_status(defs, instance) == [] and asked == []

        # a new event of `other` (reported from outside a run): only `other`
        asked.clear()
        instance.report_runless_asset_event(AssetMaterialization("other"))
        rows = status.compute_status(defs, instance, only_problems=False)
        assert asked == ["other"] and rows == status.compute_status(defs, instance, only_problems=False,
                                                                    use_cache=False)

        # a new event of `up`: `down` becomes stale, found without asking `other`
        asked.clear()
        instance.report_runless_asset_event(AssetMaterialization("up"))
        assert [(c.asset, c.status) for c in status.compute_status(defs, instance)] == [("down", "stale")]
        assert asked == ["up", "down"]

        # a wipe records no newer materialization, yet `up` is seen missing
        asked.clear()
        instance.wipe_assets([AssetKey("up")])
        assert dict(_same_as_full(defs, instance))["up"] == "missing"
        assert asked[:2] == ["up", "down"] and "other" not in asked[:2]

        # a new code version of `up`: `up` and `down` are asked again, `other` is reused
        materialize([up, down], instance=instance)
        status.compute_status(defs, instance)
        asked.clear()
        changed = status.compute_status(_defs("2"), instance)
        assert asked == ["up", "down"]
        assert {c.asset: c.status for c in changed} == {"up": "stale", "down": "stale"}


@pytest.mark.parametrize("garbage", ["", "{not json", '{"key": 1}', '{"format": 4, "rows": [{"x": 1}]}'])
def test_a_broken_cache_file_is_recomputed(garbage):
    with instance_for_test() as instance:
        defs = _defs()
        materialize([up, down, other], instance=instance)
        cache = status.Path(instance.root_directory) / status.STATUS_CACHE
        cache.write_text(garbage)
        assert [c.status for c in status.compute_status(defs, instance, only_problems=False)] == ["fresh"] * 3


def test_a_rebuild_with_the_same_data_version_does_not_recompute_what_reads_it(monkeypatch):
    """Issue 24 item 3: rebuilding an unpartitioned source table (`wse_initial_worlds` read by every
    cell) with unchanged content leaves every cell's status as it was: Dagster's resolver compares
    data versions, so the cells are not asked again; when the rebuilt table's own status changed
    (here from stale to fresh), they are."""
    from dagster import DataVersion, Output, StaticPartitionsDefinition

    cells_def = StaticPartitionsDefinition(["a", "b", "c"])

    @asset(code_version="1")
    def top() -> int:
        return 1

    @asset(code_version="1", deps=[top])
    def table():
        return Output(1, data_version=DataVersion("same rows"))

    @asset(code_version="1", partitions_def=cells_def, deps=[table])
    def cell() -> None:
        return None

    defs = Definitions(assets=[top, table, cell])
    with instance_for_test() as instance:
        materialize([top, table], instance=instance)
        for pk in ("a", "b", "c"):
            materialize([cell], instance=instance, partition_key=pk, selection=[cell])
        _same_as_full(defs, instance)
        asked = _spy(monkeypatch)
        materialize([table], instance=instance, selection=[table])  # the same rows again
        assert _same_as_full(defs, instance) == [("top", "fresh"), ("table", "fresh")] + [("cell", "fresh")] * 3
        assert asked[0] == "table" and "cell" not in asked[:2]

        # `top` gets a new version: `table` and the cells are stale; the rebuilt `table` (same rows) is
        # fresh again, and so are the cells — found by asking them again
        instance.report_runless_asset_event(AssetMaterialization("top", tags={status.DATA_VERSION_TAG: "v2"}))
        assert {c.asset for c in status.compute_status(defs, instance)} == {"table", "cell"}
        asked.clear()
        materialize([table], instance=instance, selection=[table])
        assert _same_as_full(defs, instance) == [("top", "fresh"), ("table", "fresh")] + [("cell", "fresh")] * 3
        assert "cell" in asked
