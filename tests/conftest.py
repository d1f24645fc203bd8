"""Shared fixtures: an isolated config (temp warehouse, cache, Dagster home) per test."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from wse_platform.config import DEFAULT_CONFIG

REPO = Path(__file__).resolve().parents[1]


def write_config(tmp_path: Path, **overrides) -> Path:
    """A copy of the shipped wse.yaml with paths inside tmp_path and `overrides` merged in."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw.update({
        "warehouse_path": str(tmp_path / "wh.duckdb"),
        "cache_dir": str(tmp_path / "cache"),
        "artifacts_dir": str(tmp_path / "artifacts"),
    })
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    path = tmp_path / "wse.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def route_llm_clients(monkeypatch, backends: dict) -> None:
    """Every `LLMClient` made from here on (the LLM resource's sessions too) answers through `backends`
    (model name -> backend, e.g. a `ScriptedBackend`) instead of the configured ones."""
    import wse_platform.llm as llm_mod
    base = llm_mod.LLMClient

    class ScriptedClient(base):
        def __init__(self, settings, *args, **kwargs):
            kwargs["backends"] = dict(backends)
            super().__init__(settings, *args, **kwargs)

    monkeypatch.setattr(llm_mod, "LLMClient", ScriptedClient)


def ncp_first_specs(n: int = 3) -> list[str]:
    """The ids of the released NCP dataset's first `n` specs in evaluation order (movie48, movie09, ...)."""
    from wse_platform.ncp.spec import NCP_DATASET_DIR
    return yaml.safe_load((NCP_DATASET_DIR / "index.yaml").read_text())["specs"][:n]


def copy_ncp_specs(root: Path, n: int = 3) -> list[str]:
    """A copy of the released NCP dataset in `root` with only its first `n` specs (index and spec files);
    returns their ids."""
    import shutil

    from wse_platform.ncp.spec import NCP_DATASET_DIR
    first = ncp_first_specs(n)
    (root / "specs").mkdir(parents=True)
    (root / "index.yaml").write_text(yaml.safe_dump({"specs": first}))
    for sid in first:
        shutil.copy(NCP_DATASET_DIR / "specs" / f"{sid}.yaml", root / "specs")
    return first


@pytest.fixture
def config_file(tmp_path, monkeypatch) -> Path:
    path = write_config(tmp_path)
    monkeypatch.setenv("WSE_CONFIG", str(path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    for var in ("WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    return path


@pytest.fixture(autouse=True)
def _no_dagster_telemetry(monkeypatch):
    monkeypatch.setenv("DAGSTER_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


# The tiny WSE grid (tests/orchestration/_tiny.py) on the embedded model, materialized once per session
# and copied into each test that asks for it (tests/orchestration's staleness tests, and tests/wse's
# end-to-end check of the Dagster assets on the embedded model). Under pytest-xdist the workers share
# one build (pytest-xdist's documented pattern): the first worker to take the lock in the folder all
# workers' base temps share builds it, the others wait for it and reuse it. Nothing writes to the
# baseline afterwards: every test works on its own copy (`tiny`).
@pytest.fixture(scope="session")
def tiny_baseline(tmp_path_factory):
    from tests.orchestration._tiny import materialize_baseline

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: nothing to share
        folder = tmp_path_factory.mktemp("tiny_baseline")
        materialize_baseline(folder)
        return folder

    import shutil

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # the session's base temp, above each worker's own
    folder, done = shared / "tiny_baseline", shared / "tiny_baseline.done"
    with FileLock(str(shared / "tiny_baseline.lock")):
        if not done.exists():
            if folder.exists():  # a worker's build that failed half way
                shutil.rmtree(folder)
            folder.mkdir()
            materialize_baseline(folder)
            done.write_text(os.environ["PYTEST_XDIST_WORKER"])
    return folder


@pytest.fixture
def tiny(tiny_baseline, tmp_path, monkeypatch):
    """A private, current copy of the tiny baseline; returns its config path."""
    from tests.orchestration._tiny import copy_baseline

    return copy_baseline(tiny_baseline, tmp_path / "w", monkeypatch)
