"""Issue 13's "the UI must not show green when it is not", on the tiny grid and the embedded model:
the UI's automation (driven by `_daemon.Daemon` the way the daemon drives it) rebuilds exactly what
`wse materialize --stale` rebuilds."""
from __future__ import annotations

import pytest

from tests.orchestration._daemon import Daemon, setup as _setup
from tests.orchestration._tiny import CELL, edit_config, judge_prompt_v2

pytestmark = pytest.mark.slow


def _version(instance, key, partition=None, is_source=False):
    from dagster._core.definitions.data_version import extract_data_version_from_entry

    rec = instance.get_latest_data_version_record(key, is_source=is_source, partition_key=partition)
    return None if rec is None else extract_data_version_from_entry(rec.event_log_entry)


def _latest_id(instance, key):
    from dagster import AssetRecordsFilter

    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
    return res.records[0].storage_id if res.records else None


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

    from dagster import AssetKey
    versions = {(a, p): _version(instance, AssetKey.from_user_string(a), p) for a, p in expected}
    ran = daemon.settle() - before
    assert ran <= expected and ("wse_consistency_verdicts", CELL) in ran and ("wse_cell_metrics", None) in ran
    # `--stale` plans its whole set up front; the automation requests an asset only once an input got a new data
    # version: what it left out had every rebuilt input keep its data version (a re-judge whose rows came back
    # the same, e.g. the cached richness panel: call ids are not part of a table's data version)
    graph = defs.resolve_asset_graph()
    for a, p in expected - ran:
        parents = {k.to_user_string() for k in graph.get(AssetKey.from_user_string(a)).parent_keys}
        touched = [(pa, pp) for pa, pp in ran if pa in parents]
        assert touched, f"{a} [{p}] was stale but none of its inputs was rebuilt, and it was not"
        assert all(_version(instance, AssetKey.from_user_string(pa), pp) == versions[(pa, pp)]
                   for pa, pp in touched), f"{a} [{p}]: an input got a new data version, yet it was not rebuilt"
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
