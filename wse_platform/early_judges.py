"""Judges start on what exists as soon as it exists, while their cell is still being generated.

Generation and judging stay separate assets: the judging assets read the stored rows and never
regenerate, and a new judge configuration re-judges without generating. But a judging run starts
only when its cell's generation run has finished, so the fleet would wait for the slowest
trajectory of a cell before the first judge request goes out, and then for the judges' own chain.

So, while a cell is generated, the generation step also *asks* the configured judges, each
request as soon as its input exists (WSE: the consistency panel on step k once step k is
narrated and steps < k were judged consistent — the judging loop stops at the first other
verdict —, the richness panel once the trajectory has ended; 100-Endings: the judge on each
predicted ending once its position's forecast is back). The requests are built by the judging
code's own functions from the same values the stored rows hold, and go through the one client
(cache, journal, accounting, endpoint limits). Nothing is written from these answers: the judging
asset, rebuilding the very same requests from the stored rows, is answered from the response
cache (no request is paid twice, its `llm_calls` rows are cache hits) and writes the verdicts as
before, so the rows do not depend on when an answer came. A judge request that fails here (a
transport error, a judge endpoint down) is only logged: the judging asset asks again.

On only where it pays: every model involved (the cell's model and each judge) runs on a server
backend (`parallel_runs.SERVER_BACKENDS`: requests in flight cost slots, not this machine's
cores) and is not batch-only; `WSE_EARLY_JUDGES=0` switches it off (e.g. to generate now and
judge later with another panel, where the early answers would never be used).
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("wse_platform.early_judges")


def enabled(settings: Any, client: Any, models: Iterable[str | None]) -> bool:
    """Whether early judging pays off for a cell whose requests go to `models` (see the module doc)."""
    from wse_platform import flow
    from wse_platform.parallel_runs import SERVER_BACKENDS

    if os.environ.get("WSE_EARLY_JUDGES", "1").strip() in ("0", "false", "no", "off"):
        return False
    models = [m for m in models if m]
    if not models:
        return False
    for m in models:
        cfg = settings.models.get(m)
        if cfg is None or cfg.backend not in SERVER_BACKENDS:
            return False
    return not flow.batch_only(client, models)


class Ask:
    """Fire-and-forget judge requests of one cell: `submit(fn)` runs `fn()` in its own thread (a
    judge chain waits on its own answers, never on the generation); `close()` waits for all of them.
    Errors are logged, never raised (the judging asset asks again)."""

    def __init__(self, what: str):
        self.what = what
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._errors = 0
        self.stopped = False   # set when the generation fails or is interrupted: no new judge request


    def call(self, fn: Callable[[], Any]) -> None:
        """`fn()` here and now, its error logged (the first one) instead of raised."""
        if self.stopped:
            return
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - the judging asset asks again
            with self._lock:
                self._errors += 1
                first = self._errors == 1
            if first:
                log.warning("early %s requests failed (the judging step will ask again): %s: %s",
                            self.what, type(err).__name__, err)

    def submit(self, fn: Callable[[], Any]) -> None:
        """`fn()` in a thread of its own (`close` waits for it)."""
        t = threading.Thread(target=self.call, args=(fn,), name="wse-early-judge", daemon=False)
        with self._lock:
            self._threads.append(t)
        t.start()

    def close(self) -> None:
        while True:
            with self._lock:
                todo = [t for t in self._threads if t.is_alive()]
            if not todo:
                return
            for t in todo:
                t.join()
