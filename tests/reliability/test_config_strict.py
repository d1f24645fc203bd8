"""Config values that validate but would be wrong are refused, naming the key (issue 14, items 5 and 8)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, write_config
from wse_platform.config import ConfigError, load_settings, settings_from_dict
from wse_platform.llm.backends.options import BACKEND_OPTIONS

EMBEDDED = {"m1": {"backend": "embedded", "model_id": "x.gguf"}}


# ---- item 5: a named config file that does not exist ----------------------------------------

def test_missing_config_path_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path / "nope.yaml")
    assert str(tmp_path / "nope.yaml") in str(err.value) and "does not exist" in str(err.value)


def test_missing_wse_config_env_is_an_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_CONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(tmp_path / "gone.yaml") in str(err.value) and "WSE_CONFIG" in str(err.value)


def test_an_existing_config_still_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_CONFIG", str(write_config(tmp_path)))
    assert load_settings().source_file == str((tmp_path / "wse.yaml").resolve())


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cli_exits_non_zero_naming_the_missing_file(tmp_path, how):
    missing = tmp_path / "nope.yaml"
    env = {k: v for k, v in __import__("os").environ.items() if k != "WSE_CONFIG"}
    argv = [sys.executable, "-m", "wse_platform.cli"]
    if how == "flag":
        argv += ["--config", str(missing)]
    else:
        env["WSE_CONFIG"] = str(missing)
    env["WSE_WAREHOUSE"] = str(tmp_path / "wh.duckdb")  # never touch a real warehouse
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(argv + ["materialize"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(missing) in out.stderr
    assert not (tmp_path / "wh.duckdb").exists()  # nothing was built from the shipped demo


# ---- item 8: unknown backend options ---------------------------------------------------------

def test_unknown_backend_option_is_named_with_the_known_ones():
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": {"m1": {"backend": "embedded", "model_id": "x.gguf",
                                              "extra": {"n_ctxx": 4096}}}})
    msg = str(err.value)
    assert "models.m1.extra" in msg and "n_ctxx" in msg and "'n_ctx'" in msg


def test_options_are_checked_per_backend():
    # n_ctx is an embedded (llama.cpp) option; vLLM's context length is max_model_len
    with pytest.raises(ConfigError, match=r"models\.big\.extra.*n_ctx"):
        settings_from_dict({"models": {"big": {"backend": "vllm", "model_id": "Q/Q", "extra": {"n_ctx": 8}}}})
    ok = settings_from_dict({"models": {
        "big": {"backend": "vllm", "model_id": "Q/Q", "extra": {"max_model_len": 8, "enable_thinking": False}},
        "api": {"backend": "litellm", "model_id": "openai/x", "extra": {"structured_output": "prompt"}}}})
    assert ok.models["big"].extra["max_model_len"] == 8


def test_shipped_config_and_its_commented_examples_use_known_options():
    load_settings()  # the shipped wse.yaml
    text = (REPO / "wse.yaml").read_text()
    assert "tensor_parallel_size" in text and "enable_thinking" in text
    assert {"tensor_parallel_size", "enable_thinking"} <= BACKEND_OPTIONS["vllm"]


def test_every_option_a_backend_reads_is_allowed():
    """The allowed sets stay in step with the backends: each `extra.get("k")`/`extra["k"]` is listed."""
    files = [("embedded", "embedded.py"), ("litellm", "litellm_backend.py"), ("vllm", "vllm_backend.py"),
             ("litellm", "openai_http.py"), ("litellm", "chat_request.py")]   # the direct path, the shared request
    for backend, name in files:
        src = (REPO / "wse_platform" / "llm" / "backends" / name).read_text()
        read = set(re.findall(r"extra(?:\.get\(|\[)\s*\"(\w+)\"", src))
        missing = read - BACKEND_OPTIONS[backend]
        assert not missing, f"{name} reads {sorted(missing)} from extra but options.py does not allow it"
    assert BACKEND_OPTIONS["embedded"] >= {"n_ctx", "repeat_penalty", "grammar_max_string_chars", "model_path"}


# ---- item 8: counts that are zero or negative ------------------------------------------------

@pytest.mark.parametrize("section,key,value", [
    ("wse", "n_seeds", 0), ("wse", "n_seeds", -3), ("wse", "horizon", 0), ("wse", "bootstrap_draws", -1),
    ("ncp", "n_specs", 0), ("ncp", "t_max", -2), ("ncp", "n_extraction_specs", 0),
    ("endings", "k", 0), ("endings", "position_stride", 0), ("endings", "max_positions_per_story", -1),
    ("endings", "max_human_stories", 0), ("endings", "n_ideas", 0), ("endings", "max_words", 0),
])
def test_non_positive_count_is_refused_naming_the_key(section, key, value):
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": EMBEDDED, section: {key: value}})
    assert f"{section}.{key}" in str(err.value) and "greater than 0" in str(err.value)
    assert repr(value) in str(err.value)


def test_judge_count_and_concurrency_must_be_positive():
    with pytest.raises(ConfigError, match=r"wse\.consistency_judge\.count"):
        settings_from_dict({"models": EMBEDDED, "wse": {"consistency_judge": {"model": "m1", "count": 0}}})
    with pytest.raises(ConfigError, match=r"concurrency\.embedded"):
        settings_from_dict({"concurrency": {"embedded": 0}})
    with pytest.raises(ConfigError, match=r"concurrency\.embeded"):  # a misspelt backend is not a limit
        settings_from_dict({"concurrency": {"embeded": 1}})


def test_unset_counts_still_mean_the_profile_default():
    s = settings_from_dict({"profile": "paper", "models": EMBEDDED})
    assert s.wse.n_seeds == 42 and s.endings.max_positions_per_story is None


def test_a_path_in_the_error_is_the_config_file(tmp_path):
    path = write_config(tmp_path, wse={"n_seeds": 0})
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert str(Path(path).resolve()) in str(err.value) and "wse.n_seeds" in str(err.value)
