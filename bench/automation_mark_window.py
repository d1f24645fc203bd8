"""How long a run the automation requests shows "Running" with no text (issue 21): the time from
Dagster writing the run's planned check rows (`instance.create_run`, in the daemon) to the mark
"rebuilding in run …; until then: …" in the same rows, read from the run's own event log
(`ASSET_CHECK_EVALUATION_PLANNED` → `ASSET_CHECK_EVALUATION` timestamps), and what marking costs
the daemon's tick (CPU seconds of the tick, and of `mark_submitted` alone).

Driven as `tests/orchestration/test_sync_automation_mark.py` does: Dagster's asset daemon, in this
process, evaluates an automation sensor over the synthetic cell → verdicts → table graph and
submits the re-judge of `verdicts` after the cell got a new output (the project's event log storage;
repetitions in one process, so all but the first see warm caches, as a long-running daemon does). Interleaved A/B per repetition:
the project's run queue (`assets/run_queue.py`) and Dagster's plain `QueuedRunCoordinator` (main:
no mark until the `sync_rebuilding` sensor's tick, every 5 s under `dagster dev`, not run here).

    PYTHONPATH=$PWD python bench/automation_mark_window.py [--reps 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PLAIN = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}


def one(queue: dict, tmp: Path) -> dict:
    from dagster import DagsterEventType, EventRecordsFilter, instance_for_test
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget

    import assets.sync_rebuilding as rebuilding
    from assets.sync import sync_events
    from tests.orchestration import test_sync_automation_mark as t

    spent: list[float] = []
    original = rebuilding.mark_submitted

    def timed(*args, **kwargs):
        c = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.process_time() - c)

    rebuilding.mark_submitted = timed
    target = InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name=t.__name__, attribute=t.LOCATION_ATTRIBUTE), location_name="wse"))
    defs, state = t._automated()
    (tmp / "home").mkdir(parents=True)
    try:
        # the project's event log storage too (one engine per file and process), as under `wse ui`
        storage = {"module": "wse_platform.dagster_private", "class": "ReusedEngineSqliteEventLogStorage",
                   "config": {"base_dir": str(tmp / "home" / "history" / "runs")}}
        with instance_for_test(overrides={"run_coordinator": queue, "event_log_storage": storage},
                               temp_dir=str(tmp / "home")) as instance, \
                create_test_daemon_workspace_context(target, instance) as ctx:
            assert t._materialize(defs, instance, "cell", "verdicts", "table").success
            t._daemon_tick(ctx)
            state["cell"] = "b"
            assert t._materialize(defs, instance, "cell").success
            for ev in sync_events(defs.resolve_asset_graph(), instance, {})[0]:
                instance.report_runless_asset_event(ev)
            before = {r.run_id for r in instance.get_runs()}
            time.sleep(1.1)
            c = time.process_time()
            t._daemon_tick(ctx)
            tick_cpu = time.process_time() - c
            [run] = [r for r in instance.get_runs() if r.run_id not in before]

            def stamps(kind):
                recs = instance.get_event_records(EventRecordsFilter(event_type=kind), limit=100)
                return {(r.event_log_entry.dagster_event.event_specific_data.check_name): r.event_log_entry.timestamp
                        for r in recs if r.run_id == run.run_id}
            planned = stamps(DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED)
            marked = stamps(DagsterEventType.ASSET_CHECK_EVALUATION)
            gaps = [marked[c] - planned[c] for c in planned if c in marked]
            return {"checks": len(planned), "marked": len(gaps), "gap_ms_max": 1000 * max(gaps) if gaps else None,
                    "tick_cpu_s": tick_cpu, "mark_cpu_s": sum(spent)}
    finally:
        rebuilding.mark_submitted = original


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from tests.orchestration.test_sync_automation_mark import _project_run_queue

    with tempfile.TemporaryDirectory(prefix="automark-bench-") as d:
        ours = _project_run_queue(Path(d))
        results: dict[str, list[dict]] = {"project queue": [], "plain queue (main)": []}
        for i in range(args.reps):
            for name, queue in (("project queue", ours), ("plain queue (main)", {**ours, **PLAIN})):
                results[name].append(one(queue, Path(d) / f"{i}-{name[:5]}"))
    for name, rows in results.items():
        gaps = [r["gap_ms_max"] for r in rows if r["gap_ms_max"] is not None]
        print(f"{name}: planned checks marked at submission {sum(r['marked'] for r in rows)}/"
              f"{sum(r['checks'] for r in rows)}; planned -> mark "
              + (f"median {statistics.median(gaps):.1f} ms, max {max(gaps):.1f} ms" if gaps else "never (sensor)")
              + f"; tick CPU median {statistics.median(r['tick_cpu_s'] for r in rows):.3f} s"
              + f"; mark_submitted CPU median {statistics.median(r['mark_cpu_s'] for r in rows) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
