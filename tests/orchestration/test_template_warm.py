"""What the worker template does once for every worker (wse_platform/worker_template.py): the jobs of the cell
runs the command plans (`warm_selections`) and the Dagster instance (`keep_instance`, taken by `init_worker`)."""
from __future__ import annotations

import pytest

from tests.orchestration.test_selection_jobs import _counting, _defs, cell, instance, table, verdict  # noqa: F401
from wse_platform import worker_template
from wse_platform.runner import RunPlanStep, run_in_location

TARGET = "wse_platform.definitions:build_definitions"


def test_warmed_selections_make_a_cell_run_build_no_job(instance, monkeypatch):  # noqa: F811
    defs = _defs()
    assert worker_template.warm_selections(defs, None) == 1   # the partitioned runs: one selection (cell, verdict)
    counts = _counting(monkeypatch)
    for pk in ["a", "b"]:
        assert run_in_location(defs, RunPlanStep([cell.key, verdict.key], pk), instance, {}).success
    assert counts == {"jobs": 0, "snapshots": 0}   # all made before (before: 2 jobs and 3 snapshots per run)
    assert worker_template.warm_selections(defs, ["nothing*"]) == 0   # matches nothing: the command says so


@pytest.fixture
def no_instance():
    worker_template.INSTANCE.clear()
    yield
    for _, _, inst in worker_template.INSTANCE:
        inst.dispose()
    worker_template.INSTANCE.clear()


def test_the_template_keeps_the_instance_open_for_its_workers_and_no_file(config_file, tmp_path, no_instance):
    home = tmp_path / "dagster_home"
    assert not worker_template.keep_instance("tests.orchestration.test_worker_fork:noting_definitions", [])
    assert worker_template.keep_instance(TARGET, [str(config_file), False])
    kept = worker_template.kept_instance(str(home))
    assert kept is not None and kept.get_runs(limit=1) == []
    assert str(home) not in (worker_template.check_fork_safe() or "")   # nothing of it open across a fork
    assert worker_template.kept_instance(str(tmp_path)) is None   # another home: the worker opens its own
    cfg = home / "dagster.yaml"
    cfg.write_text(cfg.read_text() + "\n# edited\n")
    assert worker_template.kept_instance(str(home)) is None   # another configuration: the worker opens its own
    cfg.write_text("# the user's own\ntelemetry:\n  enabled: false\n")
    assert not worker_template.keep_instance(TARGET, [str(config_file), False])   # theirs (Postgres...): not kept
    assert worker_template.kept_instance(str(home)) is None


def test_a_forked_worker_takes_the_templates_instance(config_file, tmp_path, no_instance, monkeypatch):
    from dagster import Definitions

    from wse_platform import procs, workers

    assert worker_template.keep_instance(TARGET, [str(config_file), False])
    kept = worker_template.kept_instance(str(tmp_path / "dagster_home"))
    token, loader = "t-1", (TARGET, (str(config_file), False))
    monkeypatch.setitem(worker_template.DEFS, worker_template.key(token, *loader), Definitions())
    monkeypatch.setattr(worker_template, "BUILT_BY", [1])
    monkeypatch.setattr(procs, "freeze_long_lived", lambda: None)   # (this is the test process, not a worker)
    monkeypatch.setattr("atexit.register", lambda fn: None)
    workers.init_worker(loader, None, token, {})
    assert workers._WORKER["instance"] is kept
    workers.init_worker(loader, None, None, {})   # not forked from a template: its own, as before
    assert workers._WORKER["instance"] is not kept
    workers._WORKER["instance"].dispose()


def test_the_template_plans_without_importing_the_cli_module():
    """`warm_selections` runs in the fork server; had it imported `wse_platform.cli`, every worker of a
    command started as `python -m wse_platform.cli` would print runpy's "found in sys.modules" warning
    (the main module is run again in each worker)."""
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys; sys.path.insert(0, '.'); from wse_platform import worker_template; "
            "from tests.orchestration.test_selection_jobs import _defs; "
            "print(worker_template.warm_selections(_defs(), None), 'wse_platform.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["1", "False"], out.stderr[-2000:]
