"""Parallel cells through Dagster's run queue, for real.

`ensure_dagster_home` writes a dagster.yaml with a QueuedRunCoordinator whose
`tag_concurrency_limits` cap runs per `wse/backend` tag. The slow test starts
`dagster-daemon run` on a temp instance, submits a 2-cell backfill of WSE-bench
generation (2 models, 2 architectures: each cell another model and architecture) on the
embedded model (1 seed, 1 step, tiny token budget), and checks that the runs overlapped, all
succeeded, and the warehouse holds exactly the expected rows.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, write_config

BACKEND_TAG = "wse/backend"
MODELS = ["smollm2", "smollm2-b"]   # the same GGUF under two names (another sampling seed): two model tags
ARCHS = ["B1", "B1+WMOD"]           # the shortest prompts of the 12 architectures
# Two cells, each its own model and architecture: every run is one more process loading the definitions
# and the GGUF model on a 2-core machine, and two runs in the queue at once already show the overlap.
CELLS = list(zip(MODELS, ARCHS))
RUN_TIMEOUT_S = 420
# One process per run: Dagster's default multiprocess executor would start (and reload the
# definitions and the GGUF model in) one more process per step, which costs more than the cell here.
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}


def test_dagster_yaml_queues_runs_with_backend_limits(tmp_path, monkeypatch):
    """The instance written by ensure_dagster_home really has a queue with one limit per backend."""
    from dagster import DagsterInstance
    from dagster._core.run_coordinator import QueuedRunCoordinator

    from wse_platform.config import load_settings
    from wse_platform.runner import ensure_dagster_home

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    cfg = write_config(tmp_path, concurrency={"embedded": 1, "litellm": 8, "vllm": 2})
    home = ensure_dagster_home(load_settings(str(cfg)))
    assert home == tmp_path / "dh"
    instance = DagsterInstance.from_config(str(home))
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, QueuedRunCoordinator)
    limits = {(d["key"], d["value"]): d["limit"] for d in coordinator.get_run_queue_config().tag_concurrency_limits}
    assert limits == {(BACKEND_TAG, "embedded"): 1, (BACKEND_TAG, "litellm"): 8, (BACKEND_TAG, "vllm"): 2,
                      # UI backfills carry the partition tag: each model gets its backend's limit
                      ("dagster/partition/model", "smollm2"): 1}
    assert coordinator.get_run_queue_config().max_concurrent_runs >= 11


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Largest number of [start, end] intervals open at one instant."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = now = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def test_max_overlap():
    assert _max_overlap([(0, 10), (1, 2), (3, 4)]) == 2
    assert _max_overlap([(0, 1), (1.5, 2)]) == 1
    assert _max_overlap([(0, 5), (1, 5), (2, 5), (3, 5)]) == 4


WORKSPACE_MODULE = textwrap.dedent('''\
    """The project's Definitions without sensors and schedules, so the daemon runs only what the test submits."""
    from dagster import Definitions

    from wse_platform.definitions import build_definitions

    _full = build_definitions()
    defs = Definitions(assets=_full.assets, asset_checks=_full.asset_checks, resources=_full.resources)
