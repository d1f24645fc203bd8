"""Many cells at once from one `wse materialize` (wse_platform/parallel_runs.py).

Two cells of a toy partitioned asset meet at a barrier: each notes that it runs and waits (up
to 20 s) for the other to run too. Run one after another (the old sequential `execute`), the
first cell times out and fails.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dagster import AssetKey, Definitions, MaterializeResult, StaticPartitionsDefinition, asset

from wse_platform import cli
from wse_platform.config import settings_from_dict
from wse_platform.parallel_runs import default_parallel, step_backend, step_dependencies
from wse_platform.runner import plan

CELLS = StaticPartitionsDefinition(["B1|m1", "B1|m2", "B2|m1"])
MEET = ("B1|m1", "B1|m2")


def _mark(name: str) -> Path:
    folder = Path(os.environ["WSE_TEST_MEET_DIR"])
    (folder / name.replace("|", "_")).write_text(str(os.getpid()))
    return folder


@asset(partitions_def=CELLS)
def cell(context):
    folder = _mark("started-" + context.partition_key)
    if context.partition_key in MEET:
        other = next(k for k in MEET if k != context.partition_key).replace("|", "_")
        deadline = time.monotonic() + 20
        while not (folder / f"started-{other}").exists():
            assert time.monotonic() < deadline, "the other cell did not run at the same time"
            time.sleep(0.05)
    _mark("done-" + context.partition_key)
    return MaterializeResult()


@asset(partitions_def=CELLS, deps=[cell])
def verdicts(context):
    folder = Path(os.environ["WSE_TEST_MEET_DIR"])
    assert (folder / f"done-{context.partition_key.replace('|', '_')}").exists(), "verdicts before generation"
    return MaterializeResult()


@asset(deps=[verdicts])
def table():
    folder = Path(os.environ["WSE_TEST_MEET_DIR"])
    assert len(list(folder.glob("done-*"))) == 3, "the table over all cells ran before every cell was done"
    return MaterializeResult()


def toy_definitions(*_args) -> Definitions:
    return Definitions(assets=[cell, verdicts, table])


def test_two_cells_run_concurrently_from_one_wse_materialize(tmp_path, monkeypatch, config_file, capsys):
    monkeypatch.setenv("WSE_TEST_MEET_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "_defs", lambda args: toy_definitions())
    monkeypatch.setattr(cli, "_defs_loader", lambda args: (f"{__name__}:toy_definitions", ()), raising=False)
    rc = cli.main(["--config", str(config_file), "materialize", "--parallel", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "4/4 runs succeeded" in out, out
    pids = {(tmp_path / f"done-{k.replace('|', '_')}").read_text() for k in MEET}
    assert len(pids) == 2  # two worker processes


def test_dependencies_between_runs():
    defs = toy_definitions()
    keys = [AssetKey("cell"), AssetKey("verdicts"), AssetKey("table")]
    steps = plan(defs, keys, dict.fromkeys(keys))
    deps = step_dependencies(defs, steps)
    for i, st in enumerate(steps):
        if st.partition_key is None:      # the table waits for every run before it
            assert deps[i] == set(range(i))
        else:                             # a cell's run waits for nothing of another cell
            assert all(steps[j].partition_key == st.partition_key for j in deps[i])


def test_a_side_run_waits_for_the_cells_first_answers():
    """The runs nothing waits for (the part of a source run the cells do not read, the final tables) start
    once every running cell has had an answer from a model, or 5 s after it was submitted: a cell's start
    up to its first requests does not share the cores with their plots (NCP's spec statistics)."""
    from wse_platform.parallel_runs import held_back, side_runs

    defs = toy_definitions()
    keys = [AssetKey("cell"), AssetKey("verdicts"), AssetKey("table")]
    steps = plan(defs, keys, dict.fromkeys(keys))
    deps = step_dependencies(defs, steps)
    cells = [i for i, st in enumerate(steps) if st.partition_key is not None]
    assert side_runs(steps, deps) == {i for i, st in enumerate(steps) if st.partition_key is None}
    a, b = cells[:2]
    submitted = {a: 10_000, b: 10_000}
    assert held_back(steps, [a, b], {}, 10_100, submitted)                       # nothing published yet
    assert held_back(steps, [a, b], {a: (10_050, 11_000, 3)}, 11_100, submitted)  # b: no answer yet
    answered = {a: (10_050, 11_000, 3), b: (10_060, 11_050, 2)}
    assert not held_back(steps, [a, b], answered, 11_100, submitted)             # both sending: start it
    assert not held_back(steps, [a, b], {}, 15_000, submitted, hold_max_s=5)    # cached cells: 5 s at most
    assert held_back(steps, [a, b], {}, 14_900, submitted, hold_max_s=5)
    tables = sorted(side_runs(steps, deps))
    assert not held_back(steps, tables, {}, 10_100, dict.fromkeys(tables, 10_000))   # only cells hold it


@pytest.mark.parametrize("backend, expect_parallel", [("embedded", 1), ("litellm", 4)])
def test_default_parallel_and_backend_of_a_cell(tmp_path, backend, expect_parallel, monkeypatch):
    from wse_platform import parallel_runs
    monkeypatch.setattr(parallel_runs, "_plan_cells", lambda settings: [])   # nothing planned: the minimum
    s = settings_from_dict({"cache_dir": str(tmp_path / "c"), "warehouse_path": str(tmp_path / "w.duckdb"),
                            "models": {"m1": {"backend": backend, "model_id": "openai/x" if backend == "litellm"
                                              else "x.gguf"}}})
    assert default_parallel(s) == expect_parallel
    assert step_backend(s, "B1|m1") == backend and step_backend(s, None) == "none"


@pytest.mark.parametrize("slots, expect", [(64, 4), (256, 8), (1024, 10)])
def test_default_parallel_fills_the_endpoints_slots(tmp_path, monkeypatch, slots, expect):
    """Enough cells at once that their conversations (requests ÷ longest chain: 105 each here, as a WSE
    cell at horizon 3) fill the endpoint's slots 3 times: 64 slots -> 2 cells, raised to the minimum 4;
    256 -> 8 (768 / 105); never more than the run queue's limit (sum of `concurrency`, 10). Two models
    on one server count its slots once (else 256 slots would ask for 15 cells)."""
    from wse_platform import parallel_runs
    from wse_platform.plan import CellPlan, Load

    model = {"backend": "litellm", "model_id": "hosted_vllm/x", "api_base": "http://h:1/v1",
             "endpoint_concurrency": slots}
    s = settings_from_dict({"cache_dir": str(tmp_path / "c"), "warehouse_path": str(tmp_path / "w.duckdb"),
                            "models": {"gen": model, "judge": model}})
    cells = [CellPlan("wse", f"B{i}|gen", [Load("wse.story_agent", "gen", 600, 1, 1),
                                           Load("wse.consistency_judge", "judge", 450, 1, 1)], chain=10)
             for i in range(24)]
    monkeypatch.setattr(parallel_runs, "_plan_cells", lambda settings: cells)
    assert parallel_runs.fill_parallel(s) == min(24, -(-3 * slots // 105))
    assert default_parallel(s) == expect


def test_a_command_plans_once_and_starts_the_template_before_planning(tmp_path, monkeypatch):
    """`prestart` starts the workers' template before it plans the default `--parallel` (the template does not
    wait for the plan), and the progress totals reuse that plan: `plan.build` runs once per command;
    `release` (the command's end) drops it."""
    from wse_platform import parallel_runs, plan, progress, workers

    model = {"backend": "litellm", "model_id": "hosted_vllm/x", "api_base": "http://h:1/v1",
             "endpoint_concurrency": 64}
    s = settings_from_dict({"cache_dir": str(tmp_path / "c"), "warehouse_path": str(tmp_path / "w.duckdb"),
                            "models": {"gen": model}})
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))   # prestart sets it for the template
    order = []
    real_build = plan.build
    monkeypatch.setattr(plan, "build", lambda settings, *a: order.append("plan") or real_build(settings, *a))
    monkeypatch.setattr(parallel_runs, "start_template", lambda loader, select=None: order.append("template") or False)

    class NoWorkers:
        def __init__(self, *a):
            pass

        def warm(self, *a):
            pass

        def shutdown(self):
            pass

    monkeypatch.setattr(parallel_runs, "Workers", NoWorkers)
    monkeypatch.setattr(workers, "forget_template", lambda: None)
    try:
        shared = parallel_runs.prestart(s, None, ("x:y", ()))
        assert shared is not None
        progress.step_totals(s, [])
        assert order == ["template", "plan"]
    finally:
        parallel_runs.release()
    progress.step_totals(s, [])     # another command: planned anew
    parallel_runs.release()
    assert order == ["template", "plan", "plan"]
