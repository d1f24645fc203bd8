"""The Definitions load, as `dagster dev -w workspace.yaml` loads them, and cover every lineage."""
from dagster import Definitions

from wse_platform.definitions import build_definitions
from tests.conftest import write_config

EXPECTED_TABLE_ASSETS = {
    "llm_usage", "wse_initial_worlds", "wse_episode_seeds", "wse_trajectory_steps", "wse_trajectories",
    "wse_consistency_verdicts", "wse_consistency_steps", "wse_trajectory_consistency", "wse_richness_verdicts",
    "wse_cell_metrics", "wse_architecture_contrasts", "wse_pareto", "wse_scaling_fit", "wse_source_family",
    "wse_horizon_sensitivity", "wse_first_violations", "wse_generation_failures", "wse_failure_kinds",
    "wse_judge_agreement", "wse_precursor_audit", "wse_full_horizon_contrasts", "wse_cost_contrasts",
    "wse_human_validation", "wse_richness_agreement",
    "ncp_specs", "ncp_spec_stats", "ncp_episodes", "ncp_turns", "ncp_summary", "ncp_survival",
    "ncp_auditor_sensitivity", "ncp_genre",
    "endings_stories", "endings_positions", "endings_predictions", "endings_verdicts", "endings_no_rate",
    "endings_story_tension", "endings_corpus_tension", "endings_pipeline_effect", "endings_length_buckets",
}


def test_definitions_load_and_validate(config_file):
    defs = build_definitions(str(config_file))
    Definitions.validate_loadable(defs)  # resolves every job, sensor and schedule target
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert EXPECTED_TABLE_ASSETS <= keys, sorted(EXPECTED_TABLE_ASSETS - keys)
    assert {s.name for s in defs.sensors} >= {"config_observer", "wse_automation"}
    assert {s.name for s in defs.schedules} >= {"rejudge_schedule"}


def test_every_asset_has_group_description_and_kinds(config_file):
    graph = build_definitions(str(config_file)).resolve_asset_graph()
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        assert node.group_name in {"wse_bench", "ncp_bench", "endings", "platform"}, key
        assert node.description, key


def test_module_level_defs_is_what_the_workspace_loads():
    from wse_platform import definitions
    assert isinstance(definitions.defs, Definitions)


def test_adding_a_model_adds_exactly_its_cells(tmp_path):
    base = build_definitions(str(write_config(tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path)))
    cfg = write_config(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path,
                       models={"smollm2": {"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf"},
                               "other": {"backend": "litellm", "model_id": "openai/x"}},
                       wse={"models": ["smollm2", "other"]})
    more = build_definitions(str(cfg))
    pk = lambda d, k: set(d.resolve_asset_graph().get(k).partitions_def.get_partition_keys())  # noqa: E731
    from dagster import AssetKey
    k = AssetKey("wse_trajectory_steps")
    added = pk(more, k) - pk(base, k)
    assert pk(base, k) <= pk(more, k)
    assert {a.split("|")[1] for a in added} == {"other"} and len(added) == len(pk(base, k))
