"""Progress of long batches: a tqdm bar in a terminal, periodic log lines elsewhere.

Log lines go to the `wse_platform.llm` logger, which the Dagster resource routes to
the run log; a caller may also pass its own `progress(done, total)` callback.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

log = logging.getLogger("wse_platform.llm")

ProgressFn = Callable[[int, int], None]
LOG_EVERY_N = 10  # a log line at least every N finished requests (and every 10 %, every 30 s)
SLOW_REQUEST_S = 10.0  # a smaller batch logs each request that finishes this long after the last line


class BatchProgress:
    """Counts finished requests of one `complete_many` batch."""

    def __init__(self, total: int, desc: str, callback: ProgressFn | None = None,
                 every_fraction: float = 0.1, every_s: float = 30.0, min_total_to_log: int = 10,
                 enabled: bool = True, slow_s: float = SLOW_REQUEST_S):
        self.total, self.desc, self.callback = total, desc, callback
        self.done = 0
        self.failed = 0  # requests that ended without a valid answer
        self.t0 = time.monotonic()
        self._every_fraction, self._every_s = every_fraction, every_s
        self._min_total = min_total_to_log if enabled else 2**62
        # small batches of slow calls (a CPU model: one call per agent and step) log too, so a
        # two-minute cell made of 1-request batches is not one silent line
        self._slow_s = slow_s if enabled else float("inf")
        self._last_log_t = self.t0
        self._last_log_done = 0
        self._bar = None
        if callback is None and total >= self._min_total and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc=desc, unit="req", leave=False)
            except ImportError:  # pragma: no cover - tqdm is a dependency
                self._bar = None

    def advance(self, k: int = 1, failed: bool = False) -> None:
        self.done += k
        self.failed += k if failed else 0
        if self.callback is not None:
            self.callback(self.done, self.total)
        elif self._bar is not None:
            self._bar.update(k)
        elif self.total >= self._min_total:
            self._maybe_log()
        elif time.monotonic() - self._last_log_t >= self._slow_s:
            log.info(self.line())
            self._last_log_t, self._last_log_done = time.monotonic(), self.done

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"{self.desc}: {self.done}/{self.total} requests, {self.failed} failed, {rate:.2f}/s, "
                f"elapsed {elapsed:.0f}s, ETA {eta:.0f}s")

    def _maybe_log(self) -> None:
        now = time.monotonic()
        step = max(1, min(LOG_EVERY_N, int(self.total * self._every_fraction)))
        if (self.done - self._last_log_done >= step or now - self._last_log_t >= self._every_s
                or self.done == self.total):
            log.info(self.line())
            self._last_log_t, self._last_log_done = now, self.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
