"""The job of an asset selection is made once per process (`dagster_private.execute_selection`, used by
`runner.run_in_location`), and the runs it makes record what `execute_in_process` records."""
from __future__ import annotations

import pytest
from dagster import (AssetCheckResult, DagsterInstance, Definitions, StaticPartitionsDefinition, asset,
                     asset_check)

from wse_platform import dagster_private
from wse_platform.runner import QUIET_RUN_CONFIG, RunPlanStep, run_in_location

PARTS = StaticPartitionsDefinition(["a", "b", "c", "d"])


@asset(partitions_def=PARTS)
def cell(context) -> None:
    context.log.info(context.partition_key)


@asset(partitions_def=PARTS, deps=[cell])
def verdict() -> None:
    pass


@asset_check(asset=verdict)
def verdict_checked() -> AssetCheckResult:
    return AssetCheckResult(passed=True)


@asset(deps=[verdict])
def table() -> None:
    pass


@pytest.fixture
def instance(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.get() as inst:
        yield inst


def _defs() -> Definitions:
    return Definitions(assets=[cell, verdict, table], asset_checks=[verdict_checked])


def _counting(monkeypatch) -> dict:
    """Counts of selection jobs made and of job snapshots taken."""
    from dagster import JobDefinition
    from dagster._core.snap import JobSnap  # test only: what the adapter saves

    counts = {"jobs": 0, "snapshots": 0}
    make, snap = JobDefinition._get_job_def_for_asset_selection, JobSnap.from_job_def.__func__

    def counted_make(self, data):
        counts["jobs"] += 1
        return make(self, data)

    def counted_snap(cls, job_def, *a, **k):
        counts["snapshots"] += 1
        return snap(cls, job_def, *a, **k)

    monkeypatch.setattr(JobDefinition, "_get_job_def_for_asset_selection", counted_make)
    monkeypatch.setattr(JobSnap, "from_job_def", classmethod(counted_snap))
    return counts


def test_runs_of_one_selection_make_its_job_and_snapshots_once(instance, monkeypatch):
    defs = _defs()
    keys = [cell.key, verdict.key]
    counts = _counting(monkeypatch)
    for pk in ["a", "b", "c"]:
        assert run_in_location(defs, RunPlanStep(keys, pk), instance, {}).success
    # the first run: the selection's job and the job of the run's creation (its subset), and the snapshots of
    # these two and of the job they were cut from (the lineage); before, each run made all of them again (6, 9)
    assert counts == {"jobs": 2, "snapshots": 3}
    assert run_in_location(defs, RunPlanStep([table.key], None), instance, {}).success
    assert counts == {"jobs": 4, "snapshots": 6}   # another selection: its own jobs


def test_a_run_records_what_execute_in_process_records(instance):
    defs = _defs()
    job = defs.resolve_implicit_global_asset_job_def()
    keys = [cell.key, verdict.key]
    tags = {"wse/backend": "x"}
    for pk in ["a", "b"]:   # the second: from the kept jobs
        ours = dagster_private.execute_selection(job, keys, instance=instance, partition_key=pk,
                                                 run_config=QUIET_RUN_CONFIG, tags=tags).dagster_run
    theirs = job.execute_in_process(run_config=QUIET_RUN_CONFIG, instance=instance, partition_key="b",
                                    raise_on_error=False, tags=tags, asset_selection=keys).dagster_run
    assert ours.run_id != theirs.run_id

    def record(run):
        run = instance.get_run_by_id(run.run_id)
        snap = instance.get_job_snapshot(run.job_snapshot_id)
        return (run.job_name, run.status, run.tags, run.asset_selection, run.asset_check_selection, run.run_config,
                run.step_keys_to_execute, run.job_snapshot_id, run.execution_plan_snapshot_id,
                snap.lineage_snapshot.parent_snapshot_id if snap.lineage_snapshot else None)

    assert record(ours) == record(theirs)
    assert ours.tags["dagster/partition"] == "b" and ours.asset_selection == frozenset(keys)
    planned = [instance.get_records_for_run(r.run_id, of_type=_planned()).records for r in (ours, theirs)]
    assert [sorted(str(e.event_log_entry.dagster_event.event_specific_data) for e in p) for p in planned] \
        == [sorted(str(e.event_log_entry.dagster_event.event_specific_data) for e in planned[1])] * 2


def _planned():
    from dagster import DagsterEventType
    return {DagsterEventType.ASSET_MATERIALIZATION_PLANNED, DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED}


def test_a_new_definitions_object_gets_its_own_jobs(instance):
    keys = [cell.key, verdict.key]
    first, second = _defs(), _defs()
    j1, j2 = first.resolve_implicit_global_asset_job_def(), second.resolve_implicit_global_asset_job_def()
    assert dagster_private.selection_job(j1, keys) is dagster_private.selection_job(j1, list(reversed(keys)))
    assert dagster_private.selection_job(j2, keys) is not dagster_private.selection_job(j1, keys)
    assert dagster_private.selection_job(j1, [cell.key]) is not dagster_private.selection_job(j1, keys)
