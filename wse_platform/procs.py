"""Process liveness, for claims and records left by processes that may have died; what a process
that runs does once its definitions are loaded (`freeze_long_lived`); and the exit of a process that
preloaded Dagster (`exit_without_teardown`)."""
from __future__ import annotations

import gc
import os

_frozen: dict[str, int] = {}


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def freeze_long_lived() -> None:
    """Exclude the objects this process holds now (imports, the definitions, the instance) from the
    cyclic garbage collector's scans (`gc.freeze`), once per process, before its first run.

    A run allocates a lot (Dagster's events and records, JSON), so the collector runs a full
    collection every few hundred milliseconds of it, and a full collection visits every object the
    process holds: ~0.2 s of CPU each with the 444-cell grid's definitions, ~0.25 s per cell run
    (issue 24 item 3; `bench/cell_overhead.py`). Frozen objects are still freed by reference counting;
    only garbage in reference cycles that exists at this moment is never collected (a one-time amount:
    no change in the process's peak memory measured). Called by `runner.execute`, `parallel_runs.run_here`,
    the `--parallel` workers and the runs the daemon launches (their executor)."""
    if _frozen.get("pid") != os.getpid():
        gc.freeze()
        _frozen["pid"] = os.getpid()


def exit_without_teardown() -> None:
    """End this process now, its standard streams flushed, without the interpreter's teardown of the
    Dagster & co. it loaded (~1-3 s of CPU per process on 2 cores, paid after the command's last line).
    For processes whose writes are committed when they get here: workers and the fork server
    (`wse_platform.workers`, `wse_platform.worker_template`), registered with `atexit`."""
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing to keep
            pass
    os._exit(0)
