"""What changes a cell's generation version versus a judge version, and the run planner."""
from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, Definitions, MaterializeResult, StaticPartitionsDefinition, asset

from tests.conftest import write_config
from wse_platform import versions
from wse_platform.config import REPO_ROOT, load_settings
from wse_platform.prompts import SHIPPED_DIR
from wse_platform.runner import plan

JUDGE_PROMPTS = ("consistency_judge", "richness_judge", "endings/judge.")


def _generation_code() -> dict[str, tuple[str, ...]]:
    from assets.endings import forecasting, generation as endings_generation
    from assets.ncp import episodes
    from assets.wse import generation as wse_generation
    return {"wse_generation": wse_generation.CODE, "ncp_episodes": episodes.EPISODE_CODE,
            "endings_stories": endings_generation.CODE, "endings_positions": forecasting.POSITIONS_CODE,
            "endings_predictions": forecasting.FORECAST_CODE}


@pytest.mark.parametrize("asset_name", sorted(_generation_code()))
def test_generation_code_versions_exclude_judge_prompts_and_name_real_files(asset_name):
    files = _generation_code()[asset_name]
    assert not [f for f in files if any(j in f for j in JUDGE_PROMPTS)]
    assert [f for f in files if not (REPO_ROOT / f).exists()] == []  # a missing file would hash as "absent"


def _settings(tmp_path: Path, **overrides):
    base = {
        "models": {
            "gen": {"backend": "litellm", "model_id": "openai/gen", "sampling": {"temperature": 0.7}},
            "other": {"backend": "litellm", "model_id": "openai/other"},
            "judge": {"backend": "litellm", "model_id": "openai/judge"},
        },
        "wse": {"models": ["gen", "other"], "architectures": ["B1", "B2"],
                "consistency_judge": {"model": "judge", "prompt_version": "v1", "count": 3},
                "richness_judge": {"model": "judge", "prompt_version": "v1", "count": 3}, "model_groups": {}},
        "ncp": {"narrators": ["gen"], "player_model": "other", "auditor": {"model": "judge"},
                "reaudit_auditors": [], "extraction_models": []},
        "endings": {"forecaster": "other", "judge": "judge", "generators": ["gen"], "corpora": []},
    }
    for section, values in overrides.items():
        if isinstance(values, dict) and section in base and isinstance(base[section], dict):
            base[section] = {**base[section], **values}
        else:
            base[section] = values
    folder = tmp_path / f"cfg{len(list(tmp_path.glob('cfg*')))}"
    folder.mkdir()
    return load_settings(write_config(folder, **base))


def _prompt_v2(tmp_path: Path, bench: str, name: str) -> str:
    target = tmp_path / "prompts" / bench / f"{name}.v2.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((SHIPPED_DIR / bench / f"{name}.v1.md").read_text().replace("version: v1", "version: v2", 1))
    return str(tmp_path / "prompts")


def _wse(s):
    cells = {(m, a): versions.wse_cell_version(s, m, a) for m in s.wse.models for a in s.wse.architectures}
    return cells, versions.wse_judge_version(s)


def test_judge_prompt_version_changes_only_the_judge_fingerprint(tmp_path):
    before = _settings(tmp_path)
    prompts = _prompt_v2(tmp_path, "wse", "consistency_judge")
    after = _settings(tmp_path, prompts_dir=prompts,
                      wse={"consistency_judge": {"model": "judge", "prompt_version": "v2", "count": 3}})
    (cells_a, judge_a), (cells_b, judge_b) = _wse(before), _wse(after)
    assert cells_a == cells_b
    assert judge_a != judge_b


def test_judge_count_changes_only_the_judge_fingerprint(tmp_path):
    before, after = _settings(tmp_path), _settings(
        tmp_path, wse={"richness_judge": {"model": "judge", "prompt_version": "v1", "count": 1}})
    (cells_a, judge_a), (cells_b, judge_b) = _wse(before), _wse(after)
    assert cells_a == cells_b and judge_a != judge_b


def test_model_sampling_changes_only_that_models_cells(tmp_path):
    before = _settings(tmp_path)
    models = {**{k: v.model_dump(exclude_none=True) for k, v in before.models.items()}}
    models["gen"]["sampling"] = {"temperature": 0.2}
    after = _settings(tmp_path, models=models)
    (cells_a, judge_a), (cells_b, judge_b) = _wse(before), _wse(after)
    changed = {cell for cell in cells_a if cells_a[cell] != cells_b[cell]}
    assert changed == {("gen", "B1"), ("gen", "B2")}
    assert judge_a == judge_b


def test_reaudit_auditors_do_not_touch_ncp_episodes(tmp_path):
    before = _settings(tmp_path)
    after = _settings(tmp_path, ncp={"reaudit_auditors": [{"model": "judge", "prompt_version": "v1"}]})
    for arch in before.ncp.architectures:
        assert versions.ncp_cell_version(before, "gen", arch) == versions.ncp_cell_version(after, "gen", arch)
    assert versions.ncp_reaudit_version(before) != versions.ncp_reaudit_version(after)


def test_endings_judge_prompt_does_not_touch_story_sets(tmp_path):
    before = _settings(tmp_path)
    prompts = _prompt_v2(tmp_path, "endings", "judge")
    after = _settings(tmp_path, prompts_dir=prompts, endings={"judge_prompt_version": "v2"})
    for key in ("gen:gen:vanilla", "gen:gen:beats"):
        assert versions.endings_set_version(before, key) == versions.endings_set_version(after, key)
    assert versions.endings_judge_version(before) != versions.endings_judge_version(after)


