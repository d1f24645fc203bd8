"""Issue 6's staleness promises on the real graph and the embedded model (tiny grid, see _tiny.py):
a judge change re-judges without generating, a new model adds only its cells, and the sensor /
schedule request exactly the re-judging runs."""
from __future__ import annotations

import polars as pl
import pytest
from dagster import AssetKey, build_schedule_context, build_sensor_context

from tests.orchestration._tiny import ARCH, CELL, MODEL, edit_config, judge_prompt_v2, status_of

pytestmark = pytest.mark.slow

JUDGE_ROLES = {"wse.consistency_judge", "wse.richness_judge"}
GENERATION_ASSETS = {"wse_trajectory_steps", "wse_trajectories"}
REJUDGED = {"wse_consistency_verdicts", "wse_richness_verdicts", "wse_consistency_steps",
            "wse_trajectory_consistency"}
V1 = f"wse.consistency_judge:{MODEL}:v1:x1"
V2 = f"wse.consistency_judge:{MODEL}:v2:x1"


def _use_judge_v2(cfg):
    prompts = judge_prompt_v2(cfg.parent)

    def edit(raw):
        raw["prompts_dir"] = str(prompts)
        raw["wse"]["consistency_judge"]["prompt_version"] = "v2"
    edit_config(cfg, edit)


def _descendants(graph, name: str) -> set[str]:
    out, frontier = set(), [AssetKey(name)]
    while frontier:
        for child in graph.get(frontier.pop()).child_keys:
            if child.to_user_string() not in out and graph.get(child).is_materializable:
                out.add(child.to_user_string())
                frontier.append(child)
    return out


def _warehouse(cfg):
    from resources.settings import settings_for
    from wse_platform.warehouse import Warehouse
    return Warehouse(settings_for(str(cfg)).warehouse)


def test_baseline_is_fresh(tiny):
    _, _, problems = status_of(tiny)
    assert problems == []


def test_judge_prompt_change_rejudges_without_generating(tiny, capsys):
    from wse_platform import cli

    wh = _warehouse(tiny)
    runs_before = set(wh.query("SELECT DISTINCT run_id FROM llm_calls")["run_id"])
    old_votes = wh.query("SELECT * FROM wse_consistency_verdicts")
    assert set(old_votes["judge_config_id"]) == {V1}
    _use_judge_v2(tiny)

    defs, _, problems = status_of(tiny)
    graph = defs.resolve_asset_graph()
    stale = {(c.asset, c.partition) for c in problems if c.status == "stale"}
    assert [c for c in problems if c.status != "stale"] == []
    assert {(a, CELL) for a in REJUDGED} <= stale
    # exactly the judge config's downstream: verdict cells and the WSE tables built from them
    assert {a for a, _ in stale} == _descendants(graph, "wse_judge_config")
    assert {"wse_cell_metrics", "wse_pareto"} <= {a for a, _ in stale}
    assert not {a for a, _ in stale} & (GENERATION_ASSETS | {"wse_generation_failures", "llm_usage"})
    causes = {(c.asset, c.partition): c.causes for c in problems}
    assert any(c.startswith("wse_judge_config:") for c in causes[("wse_consistency_verdicts", CELL)])

    assert cli.main(["--config", str(tiny), "status"]) == 0
    out = capsys.readouterr().out
    assert f"wse_consistency_verdicts[{CELL}]" in out and "wse_trajectories" not in out

    assert cli.main(["--config", str(tiny), "materialize", "--stale"]) == 0
    calls = wh.query("SELECT run_id, role FROM llm_calls").filter(~pl.col("run_id").is_in(list(runs_before)))
    assert "wse.consistency_judge" in set(calls["role"])
    assert set(calls["role"]) <= JUDGE_ROLES  # zero narrator / story / character calls

    votes = wh.query("SELECT * FROM wse_consistency_verdicts")
    assert set(votes["judge_config_id"]) == {V1, V2}
    assert votes.filter(pl.col("judge_config_id") == V1).height == old_votes.height  # old verdicts kept
    assert set(wh.query("SELECT judge_config_id FROM wse_cell_metrics")["judge_config_id"]) == {V2}
    assert set(wh.query("SELECT judge_config_id FROM wse_trajectory_consistency")["judge_config_id"]) == {V1, V2}
    assert status_of(tiny)[2] == []


def test_adding_a_model_adds_only_its_cells(tiny):
    from wse_platform.cli import stale_partitions
    from wse_platform.runner import materializable

    def edit(raw):
        raw["models"]["extra"] = {"backend": "litellm", "model_id": "openai/not-called"}
        raw["wse"]["models"].append("extra")
    edit_config(tiny, edit)

    defs, instance, problems = status_of(tiny)
    graph = defs.resolve_asset_graph()
    assert [c for c in problems if c.status == "stale"] == []
    new_cell = f"{ARCH}|extra"
    partitioned = {k.to_user_string() for k in graph.materializable_asset_keys
                   if graph.get(k).partitions_def is not None}
    assert partitioned >= GENERATION_ASSETS | REJUDGED
    assert {(c.asset, c.partition) for c in problems if c.status == "missing"} == {(a, new_cell) for a in partitioned}
    incomplete = {c.asset for c in problems if c.status == "incomplete"}
    assert "wse_cell_metrics" in incomplete
    assert all(graph.get(AssetKey(a)).partitions_def is None for a in incomplete)

    # `--stale` would run the new cells (never an existing one) and then rebuild the tables
    todo = stale_partitions(defs, instance, list(materializable(defs)))
    assert {k.to_user_string(): v for k, v in todo.items() if v is not None} == {a: [new_cell] for a in partitioned}
    assert incomplete <= {k.to_user_string() for k, v in todo.items() if v is None}


def test_config_observer_and_schedule_request_rejudging(tiny):
    from dagster import AssetMaterialization

    from resources.settings import settings_for
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import RunPlanStep, execute, get_instance

    instance = get_instance(settings_for(str(tiny)))
    defs = build_definitions(str(tiny))
    observer = defs.get_sensor_def("config_observer")

    unchanged = observer.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))
    assert unchanged.run_requests == [] and unchanged.skip_message

    _use_judge_v2(tiny)  # the daemon keeps the loaded definitions; the sensor re-reads the config
    tick = observer.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))
    # the sensor only records the new fingerprint (as a materialization of the config asset);
    # the automation conditions do the re-judging (tests/orchestration/test_automation.py)
    assert {e.asset_key.to_user_string() for e in tick.asset_events} == {"wse_judge_config"}
    assert all(isinstance(e, AssetMaterialization) for e in tick.asset_events)
    assert tick.run_requests == []

    schedule, repo = defs.get_schedule_def("rejudge_schedule"), defs.get_repository_def()
    nightly = schedule.evaluate_tick(build_schedule_context(instance=instance, repository_def=repo))
    assert len(nightly.run_requests) == 1
    request = nightly.run_requests[0]
    assert request.partition_key == CELL
    selection = {k.to_user_string() for k in request.asset_selection}
    assert selection == REJUDGED and not selection & GENERATION_ASSETS

    report = execute(defs, [RunPlanStep(list(request.asset_selection), request.partition_key)], instance,
                     echo=lambda *_: None)
    assert report.ok
    again = schedule.evaluate_tick(build_schedule_context(instance=instance, repository_def=repo))
    assert again.run_requests == []  # verdicts now carry the current judge configuration
