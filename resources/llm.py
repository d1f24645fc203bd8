"""The LLM client as a Dagster resource.

`session(context)` yields a client tagged with the run id and partition key. Call
records go to `llm_calls` in batches while calls complete and, the rest, when the step ends,
also on failure (a killed process's records are journaled first and written by the next run;
`call_id` makes a rewrite harmless). Each LLM asset's output metadata gets the session's usage
(calls, failures by kind, share of truncated answers and cut prompts). An
`LLMInfrastructureError` (missing key, 401, no server, broken cache) propagates: the
asset fails and writes no result.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from dagster import ConfigurableResource

from resources.settings import settings_for
from resources.warehouse import WarehouseResource

# records are journaled as they are made (a kill loses none: the next run writes them); written to
# llm_calls in batches of this many while calls complete, or this often, whichever comes first, so a
# running step's calls show in `llm_calls` within seconds (tests/llm/test_records_survive_kill.py).
# One batch costs ~75 ms of CPU (a warehouse open and an insert): every 2 s that was ~5-10 % of a
# fleet run's CPU (issue 24); every 5 s it is ~1.5 % of a core per running step.
# The interval doubles after each write of a step up to FLUSH_INTERVAL_MAX_S (the first batch still
# shows within seconds, later ones at most 20 s late): a 60 s step writes at ~5, 15, 35, 55 s instead
# of every 5 s (issue 24, 256 slots: the record writes were ~3.5 % of the fleet command's CPU, two
# thirds of it the warehouse open and close; bench/cpu_components.py).
FLUSH_EVERY = 1000
FLUSH_INTERVAL_S = 5.0
FLUSH_INTERVAL_MAX_S = 20.0


class _DagsterLogHandler(logging.Handler):
    def __init__(self, log):
        super().__init__(logging.INFO)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        self._log.info(record.getMessage())


def annotate_outputs(context, metadata: dict) -> None:
    """Add the LLM usage to the metadata of every output the step produces."""
    op_context = getattr(context, "op_execution_context", context)
    names = getattr(op_context, "selected_output_names", None) or ["result"]
    for name in names:
        try:
            context.add_output_metadata(metadata, output_name=name)
        except Exception as err:  # e.g. the output was already emitted: metadata is informative only
            context.log.debug(f"LLM usage metadata not attached to {name}: {err}")


def _progress(context, partition_key: str | None, op_context, settings, warehouse):
    """Progress lines of this step in the run log: requests done against the run's planned total
    (`wse_platform.progress`); a run without the tag (launched from the UI) plans its step itself."""
    from wse_platform import progress

    try:
        tags = dict(context.run.tags)
        planned = progress.decode_tag(tags.get(progress.TAG))
        names = [k.to_user_string() for k in context.selected_asset_keys]
    except Exception:  # noqa: BLE001 - a context without a run or assets: lines without a total
        tags, planned, names = {progress.TAG: ""}, {}, []

    def plan_here() -> int | None:
        from wse_platform.plan import SEEDS_SQL
        try:
            seeds = list(warehouse.query(SEEDS_SQL).iter_rows())
        except Exception:  # noqa: BLE001 - no seeds table yet: the plan's defaults
            seeds = []
        return progress.planned_in_step(settings, names, partition_key, seeds)

    label = f"progress {str(getattr(op_context, 'op_handle', '') or '') or 'LLM'}" + \
        (f" [{partition_key}]" if partition_key else "")
    return progress.Reporter(label, progress.TALLY.counts, progress.total_of(planned, names), context.log.info,
                             total_fn=None if progress.TAG in tags else plan_here).start()


class LLMResource(ConfigurableResource):
    config_path: str | None = None
    no_cache: bool = False

    @contextlib.contextmanager
    def session(self, context) -> Iterator["LLMClient"]:  # noqa: F821
        from wse_platform.llm import LLMClient
        from wse_platform.llm.accounting import usage_summary, write_call_records

        settings = settings_for(self.config_path)
        partition_key = context.partition_key if getattr(context, "has_partition_key", False) else None
        warehouse = WarehouseResource(config_path=self.config_path).get()
        op_context = getattr(context, "op_execution_context", context)
        client = LLMClient(settings, run_id=context.run_id, partition_key=partition_key,
                           scope=str(getattr(op_context, "op_handle", "") or "") or None,
                           use_cache=(settings.use_cache and not self.no_cache),
                           # the step's own lines (`_progress` below) say the progress in the run log:
                           # the client's per-batch lines (one per 10 requests) would be stored events too
                           progress=False,
                           record_sink=lambda rows: write_call_records(warehouse, rows),
                           flush_every=FLUSH_EVERY, flush_interval_s=FLUSH_INTERVAL_S,
                           flush_interval_max_s=FLUSH_INTERVAL_MAX_S)
        handler = _DagsterLogHandler(context.log)
        logger = logging.getLogger("wse_platform")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        reporter = _progress(context, partition_key, op_context, settings, warehouse)
        outcome = "stopped by an error"
        try:
            yield client
            outcome = "done"
        finally:
            reporter.finish(outcome)
            logger.removeHandler(handler)
            records = client.call_records()
            client.flush_records()  # queued answers into the cache, every record not yet written into llm_calls
            client.drain_call_records()  # all written (flush_records raises otherwise): not written twice
            client.close()  # reached only when everything is stored: else the journal stays for the next run
            annotate_outputs(context, usage_summary(records))
            from assets.core import mark_llm_calls  # llm_calls shows as updated, llm_usage follows
            mark_llm_calls(context, len(records), sum(1 for r in records if not r.get("valid")))