''')


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_cells_in_parallel_through_the_run_queue(tmp_path, monkeypatch):
    from dagster import AssetKey, AssetSelection, DagsterEventType, DagsterInstance, DagsterRunStatus, materialize
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from assets.partitions import cell_key
    from wse_platform.config import load_settings
    from assets.sync_rebuilding import FIRST, NO_VERDICT_KEY
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import QUIET_RUN_CONFIG, ensure_dagster_home
    from wse_platform.warehouse import Warehouse

    # A tiny config: 2 of the 4 WSE cells (2 models × 2 architectures), 1 seed, 1 step, a token budget so small
    # that the first agent's JSON is cut off (3 attempts, then a recorded failure): cheap but real calls.
    base = yaml.safe_load((REPO / "wse.yaml").read_text())["models"]["smollm2"]
    second = {**base, "sampling": {**base["sampling"], "seed": 1}}
    cfg = write_config(tmp_path, concurrency={"embedded": len(CELLS)}, models={"smollm2-b": second},
                       wse={"models": MODELS, "architectures": ARCHS, "horizon": 1, "n_seeds": 1,
                            "sampling": {"max_tokens": 16}, "model_groups": {"embedded": MODELS}})
    home = tmp_path / "dagster_home"
    for k, v in {"WSE_CONFIG": str(cfg), "DAGSTER_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}.items():
        monkeypatch.setenv(k, v)
    for var in ("WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings(str(cfg))
    ensure_dagster_home(settings)
    instance = DagsterInstance.get()
    defs = build_definitions(str(cfg))

    # Unpartitioned, LLM-free sources first (in-process), as the CLI would.
    sources = materialize([a for a in defs.assets], instance=instance, resources=defs.resources,
                          selection=AssetSelection.assets("wse_initial_worlds", "wse_episode_seeds"),
                          run_config=QUIET_RUN_CONFIG)
    assert sources.success

    # A backfill of the cells, tagged with the backend so the queue applies its limit.
    cells = [str(cell_key(m, a)) for m, a in CELLS]
    backfill_id = make_new_backfill_id()
    instance.add_backfill(PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id, asset_graph=defs.resolve_asset_graph(), partition_names=cells,
        asset_selection=[AssetKey("wse_trajectory_steps"), AssetKey("wse_trajectories")],
        backfill_timestamp=time.time(), tags={BACKEND_TAG: "embedded"}, dynamic_partitions_store=instance,
        all_partitions=False, title="run-queue test", description=None, run_config=IN_PROCESS))

    (tmp_path / "queue_defs.py").write_text(WORKSPACE_MODULE)
    (tmp_path / "workspace.yaml").write_text(yaml.safe_dump({"load_from": [{"python_file": {
        "relative_path": "queue_defs.py", "attribute": "defs", "working_directory": str(REPO)}}]}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    daemon_bin = Path(sys.executable).parent / "dagster-daemon"
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen([str(daemon_bin), "run", "-w", str(tmp_path / "workspace.yaml")], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        runs = _wait_for_runs(instance, backfill_id, len(cells), daemon, tmp_path / "daemon.log")
    finally:
        _stop(daemon)
        log.close()

    # All succeeded, each a different cell, each tagged for the queue.
    by_cell = {r.dagster_run.tags["dagster/partition"]: r for r in runs}
    assert sorted(by_cell) == sorted(cells)
    failed = [(k, r.dagster_run.status) for k, r in by_cell.items() if r.dagster_run.status != DagsterRunStatus.SUCCESS]
    assert not failed, f"runs failed: {failed}; see {tmp_path / 'daemon.log'}"
    for key, r in by_cell.items():
        tags = r.dagster_run.tags
        assert tags[BACKEND_TAG] == "embedded"
        assert (tags["dagster/partition/arch"], tags["dagster/partition/model"]) == tuple(key.split("|"))

    # They ran in parallel (the queue allowed both): the two runs were executing at the same time.
    overlap = _max_overlap([(r.start_time, r.end_time) for r in runs])
    assert overlap == len(CELLS), [(r.start_time, r.end_time) for r in runs]

    # Exact rows: one step row and one trajectory row per cell, no duplicate, every LLM call recorded once.
    wh = Warehouse(settings.warehouse)
    steps = wh.query("SELECT model, arch, seed_id, step, llm_call_ids FROM wse_trajectory_steps ORDER BY model, arch")
    assert steps.select("model", "arch", "step").rows() == [(m, a, 1) for m, a in sorted(CELLS)]
    assert steps["seed_id"].n_unique() == 1
    trajs = wh.query("SELECT model, arch, seed_id FROM wse_trajectories ORDER BY model, arch")
    assert trajs.rows() == steps.select("model", "arch", "seed_id").rows()
    calls = wh.query("SELECT call_id, partition_key, run_id FROM llm_calls")
    listed = [c for ids in steps["llm_call_ids"] for c in ids]
    assert listed and calls["call_id"].n_unique() == calls.height
    assert sorted(listed) == sorted(calls["call_id"])
    assert set(calls["partition_key"]) == set(cells)
    assert set(calls["run_id"]) == {r.dagster_run.run_id for r in runs}

    # The no-duplicate checks ran inside each cell's run and passed.
    evals = [e.asset_check_evaluation_data for r in runs for e in
             (x.dagster_event for x in instance.all_logs(r.dagster_run.run_id,
                                                         of_type=DagsterEventType.ASSET_CHECK_EVALUATION))]
    # A backfill run is submitted through the run coordinator, which first writes each planned data check that
    # was never evaluated as "first evaluation in run …; not evaluated yet" (a warning, flagged as no verdict);
    # the run's own evaluation follows it.
    no_dups = [e for e in evals if e.check_name == "no_duplicate_rows" and NO_VERDICT_KEY not in e.metadata]
    assert len(no_dups) == 2 * len(cells) and all(e.passed for e in no_dups)
    marks = [e for e in evals if e.check_name == "no_duplicate_rows" and NO_VERDICT_KEY in e.metadata]
    assert len(marks) == len(no_dups) and all(not e.passed and e.description.startswith(FIRST) for e in marks)


def _wait_for_runs(instance, backfill_id: str, n: int, daemon: subprocess.Popen, log_path: Path) -> list:
    from dagster import RunsFilter

    deadline = time.monotonic() + RUN_TIMEOUT_S
    records: list = []
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            pytest.fail(f"dagster-daemon exited with {daemon.returncode}:\n{log_path.read_text()[-3000:]}")
        records = instance.get_run_records(RunsFilter(tags={"dagster/backfill": backfill_id}))
        if len(records) == n and all(r.dagster_run.is_finished for r in records):
            return records
        time.sleep(0.5)
    states = [(r.dagster_run.tags.get("dagster/partition"), r.dagster_run.status.value) for r in records]
    pytest.fail(f"runs not finished after {RUN_TIMEOUT_S}s: {states}\n{log_path.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the daemon and everything it started (code server, run workers): its own process group."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # leftovers of an exited daemon
        except ProcessLookupError:
            pass


def test_a_dagster_yaml_the_user_wrote_is_never_rewritten(tmp_path, monkeypatch):
    """A user's own instance configuration (e.g. storage on Postgres, a run launcher) is only read;
    a file wse-platform generated is kept up to date (README "Beyond one machine")."""
    from wse_platform.config import load_settings
    from wse_platform.runner import GENERATED_MARK, ensure_dagster_home
    from tests.conftest import write_config

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    mine = "# my instance\ntelemetry:\n  enabled: false\nstorage:\n  sqlite:\n    base_dir: /srv/dagster\n"
    (home / "dagster.yaml").write_text(mine)
    settings = load_settings(str(write_config(tmp_path)))
    ensure_dagster_home(settings)
    assert (home / "dagster.yaml").read_text() == mine
    (home / "dagster.yaml").write_text(GENERATED_MARK + ". old text\n")
    ensure_dagster_home(settings)
    assert "class: MarkingRunCoordinator" in (home / "dagster.yaml").read_text()   # assets/run_queue.py
