"""Issue 13's "the UI must not show green when it is not", on the tiny grid and the embedded model.

What the UI (under `wse ui`, the daemon) does is driven here the way the daemon drives it:
every sensor of the definitions ticks (the `config_observer` sensor, and Dagster's own
automation-condition evaluation for `wse_automation`), the runs it asks for are executed, and
the loop repeats until nothing more is requested.
"""
from __future__ import annotations

import pytest
from dagster import (
    AssetKey,
    AutomationConditionSensorDefinition,
    build_sensor_context,
    evaluate_automation_conditions,
)

from tests.orchestration._tiny import CELL, edit_config, judge_prompt_v2

pytestmark = pytest.mark.slow


class Daemon:
    """The daemon's view of one code location: sensor ticks with cursors, and the runs they request."""

    def __init__(self, defs, instance):
        self.defs, self.instance, self.cursor = defs, instance, None
        self.graph = defs.resolve_asset_graph()

    def tick(self) -> set[tuple[str, str | None]]:
        """One tick of every sensor; returns the (asset, partition) pairs whose runs were requested."""
        wanted: set[tuple[str, str | None]] = set()
        for sensor in self.defs.sensors:
            if isinstance(sensor, AutomationConditionSensorDefinition):
                result = evaluate_automation_conditions(self.defs, self.instance, cursor=self.cursor)
                self.cursor = result.cursor
                for key in self.graph.materializable_asset_keys:
                    wanted |= {(key.to_user_string(), None if p is None else str(p))
                               for p in result.get_requested_partitions(key)}
                continue
            data = sensor.evaluate_tick(build_sensor_context(instance=self.instance, definitions=self.defs))
            for ev in data.asset_events:
                self.instance.report_runless_asset_event(ev)
            for req in data.run_requests:
                wanted |= {(k.to_user_string(), req.partition_key) for k in req.asset_selection}
        return wanted

    def run(self, wanted: set[tuple[str, str | None]]) -> None:
        from wse_platform.runner import execute, plan

        keys = sorted({AssetKey(a) for a, _ in wanted}, key=lambda k: k.to_user_string())
        parts = {k: (None if self.graph.get(k).partitions_def is None
                     else sorted(p for a, p in wanted if a == k.to_user_string())) for k in keys}
        report = execute(self.defs, plan(self.defs, keys, parts), self.instance, echo=lambda *_: None)
        assert report.ok

    def settle(self, max_ticks: int = 8) -> set[tuple[str, str | None]]:
        """Tick and run until nothing is requested; everything requested on the way."""
        done: set[tuple[str, str | None]] = set()
        for _ in range(max_ticks):
            wanted = self.tick()
            if not wanted:
                return done
            done |= wanted
            self.run(wanted)
        raise AssertionError(f"automation did not settle: {sorted(done)}")


def _version(instance, key, partition=None, is_source=False):
    from dagster._core.definitions.data_version import extract_data_version_from_entry

    rec = instance.get_latest_data_version_record(key, is_source=is_source, partition_key=partition)
    return None if rec is None else extract_data_version_from_entry(rec.event_log_entry)


def _latest_id(instance, key):
    from dagster import AssetRecordsFilter

    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
    return res.records[0].storage_id if res.records else None


def _setup(cfg):
    from resources.settings import settings_for
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import get_instance

    return build_definitions(str(cfg)), get_instance(settings_for(str(cfg)))


def _stale_set(defs, instance) -> set[tuple[str, str | None]]:
    from wse_platform.cli import stale_partitions
    from wse_platform.runner import materializable, observe_sources

    observe_sources(defs, instance)
    todo = stale_partitions(defs, instance, list(materializable(defs)))
    return {(k.to_user_string(), p) for k, pks in todo.items() for p in (pks or [None])}


def test_judge_config_change_is_rebuilt_by_the_ui_automation_exactly_like_materialize_stale(tiny):
    from wse_platform.status import compute_status

    defs, instance = _setup(tiny)
    daemon = Daemon(defs, instance)
    assert daemon.tick() == set()  # fresh grid: the first tick requests nothing
    # normally empty; not when source files changed since the session's baseline was built
    before = _stale_set(defs, instance)

    prompts = judge_prompt_v2(tiny.parent)

    def edit(raw):
        raw["prompts_dir"] = str(prompts)
        raw["wse"]["consistency_judge"]["prompt_version"] = "v2"
    edit_config(tiny, edit)  # the loaded definitions stay as they are, as in a running `wse ui`

    expected = _stale_set(defs, instance) - before  # what `wse materialize --stale` would run now
    assert ("wse_consistency_verdicts", CELL) in expected and ("wse_cell_metrics", None) in expected
    assert ("llm_usage", None) in expected  # the re-judging adds calls
    assert not {a for a, _ in expected} & {"wse_trajectory_steps", "wse_trajectories"}

    requested = daemon.settle()
    assert requested - before == expected
    # and afterwards nothing is stale or missing (but what was before the edit)
    assert {(c.asset, c.partition) for c in compute_status(defs, instance)} <= before


