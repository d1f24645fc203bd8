"""The LLM client as a Dagster resource.

`session(context)` yields a client tagged with the run id and partition key and,
when the step ends (also on failure), writes every call record into `llm_calls`,
so usage accounting survives crashes of the asset body.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from dagster import ConfigurableResource

from resources.settings import settings_for
from resources.warehouse import WarehouseResource


class _DagsterLogHandler(logging.Handler):
    def __init__(self, log):
        super().__init__(logging.INFO)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        self._log.info(record.getMessage())


class LLMResource(ConfigurableResource):
    config_path: str | None = None
    no_cache: bool = False

    @contextlib.contextmanager
    def session(self, context) -> Iterator["LLMClient"]:  # noqa: F821
        from wse_platform.llm import LLMClient
        from wse_platform.llm.accounting import write_call_records

        settings = settings_for(self.config_path)
        partition_key = context.partition_key if getattr(context, "has_partition_key", False) else None
        client = LLMClient(settings, run_id=context.run_id, partition_key=partition_key,
                           use_cache=(settings.use_cache and not self.no_cache))
        handler = _DagsterLogHandler(context.log)
        logger = logging.getLogger("wse_platform")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield client
        finally:
            logger.removeHandler(handler)
            warehouse = WarehouseResource(config_path=self.config_path).get()
            write_call_records(warehouse, client.drain_call_records())