def test_plan_runs_a_fresh_generation_cell_never_for_its_stale_verdicts():
    cells = StaticPartitionsDefinition(["a", "b", "c"])

    @asset(partitions_def=cells)
    def gen():
        return MaterializeResult()

    @asset(partitions_def=cells, deps=[gen])
    def verdicts():
        return MaterializeResult()

    @asset(deps=[verdicts])
    def table():
        return MaterializeResult()

    defs = Definitions(assets=[gen, verdicts, table])
    steps = plan(defs, [AssetKey("gen"), AssetKey("verdicts"), AssetKey("table")],
                 {AssetKey("gen"): ["b"], AssetKey("verdicts"): ["a", "b"], AssetKey("table"): None})
    assert [(sorted(k.to_user_string() for k in s.keys), s.partition_key) for s in steps] == [
        (["verdicts"], "a"), (["gen", "verdicts"], "b"), (["table"], None)]


def test_a_config_change_is_described_by_what_it_changed(tmp_path):
    """Issue 13: a stale cell's cause says what changed (the fingerprint's inputs are recorded)."""
    base = load_settings(write_config(tmp_path))
    t2 = base.model_copy(update={"ncp": base.ncp.model_copy(update={"t_max": 2})})
    model = base.models["smollm2"]
    retried = base.model_copy(update={"models": {**base.models, "smollm2": model.model_copy(update={"max_attempts": 3})}})
    v1, before = versions.with_inputs(versions.ncp_cell_version, base, "smollm2", "baseline")
    assert v1 == versions.ncp_cell_version(base, "smollm2", "baseline")  # recording does not change the version
    v2, after = versions.with_inputs(versions.ncp_cell_version, t2, "smollm2", "baseline")
    assert v2 != v1 and versions.describe_changes(before, after) == ["ncp-gen › t_max: 1 → 2"]
    # a model used as narrator, player and in-loop auditor: one line per fingerprint, nested hashes left out
    _, other = versions.with_inputs(versions.ncp_cell_version, retried, "smollm2", "baseline")
    assert versions.describe_changes(before, other) == ["ncp-auditor › max_attempts: 1 → 3",
                                                        "ncp-gen › max_attempts: 1 → 3"]
    assert versions.describe_changes(None, after) == ["(the previous version did not record its inputs)"]
    many = [["x", {f"k{i}": i for i in range(20)}]]
    lines = versions.describe_changes(many, [["x", {f"k{i}": i + 1 for i in range(20)}]])
    assert len(lines) == versions.MAX_CHANGES + 1 and lines[-1] == "... and 8 more"


@pytest.mark.parametrize("partitioned", [True, False])
def test_llm_usage_waits_until_no_llm_asset_runs_or_is_requested(partitioned):
    """Issue 13 (`llm_usage` never silently out of date), seen live under `wse ui`: a cell's
    re-audit and `llm_usage` were requested in the same tick, ran side by side, and the calls the
    re-audit added after `llm_usage` read the table never triggered it again. The LLM cells are
    partitioned, `llm_usage` is not (Dagster's `will_be_requested` does not see across that)."""
    from dagster import (AssetMaterialization, AssetSpec, DataVersion, evaluate_automation_conditions,
                         instance_for_test)

    from assets.automation import with_automation

    state = {"gen": "1"}
    cells = StaticPartitionsDefinition(["B1|m"]) if partitioned else None

    @asset(kinds={"llm"}, partitions_def=cells)
    def gen() -> MaterializeResult:
        return MaterializeResult(data_version=DataVersion(state["gen"]))

    @asset(deps=[gen], kinds={"llm"}, partitions_def=cells)
    def judge() -> MaterializeResult:
        return MaterializeResult(data_version=DataVersion(state["gen"]))

    calls = AssetSpec("llm_calls", deps=[gen, judge])

    @asset(deps=[calls])
    def llm_usage() -> MaterializeResult:
        return MaterializeResult(data_version=DataVersion("u"))

    objs = with_automation([gen, judge, calls, llm_usage])
    defs = Definitions(assets=objs)
    from dagster import materialize

    def llm_step(asset_def, version):
        materialize([asset_def], instance=instance, selection=[asset_def.key],
                    partition_key="B1|m" if partitioned else None)
        instance.report_runless_asset_event(AssetMaterialization("llm_calls", tags={"dagster/data_version": version}))

    def tick():
        nonlocal cursor
        result = evaluate_automation_conditions(defs, instance, cursor=cursor)
        cursor = result.cursor
        return {k.to_user_string() for k in (AssetKey("gen"), AssetKey("judge"), AssetKey("llm_usage"))
                if result.get_num_requested(k)}

    with instance_for_test() as instance:
        cursor = None
        plain = {o.key.to_user_string(): o for o in objs if hasattr(o, "key") and o.key.to_user_string() != "llm_calls"}
        llm_step(plain["gen"], "c1")
        llm_step(plain["judge"], "c2")
        materialize([plain["llm_usage"]], instance=instance, selection=["llm_usage"])
        assert tick() == set()
        state["gen"] = "2"  # the cell is regenerated: new data, new calls
        llm_step(plain["gen"], "c3")
        assert tick() == {"judge"}  # not llm_usage: the judge is about to add calls
        llm_step(plain["judge"], "c4")
        assert tick() == {"llm_usage"}
