"""CLI runs as the UI sees them (issue 13 items 6-7, issue 14 items 10 and 12). No LLM."""
from __future__ import annotations

import os
import subprocess
import sys

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, Definitions, MaterializeResult, asset, multi_asset
from dagster import AssetSpec

from wse_platform.runner import (
    HOST_TAG,
    PID_TAG,
    RunPlanStep,
    _remote_origin,
    execute,
    expand_multi_assets,
    fail_orphaned_runs,
)


@asset
def upstream():
    return MaterializeResult()


@asset(deps=[upstream])
def downstream():
    return MaterializeResult()


def test_cli_runs_belong_to_the_ui_code_location_and_show_their_selection(tmp_path):
    defs = Definitions(assets=[upstream, downstream])
    with DagsterInstance.ephemeral() as instance:
        report = execute(defs, [RunPlanStep([AssetKey("downstream")], None)], instance, echo=lambda *_: None)
        assert report.ok
        run = instance.get_runs(limit=1)[0]
    # the job exists in the code location (not `__ephemeral_asset_job__`) ...
    assert defs.get_repository_def().has_job(run.job_name)
    # ... the run carries the origin `wse ui` gives that location, which "Re-execute" looks up ...
    want = _remote_origin(run.job_name)
    assert run.remote_job_origin is not None
    assert run.remote_job_origin.location_name == want.location_name
    assert run.remote_job_origin.repository_origin.repository_name == want.repository_origin.repository_name
    # ... and the run's target is its asset selection
    assert run.asset_selection == {AssetKey("downstream")}


def test_orphaned_cli_run_is_marked_failed_at_the_next_start(tmp_path):
    import socket

    defs = Definitions(assets=[upstream])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with DagsterInstance.ephemeral() as instance:
        job = defs.resolve_implicit_global_asset_job_def()
        orphan = instance.create_run_for_job(job, tags={PID_TAG: str(dead.pid), HOST_TAG: socket.gethostname()},
                                             status=DagsterRunStatus.STARTED)
        mine = instance.create_run_for_job(job, tags={PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()},
                                           status=DagsterRunStatus.STARTED)
        assert fail_orphaned_runs(instance) == [orphan.run_id]
        assert instance.get_run_by_id(orphan.run_id).status == DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(mine.run_id).status == DagsterRunStatus.STARTED  # its process is alive


@multi_asset(specs=[AssetSpec("traj_steps"), AssetSpec("traj_summary"), AssetSpec("traj_other")])
def traj():
    yield from ()


def test_glob_splitting_a_multi_asset_selects_the_whole_multi_asset(capsys, tmp_path, monkeypatch):
    from wse_platform import runner

    defs = Definitions(assets=[traj, upstream])
    keys, notes = expand_multi_assets(defs, [AssetKey("traj_steps")])
    assert set(keys) == {AssetKey("traj_steps"), AssetKey("traj_summary"), AssetKey("traj_other")}
    assert "traj_summary" in notes[0] and "traj_other" in notes[0]
    chosen = runner.select_keys(defs, ["traj_s*"])  # the glob of the issue (`wse_traj*`) on this graph
    assert set(chosen) == set(keys)
    assert "computed together" in capsys.readouterr().err


def test_wse_ui_in_a_folder_with_its_own_config_uses_that_config(tmp_path, monkeypatch):
    from tests.conftest import write_config
    from wse_platform import cli

    cfg = write_config(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WSE_CONFIG", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    seen = {}
    class FakeDagsterDev:
        pid = -1  # not a process: nothing below it for `wse ui` to stop

        def __init__(self, cmd, env, cwd, **kw):
            seen.update(env=env, cwd=cwd)

        def wait(self, timeout=None):
            return 0

        poll = wait

    monkeypatch.setattr(cli.subprocess, "Popen", FakeDagsterDev)
    assert cli.main(["ui", "--port", "0"]) == 0
    # dagster dev runs in the repository; the code location must still read ./wse.yaml of this folder
    assert seen["env"]["WSE_CONFIG"] == str(cfg.resolve())


def test_plan_runs_what_reads_an_external_table_after_the_assets_writing_it():
    """llm_usage reads llm_calls, which the LLM assets write: it must run after them."""
    from wse_platform.runner import plan

    @asset
    def gen():
        return MaterializeResult()

    calls = AssetSpec("calls", deps=[gen])

    @asset(deps=[calls])
    def usage():
        return MaterializeResult()

    defs = Definitions(assets=[gen, calls, usage])
    steps = plan(defs, [AssetKey("usage"), AssetKey("gen")], {AssetKey("usage"): None, AssetKey("gen"): None})
    assert [[k.to_user_string() for k in s.keys] for s in steps] == [["gen"], ["usage"]]


def test_the_workspace_origin_is_read_once_while_the_file_stays_the_same(tmp_path, monkeypatch):
    from wse_platform import dagster_private, runner

    reads = []
    real = dagster_private.WorkspaceFileTarget.create_origins
    monkeypatch.setattr(dagster_private.WorkspaceFileTarget, "create_origins",
                        lambda self: reads.append(1) or real(self))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(runner.WORKSPACE_FILE.read_text())
    monkeypatch.setattr(runner, "WORKSPACE_FILE", workspace)
    first = _remote_origin("__ASSET_JOB")
    assert _remote_origin("__ASSET_JOB") == first and len(reads) == 1   # before: read for every run
    workspace.write_text(workspace.read_text() + "\n# edited\n")
    assert _remote_origin("__ASSET_JOB") == first and len(reads) == 2   # changed: read again
    assert _remote_origin("other_job").job_name == "other_job"
