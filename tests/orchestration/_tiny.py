"""A tiny WSE-only grid on the embedded model (1 model × B1, 1 seed, horizon 1, one vote per judge),
materialized once per test session and copied into each test (warehouse, LLM cache, Dagster home)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

from tests.conftest import write_config
from wse_platform.config import profile_scale

MODEL, ARCH = "smollm2", "B1"
CELL = f"{ARCH}|{MODEL}"  # Dagster orders multi-partition dimensions alphabetically: arch|model

# The richness judge's output budget: the quick profile's 700 tokens let SmolLM2 write ~600 tokens
# (~15 s of the build, and again in each test that re-judges a regenerated cell) of an answer that
# fails its schema anyway; cut at 16 tokens it is recorded as a truncated failure instead. Either
# way the cell gets its one richness verdict row, which is all these tests read of it (its content
# on the embedded model is tests/wse/test_panel.py's).
RICHNESS_BUDGET = 16
TINY = {
    "wse": {"models": [MODEL], "architectures": [ARCH], "n_seeds": 1, "horizon": 1,
            "consistency_judge": {"model": MODEL, "prompt_version": "v1", "count": 1},
            "richness_judge": {"model": MODEL, "prompt_version": "v1", "count": 1},
            "budgets": {**profile_scale("quick")["wse"]["budgets"], "richness_judge": RICHNESS_BUDGET},
            "model_groups": {"embedded": [MODEL]}},
    "ncp": {"narrators": [], "extraction_models": [], "player_model": None, "auditor": None,
            "reaudit_auditors": []},
    "endings": {"forecaster": None, "judge": None, "generators": [], "corpora": []},
}
PATH_VARS = ("WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR", "WSE_PROMPTS_DIR")


def tiny_config(folder: Path) -> Path:
    """The tiny config with its warehouse, cache and artifacts inside `folder`."""
    return write_config(folder, **TINY)


def edit_config(path: Path, edit) -> None:
    """Apply `edit(raw_dict)` to a config file in place."""
    raw = yaml.safe_load(path.read_text())
    edit(raw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def materialize_baseline(folder: Path) -> Path:
    """Materialize the whole tiny graph into `folder` (its own Dagster home); returns the config."""
    from wse_platform import cli

    cfg = tiny_config(folder)
    saved = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "WSE_CONFIG", *PATH_VARS)}
    try:
        for k in PATH_VARS:
            os.environ.pop(k, None)
        os.environ["DAGSTER_HOME"] = str(folder / "dagster_home")
        (folder / "dagster_home").mkdir(exist_ok=True)
        rc = cli.main(["--config", str(cfg), "materialize", "--stale"])
        assert rc == 0, "the tiny baseline did not materialize"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return cfg


def copy_baseline(baseline: Path, dest: Path, monkeypatch) -> Path:
    """A private copy of the baseline (config rewritten to point inside `dest`), made current."""
    shutil.copytree(baseline, dest)
    cfg = tiny_config(dest)
    for k in PATH_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(dest / "dagster_home"))
    monkeypatch.setenv("WSE_CONFIG", str(cfg))
    # the copied dagster.yaml names the baseline's event log folder: point it at the copy's now, so
    # that even a test opening the instance without `wse` (DagsterInstance.get()) writes only its copy
    from wse_platform.config import load_settings
    from wse_platform.runner import ensure_dagster_home

    ensure_dagster_home(load_settings(str(cfg)))
    return cfg


def judge_prompt_v2(folder: Path, name: str = "consistency_judge") -> Path:
    """A `v2` copy of a shipped WSE judge prompt in `folder/prompts` (same wording, new version)."""
    from wse_platform.prompts import SHIPPED_DIR

    src = (SHIPPED_DIR / "wse" / f"{name}.v1.md").read_text()
    dst = folder / "prompts" / "wse" / f"{name}.v2.md"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(src.replace("version: v1", "version: v2", 1))
    return folder / "prompts"


def status_of(cfg: Path):
    """(defs, instance, problems) after observing the config sources, as `wse status` does."""
    from resources.settings import settings_for
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import get_instance, observe_sources
    from wse_platform.status import compute_status

    instance = get_instance(settings_for(str(cfg)))
    defs = build_definitions(str(cfg))
    observe_sources(defs, instance)
    return defs, instance, compute_status(defs, instance)