def test_noop_rerun_triggers_no_rebuild_and_llm_calls_is_marked_updated(tiny):
    from dagster import AssetKey

    from wse_platform.runner import RunPlanStep, execute

    defs, instance = _setup(tiny)
    daemon = Daemon(defs, instance)
    assert daemon.tick() == set()
    steps, calls = AssetKey("wse_trajectory_steps"), AssetKey("llm_calls")
    version = _version(instance, steps, CELL)
    calls_before = _latest_id(instance, calls)

    # rerun the generation cell: every answer comes from the LLM cache, the rows are identical
    report = execute(defs, [RunPlanStep([steps, AssetKey("wse_trajectories")], CELL)], instance, echo=lambda *_: None)
    assert report.ok
    assert version is not None and _version(instance, steps, CELL) == version
    # the cache-hit calls were recorded: llm_calls shows as updated, so llm_usage follows
    calls_after = _latest_id(instance, calls)
    assert calls_after is not None and (calls_before is None or calls_after > calls_before)
    # nothing downstream of the unchanged cell is requested by any sensor, only llm_usage
    assert daemon.tick() == {("llm_usage", None)}


def test_cell_config_change_is_stale_for_materialize_and_requested_by_the_automation(tiny):
    """A generation setting (wse.horizon) changes one cell's config asset: `wse status` /
    `wse materialize --stale` see the cell stale (Dagster's resolver alone does not: it reads a
    partitioned external asset's versions from observations only) and name the edit; the UI's
    automation requests exactly the cell's generation assets first."""
    from wse_platform.status import compute_status

    defs, instance = _setup(tiny)
    daemon = Daemon(defs, instance)
    assert daemon.tick() == set()
    before = _stale_set(defs, instance)
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))
    stale = _stale_set(defs, instance) - before
    assert {("wse_trajectories", CELL), ("wse_trajectory_steps", CELL), ("wse_cell_metrics", None)} <= stale
    # the answer above was incremental (only the edited config's descendants asked again): the same
    # as asking about every asset from scratch
    every = compute_status(defs, instance, only_problems=False)
    assert every == compute_status(defs, instance, only_problems=False, use_cache=False)
    causes = {(c.asset, c.partition): c.causes for c in every}
    assert causes[("wse_trajectories", CELL)] == [
        f"wse_cell_config[{CELL}]: has a new data version (wse-gen › horizon: 1 → 2)"]
    # the config was recorded by `_stale_set` (as `wse status` does); the daemon's next tick
    # asks for the generation cell, whose run then brings the rest (settled in the judge test)
    assert daemon.tick() == {("wse_trajectories", CELL), ("wse_trajectory_steps", CELL)}


def test_config_assets_show_as_materialized_with_their_version(tiny):
    from dagster import AssetKey

    from tests.orchestration._tiny import status_of

    defs, instance, _ = status_of(tiny)
    graph = defs.resolve_asset_graph()
    for name in ("wse_cell_config", "wse_judge_config"):
        node = graph.get(AssetKey(name))
        assert not node.is_observable  # not an observed source the UI calls "missing"
        if node.partitions_def is not None:
            assert set(instance.get_materialized_partitions(node.key)) == set(node.partitions_def.get_partition_keys())
        assert _version(instance, node.key, CELL if node.partitions_def else None) is not None


def test_every_judge_config_asset_names_its_judge_for_the_nightly_rejudge():
    """The nightly re-judge schedule visits every judge configuration asset, the 100-Endings rubric
    judge's included (its backend tag comes from the configured rubric model)."""
    from assets.automation import _judge_models
    from assets.versioning import CONFIG_SOURCES
    from wse_platform.config import settings_from_dict

    models = {"m": {"backend": "embedded", "model_id": "x.gguf"}, "r": {"backend": "litellm", "model_id": "openai/x"}}
    s = settings_from_dict({"models": models, "endings": {"forecaster": "m", "judge": "m", "allow_same_model": True,
                                                          "generators": ["m"], "rubric": {"model": "r"}}})
    judges = _judge_models(s)
    assert judges["endings_rubric_config"] == "r" and judges["endings_judge_config"] == "m"
    judge_sources = {k for k in CONFIG_SOURCES if "judge" in k or "rubric" in k or "reaudit" in k}
    assert judge_sources <= set(judges)
