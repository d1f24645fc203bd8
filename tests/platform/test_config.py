import pytest

from wse_platform.config import WSE_ARCHITECTURES, ConfigError, load_settings, settings_from_dict
from tests.conftest import write_config

BASE_MODELS = {"m1": {"backend": "embedded", "model_id": "x.gguf"}, "m2": {"backend": "litellm", "model_id": "openai/gpt"}}


def test_shipped_config_is_valid_and_demo_scale():
    s = load_settings()
    assert s.profile == "quick"  # the quick demo scale, from its profile file
    assert s.wse.horizon == 2 and s.wse.n_seeds == 1 and s.wse.bootstrap_draws == 200
    assert s.endings.same_model_judge and s.endings.allow_same_model
    assert set(s.wse.architectures) <= set(WSE_ARCHITECTURES)


def test_default_architectures_are_the_twelve():
    assert settings_from_dict({}).wse.architectures == list(WSE_ARCHITECTURES)
    assert len(WSE_ARCHITECTURES) == 12 and len(set(WSE_ARCHITECTURES)) == 12


def test_paper_profile_fills_scale_but_explicit_values_win():
    s = settings_from_dict({"profile": "paper", "models": BASE_MODELS, "wse": {"models": ["m1"], "horizon": 7}})
    assert s.wse.horizon == 7          # explicit
    assert s.wse.n_seeds == 42         # from the paper profile
    assert s.wse.bootstrap_draws == 10_000
    assert s.ncp.t_max == 100 and s.endings.k == 100


def test_unknown_key_is_named(tmp_path):
    path = write_config(tmp_path, wse={"horizn": 3})
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "wse.horizn: unknown key" in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_model_reference_is_named():
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": BASE_MODELS, "wse": {"models": ["m1", "nope"]}})
    assert "wse.models[1]: unknown model 'nope'" in str(err.value)


def test_bad_value_type_is_named():
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": {"m1": {"backend": "ollama", "model_id": "x"}}})
    assert "models.m1.backend" in str(err.value)


def test_unknown_architecture_rejected():
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": BASE_MODELS, "wse": {"architectures": ["B4"]}})
    assert "wse.architectures" in str(err.value) and "B4" in str(err.value)


def test_same_forecaster_and_judge_refused_unless_allowed():
    cfg = {"models": BASE_MODELS, "endings": {"forecaster": "m1", "judge": "m1"}}
    with pytest.raises(ConfigError) as err:
        settings_from_dict(cfg)
    assert "endings.judge" in str(err.value)
    ok = settings_from_dict({"models": BASE_MODELS, "endings": {"forecaster": "m1", "judge": "m1", "allow_same_model": True}})
    assert ok.endings.same_model_judge
    assert not settings_from_dict({"models": BASE_MODELS, "endings": {"forecaster": "m1", "judge": "m2"}}).endings.same_model_judge


def test_construction_model_is_removed_with_a_message_naming_why():
    """Nothing used `wse.construction_model` (openings come from templates, no model): the key is gone,
    and a config that still sets it is told so."""
    from wse_platform.config import WSEConfig
    assert "construction_model" not in WSEConfig.model_fields
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": BASE_MODELS, "wse": {"models": ["m1"], "construction_model": "m2"}})
    assert "construction_model was removed" in str(err.value) and "templates" in str(err.value)


def test_env_overrides_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_WAREHOUSE", str(tmp_path / "other.duckdb"))
    s = load_settings(write_config(tmp_path))
    assert s.warehouse == tmp_path / "other.duckdb"


def test_invalid_yaml_names_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_settings(bad)
    assert "bad.yaml" in str(err.value)


def test_api_keys_are_referenced_by_env_var_name_only():
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": {"m": {"backend": "litellm", "model_id": "openai/x", "api_key": "sk-123"}}})
    assert "models.m.api_key: unknown key" in str(err.value)


def test_shipped_data_paths_resolve_from_a_config_elsewhere(tmp_path):
    s = load_settings(write_config(tmp_path))
    corpus = s.resolve_path(s.endings.corpora[0].path)
    assert corpus.exists() and (corpus / "araby.txt").exists()
    assert s.resolve_path("out/new.duckdb") == tmp_path / "out" / "new.duckdb"  # outputs stay beside the config


def test_endings_ablation_is_validated():
    ok = settings_from_dict({"endings": {"ablate": {"beats": ["plan"], "warmup_beats": ["adapt"]}}})
    assert ok.endings.ablate["beats"] == ["plan"]
    for bad, word in (({"beats": ["write"]}, "cannot ablate"), ({"fancy": ["plan"]}, "unknown pipeline"),
                      ({"vanilla": ["plan"]}, "cannot ablate")):
        with pytest.raises(ConfigError) as err:
            settings_from_dict({"endings": {"ablate": bad}})
        assert "endings.ablate" in str(err.value) and word in str(err.value)


def test_outputs_stay_next_to_the_config_even_when_the_repo_has_a_wse_folder(tmp_path, monkeypatch):
    """Inputs missing next to a config fall back to the shipped data in the repository; outputs
    (warehouse, cache, artifacts) never do: a config in a new folder must not write into a `.wse/`
    the repository already holds (e.g. after `wse demo` in the clone)."""
    import wse_platform.config as config_mod
    from wse_platform.config import load_settings

    repo = tmp_path / "repo"
    (repo / ".wse" / "artifacts").mkdir(parents=True)
    (repo / ".wse" / "warehouse.duckdb").write_bytes(b"")
    (repo / "data").mkdir()
    monkeypatch.setattr(config_mod, "REPO_ROOT", repo)
    for var in ("WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    cfg = tmp_path / "mine" / "wse.yaml"
    cfg.parent.mkdir()
    cfg.write_text("models: {}\n", encoding="utf-8")
    s = load_settings(cfg)
    assert s.warehouse == cfg.parent / ".wse" / "warehouse.duckdb"
    assert s.artifacts == cfg.parent / ".wse" / "artifacts"
    assert s.cache.parent == cfg.parent / ".wse"
    assert s.resolve_path("data") == repo / "data"          # inputs still fall back
