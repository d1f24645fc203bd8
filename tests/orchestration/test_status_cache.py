"""`wse status` keeps its result until the instance or the definitions change (issue 13: ≤ 5 s)."""
from __future__ import annotations

import pytest
from dagster import AssetMaterialization, Definitions, asset, instance_for_test, materialize

from wse_platform import status


@asset(code_version="1")
def up() -> int:
    return 1


@asset(code_version="1")
def down(up: int) -> int:
    return up + 1


def _defs(version: str = "1") -> Definitions:
    @asset(code_version=version, name="up")
    def up_v() -> int:
        return 1

    return Definitions(assets=[up_v, down])


def test_cached_until_something_is_recorded_or_redefined(monkeypatch):
    with instance_for_test() as instance:
        defs = _defs()
        assert [c.status for c in status.compute_status(defs, instance)] == ["missing", "missing"]
        materialize([up, down], instance=instance)

        first = status.compute_status(defs, instance, only_problems=False)
        assert [(c.asset, c.status) for c in first] == [("up", "fresh"), ("down", "fresh")]

        calls = []
        real = status._compute_status
        monkeypatch.setattr(status, "_compute_status", lambda d, i: calls.append(1) or real(d, i))
        assert status.compute_status(defs, instance, only_problems=False) == first
        assert calls == []  # answered from the cache

        # a new code version: recomputed, and `down` is stale because of it
        changed = status.compute_status(_defs("2"), instance)
        assert calls == [1] and {c.asset: c.status for c in changed} == {"up": "stale", "down": "stale"}

        # a new event (here a materialization reported from outside a run): recomputed
        instance.report_runless_asset_event(AssetMaterialization("up"))
        after = status.compute_status(defs, instance)
        assert calls == [1, 1] and [(c.asset, c.status) for c in after] == [("down", "stale")]


@pytest.mark.parametrize("garbage", ["", "{not json", '{"key": 1}'])
def test_a_broken_cache_file_is_recomputed(tmp_path, garbage):
    with instance_for_test() as instance:
        defs = _defs()
        materialize([up, down], instance=instance)
        (tmp_path / "x").write_text("")
        cache = status.Path(instance.root_directory) / status.STATUS_CACHE
        cache.write_text(garbage)
        assert [c.status for c in status.compute_status(defs, instance, only_problems=False)] == ["fresh", "fresh"]
