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
        assert node.group_name in GROUPS, key
        assert node.description, key


GROUPS = {f"{b}_{r}" for b in ("wse", "ncp", "endings") for r in ("sources", "cells", "verdicts", "tables")} | {
    "platform"}


def test_groups_say_what_they_hold_and_the_data_flows_sources_cells_verdicts_tables(config_file):
    """Issue 21: the graph opens readable. Each benchmark's assets are grouped by role, and no edge runs
    backwards in the flow sources → cells → verdicts → tables (so each group box sits left of the next)."""
    from assets.groups import role_rank

    graph = build_definitions(str(config_file)).resolve_asset_graph()
    groups = {k.to_user_string(): graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert set(groups.values()) <= GROUPS
    for name in ("wse_trajectories", "ncp_episodes", "endings_stories"):
        assert groups[name].endswith("_cells"), name
    for name in ("wse_consistency_verdicts", "wse_trajectory_consistency", "ncp_reaudit_episodes", "endings_verdicts"):
        assert groups[name].endswith("_verdicts"), name
    for name in ("wse_dracor_plays", "wse_cell_config", "wse_initial_worlds", "ncp_spec_files", "ncp_specs",
                 "endings_story_sources"):
        assert groups[name].endswith("_sources"), name
    assert groups["wse_cell_metrics"] == "wse_tables" and groups["llm_usage"] == "platform"
    backwards = [(p.to_user_string(), k.to_user_string()) for k in graph.get_all_asset_keys()
                 for p in graph.get(k).parent_keys if groups[p.to_user_string()] != "platform"
                 and role_rank(groups[p.to_user_string()]) > role_rank(groups[k.to_user_string()])]
    assert backwards == []


def test_input_files_are_observable_sources_upstream_of_what_reads_them(config_file):
    """Issue 21: the lineage starts at the files (kinds and owners shown in the UI)."""
    from dagster import AssetKey

    graph = build_definitions(str(config_file)).resolve_asset_graph()
    expected = {"wse_initial_worlds": {"wse_dracor_plays", "wse_smallville_personas", "wse_bianjing_world"},
                "ncp_specs": {"ncp_spec_files"}, "endings_stories": {"endings_story_sources"}}
    for child, sources in expected.items():
        parents = {p.to_user_string() for p in graph.get(AssetKey(child)).parent_keys}
        assert sources <= parents, child
        for src in sources:
            node = graph.get(AssetKey(src))
            assert node.is_observable and not node.is_materializable, src
            assert node.owners and node.kinds, src


def test_input_file_versions_are_recorded_only_when_files_change(tmp_path, monkeypatch):
    """The file sources are recorded like the config (no run): once, then only what changed — the
    100-Endings story set whose corpus file was edited, the NCP spec files when a spec changed."""
    import shutil

    from dagster import AssetKey, DagsterInstance

    from assets.versioning import record_config_versions
    from tests.conftest import write_config
    from wse_platform import config

    corpus = tmp_path / "corpus"
    shutil.copytree(config.DATA_DIR / "stories" / "public_domain", corpus)
    data = tmp_path / "data"
    shutil.copytree(config.DATA_DIR / "ncp_bench", data / "ncp_bench")
    for sub in ("dracor", "smallville", "bianjing"):
        shutil.copytree(config.DATA_DIR / sub, data / sub)
    monkeypatch.setattr(config, "DATA_DIR", data)
    cfg = write_config(tmp_path, endings={"corpora": [{"name": "pd", "path": str(corpus), "max_words": 1500}]})
    objs = list(build_definitions(str(cfg)).assets)
    instance = DagsterInstance.ephemeral()
    first = record_config_versions(instance, objs)
    assert {"wse_dracor_plays", "ncp_spec_files", "endings_story_sources"} <= set(first)
    assert not {k for k in record_config_versions(instance, objs) if not k.endswith("_config")}  # nothing new

    story = sorted(corpus.glob("*.txt"))[0]
    story.write_text(story.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    spec = sorted((data / "ncp_bench" / "dataset" / "specs").glob("*.yaml"))[0]
    spec.write_text(spec.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert sorted(k for k in record_config_versions(instance, objs) if not k.endswith("_config")) == [
        "endings_story_sources", "ncp_spec_files"]
    [obs] = instance.fetch_observations(AssetKey("ncp_spec_files"), limit=1).records
    assert f"ncp_bench/dataset/specs/{spec.name}: edited" in obs.asset_observation.metadata["changed"].md_str
    per_set: dict[str, int] = {}
    for r in instance.fetch_observations(AssetKey("endings_story_sources"), limit=100).records:
        per_set[r.partition_key] = per_set.get(r.partition_key, 0) + 1
    assert per_set.pop("human:pd") == 2 and set(per_set.values()) == {1}  # only the edited set again


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
