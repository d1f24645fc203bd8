"""The terminal log of runs: one line per record, never a traceback.

Dagster's default console logger prints a failed step with its whole error chain and stack
(100–2,000 lines for a command whose runs fail); `wse materialize` already prints a FAILED line
with the cause (`run_guard.first_failure`) and closes with one `error:` line. This logger (the
`console` logger of the project's jobs, `definitions.py`) keeps the first line of each record;
the run log in the Dagster UI keeps everything.
"""
from __future__ import annotations

import logging
import sys

from dagster import Field, logger


class OneLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text.splitlines()[0] if text else text


@logger(config_schema={"log_level": Field(str, is_required=False, default_value="INFO"),
                       "name": Field(str, is_required=False, default_value="dagster")},
        description="Dagster's console log, one line per record (details stay in the run log)")
def console_logger(init_context) -> logging.Logger:
    level = logging.getLevelName(str(init_context.logger_config["log_level"]).upper())
    out = logging.Logger(init_context.logger_config["name"], level=level if isinstance(level, int) else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    out.addHandler(handler)
    return out
