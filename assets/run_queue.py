"""The instance's run queue (`dagster.yaml`'s `run_coordinator`, written by `runner.dagster_yaml`):
Dagster's `QueuedRunCoordinator` (same config: per-backend limits), which marks a run's planned checks
before it queues the run.

Dagster's daemon creates the runs a sensor or the automation (`wse_automation`) requests, a backfill's
runs and the UI's "Materialize" in its own code (`instance.create_run`: the run and one *planned*
evaluation per check it will execute, which the UI shows as "Running" with no text), then hands each
run to the instance's run coordinator (`submit_run`), in the same thread, before anything else can
see the run queued. `submit_run` is therefore the earliest point of ours with the run's id and its
planned rows: here `assets/sync_rebuilding.mark_submitted` copies the verdict said before into each
planned row, marked "rebuilding in run …; until then: …", and only then does the run enter the queue.
The `sync_rebuilding` sensor (on runs entering the queue, every 5 s) still runs after: it recomputes
`in_sync` of what the run rebuilds and says it in the run's row where the verdict changed since.

Loaded by every process that opens the instance (the CLI, run workers, the daemon, the webserver):
this module imports nothing of the project until a run is submitted.
"""
from __future__ import annotations

import logging

from dagster import DagsterRunStatus, QueuedRunCoordinator, SubmitRunContext

log = logging.getLogger(__name__)


class MarkingRunCoordinator(QueuedRunCoordinator):
    """`QueuedRunCoordinator` that first marks the run's planned checks (`mark_submitted`). A failure
    to mark is logged; the run is queued whatever happens."""

    def submit_run(self, context: SubmitRunContext):
        run = context.dagster_run
        if run.status == DagsterRunStatus.NOT_STARTED:
            try:
                from assets.sync_rebuilding import mark_submitted

                mark_submitted(self._instance, run, lambda: context.workspace.asset_graph)
            except Exception as exc:  # noqa: BLE001 - the UI's note must never stop a run from being queued
                log.warning("could not mark the checks of run %s as rebuilding: %s: %s",
                            run.run_id, type(exc).__name__, exc)
        return super().submit_run(context)
