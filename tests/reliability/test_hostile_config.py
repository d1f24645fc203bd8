"""A hostile config file runs nothing and cannot exhaust the machine (issue 23, items 1 and 11).

Item 1: model names were written unquoted into the generated `dagster.yaml`, so a model key with
newlines injected a `python_logs` handler whose factory was `os.system`. Now every generated file
is written by a serializer, and names of models and corpora are checked against one character
set at config load. Item 11: a YAML alias bomb hung `wse status`; a 50 MB config was parsed for
85 s. Both are refused quickly.
"""
from __future__ import annotations

import time

import pytest
import yaml

from tests.conftest import write_config
from wse_platform.config import MAX_CONFIG_BYTES, MAX_NAME_LENGTH, ConfigError, load_settings, settings_from_dict


def _payload(target) -> str:
    """The issue's payload: a model key that closes `value:` and adds a top-level `python_logs`
    section whose handler factory is `os.system` (the trailing handler absorbs the template's
    next line)."""
    return ("x\npython_logs:\n  dagster_handler_config:\n    handlers:\n      pwn:\n"
            f"        \"()\": os.system\n        command: touch {target}\n      zz:\n"
            "        class: logging.NullHandler\n        filler: x")


def test_injection_payload_in_a_model_name_is_refused_at_load(tmp_path):
    target = tmp_path / "pwned"
    model = {"backend": "embedded", "model_id": "x.gguf"}
    cfg = write_config(tmp_path, models={_payload(target): model})
    with pytest.raises(ConfigError) as err:
        load_settings(str(cfg))
    msg = str(err.value)
    assert "models" in msg and "model name" in msg and "'\\n'" in msg, msg
    assert not target.exists()
    # names in the allowed set still load
    s = settings_from_dict({"models": {"Qwen3-8B_v1.5+think": model, "m" * MAX_NAME_LENGTH: model},
                            "endings": {"corpora": [{"name": "tmas.v2", "path": "x.jsonl"}]}})
    assert len(s.models) == 2


def test_generated_dagster_yaml_keeps_any_name_a_value_and_runs_nothing(tmp_path, monkeypatch):
    """Even a name that bypassed validation stays a string value in dagster.yaml: the file parses
    to exactly the expected sections, and opening the instance with its log handlers runs nothing."""
    from dagster import DagsterInstance

    from wse_platform.runner import ensure_dagster_home

    target = tmp_path / "pwned"
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    settings = load_settings(str(write_config(tmp_path)))
    name = _payload(target)
    hostile = settings.model_copy(update={"models": {name: settings.models["smollm2"]}})  # no validation
    home = ensure_dagster_home(hostile)
    doc = yaml.safe_load((home / "dagster.yaml").read_text())
    assert set(doc) == {"telemetry", "event_log_storage", "run_monitoring", "run_coordinator"}
    limits = doc["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {"key": "dagster/partition/model", "value": name, "limit": 1} in limits
    instance = DagsterInstance.from_config(str(home))
    instance.get_handlers()   # where Dagster builds the python_logs handlers
    assert not target.exists()


@pytest.mark.parametrize("name, reason", [
    ("a|b", "'|'"), ("a,b", "','"), ("a[b", "'['"), ("a]b", "']'"), ("a:b", "':'"), ("a\nb", "'\\n'"),
    ("", "is empty"), ("m" * 300, f"300 characters long (at most {MAX_NAME_LENGTH})"), ("../x", "'/'"),
    ("a b", "' '"), ("-x", "starting with a letter or digit"),
])
def test_bad_model_names_are_refused_naming_the_key(name, reason):
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": {name: {"backend": "embedded", "model_id": "x.gguf"}}})
    msg = str(err.value)
    assert "  models: " in msg and "model name" in msg and reason in msg, msg
    assert "Traceback" not in msg


@pytest.mark.parametrize("name, reason", [("c|d", "'|'"), ("h:x", "':'"), ("", "is empty"),
                                          ("c" * 300, "300 characters long")])
def test_bad_corpus_names_are_refused_naming_the_key(name, reason):
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"endings": {"corpora": [{"name": name, "path": "x.jsonl"}]}})
    msg = str(err.value)
    assert "endings.corpora.0.name" in msg and "corpus name" in msg and reason in msg, msg


# ---- item 11: bounded parsing -----------------------------------------------------------------

def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines)


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    cfg = write_config(tmp_path)
    # the place: under models.<m>.router (10^9 strings once expanded)
    raw = yaml.safe_load(cfg.read_text())
    raw["models"]["smollm2"]["router"] = {"x": "PLACEHOLDER"}
    text = yaml.safe_dump(raw, sort_keys=False).replace(
        "x: PLACEHOLDER", "x:\n" + "\n".join("        " + ln for ln in _bomb().splitlines()))
    cfg.write_text(text)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load_settings(str(cfg))
    assert time.monotonic() - t0 < 5
    assert "aliases expand" in str(err.value) and str(cfg) in str(err.value)


def test_recursive_yaml_alias_is_refused(tmp_path):
    cfg = tmp_path / "wse.yaml"
    cfg.write_text("models:\n  m:\n    backend: embedded\n    model_id: x.gguf\n    router: &r {loop: *r}\n")
    with pytest.raises(ConfigError) as err:
        load_settings(str(cfg))
    assert "an alias refers to a node that contains it" in str(err.value)


def test_oversized_config_is_refused_before_parsing(tmp_path):
    cfg = write_config(tmp_path)
    with cfg.open("a") as fh:
        fh.write(("# padding " + "x" * 90 + "\n") * (MAX_CONFIG_BYTES // 100 + 10))
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load_settings(str(cfg))
    assert time.monotonic() - t0 < 2
    assert "larger than the limit of 1 MiB" in str(err.value) and str(cfg) in str(err.value)


def test_wse_materialize_with_the_payload_exits_2_and_runs_nothing(tmp_path):
    """The command line: `wse materialize` with the issue's config stops at load (exit 2, the key
    named on stderr) and the payload's command never ran."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    target = tmp_path / "pwned"
    cfg = write_config(tmp_path, models={_payload(target): {"backend": "embedded", "model_id": "x.gguf"}})
    env = {k: v for k, v in os.environ.items() if k not in ("WSE_CONFIG", "WSE_WAREHOUSE")}
    env.update(PYTHONPATH=str(REPO), DAGSTER_HOME=str(tmp_path / "dh"))
    out = subprocess.run([sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "materialize"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "model name" in out.stderr and "python_logs" in out.stderr
    assert not target.exists() and not (tmp_path / "dh" / "dagster.yaml").exists()
