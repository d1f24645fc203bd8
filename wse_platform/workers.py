"""The worker processes of one `wse materialize --parallel` command (`parallel_runs` schedules the runs).

Each worker runs one planned run at a time with `execute_in_process`, in its own process: Dagster's
in-process execution is not thread-safe. Workers are forked from a template process that already
imported Dagster and built the command's definitions (multiprocessing's fork server with
`wse_platform.worker_template` preloaded, started by `start_template` when the command starts,
while the command builds its own definitions and plans): a worker then costs a fork and the
Dagster instance (~0.4 s of CPU) instead of a fresh interpreter's imports and definitions (~2-3 s
of CPU each, the spawned workers' share of a fleet command's CPU). The template holds no thread and
no open instance or warehouse file (`worker_template.check_fork_safe`); the instance is made in
each worker after the fork. Where the fork server cannot be used (another platform, a fork server
already running for another command of this process, a template that failed to build), a worker
builds its own definitions, as a spawned worker did: same runs, more CPU.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor

_TEMPLATE: dict = {}   # loader -> token of the template started for it in this process
_STARTED: list = []    # the token of the fork server this process started (one per process)
ENV_KEYS = ("DAGSTER_HOME", "WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR")


def _context():
    """The fork-server context where the platform has one (Linux, macOS), else spawn."""
    try:
        return multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")


def start_template(loader: tuple, select: list[str] | None = None) -> bool:
    """Start the fork server with the definitions `loader` builds preloaded (see the module doc), without
    waiting for it to build them. False when a fork server already runs (its preload is fixed). `select`: the
    command's `--select` patterns, whose runs' jobs the template makes once (`worker_template.warm_selections`)."""
    from multiprocessing import forkserver

    ctx = _context()
    if ctx.get_start_method() != "forkserver":
        return False
    _TEMPLATE.clear()   # a template serves the command that started it only
    if _STARTED or getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:  # noqa: SLF001
        return False   # one fork server per process, its preload fixed when it started
    token = f"{os.getpid()}-{time.time_ns()}"
    target, args = loader
    os.environ["WSE_WORKER_TEMPLATE"] = json.dumps([token, target, list(args), select], default=str)
    try:
        ctx.set_forkserver_preload(["wse_platform.worker_template"])
        forkserver.ensure_running()   # starts it now; it builds the definitions while this process plans
    finally:
        os.environ.pop("WSE_WORKER_TEMPLATE", None)   # nor for processes this command starts otherwise
    _STARTED.append(token)
    _TEMPLATE[_loader_key(loader)] = token
    return True


def forget_template() -> None:
    """At the end of a command: its template serves no later command of this process (`start_template`)."""
    _TEMPLATE.clear()


def _loader_key(loader: tuple) -> str:
    target, args = loader
    return json.dumps([target, list(args)], default=str)


class Workers:
    """The worker processes of one command (a process pool forked from the template), started ahead of
    need: `warm` starts the next one when none is idle and none is starting (with the template a
    start is a fork; without it each start builds the definitions, so one at a time)."""

    def __init__(self, loader: tuple, limit: int, progress_args: tuple | None = None):
        self.loader, self.limit, self.progress_args = loader, max(1, limit), progress_args
        ctx = _context()
        token = _TEMPLATE.get(_loader_key(loader))
        self.forked = token is not None and ctx.get_start_method() == "forkserver"
        if not self.forked and ctx.get_start_method() == "forkserver":
            ctx = multiprocessing.get_context("spawn")   # no template of ours: a clean interpreter per worker
        env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}   # a fork server keeps the env it started with
        self.pool = ProcessPoolExecutor(max_workers=self.limit, mp_context=ctx, initializer=init_worker,
                                        initargs=(loader, progress_args, token, env))
        self.spawned = 0               # processes the pool started (it starts one when a task finds none idle)
        self.warming: Future | None = None
        self.forking: list[Future] = []   # `prefork`'s tasks
        self.unsubmitted = 0              # `prefork`'s tasks its thread has not submitted yet
        self._count_lock = threading.Lock()

    def _idle(self, busy: int) -> int:
        return (self.spawned - busy - (self.warming is not None and not self.warming.done())
                - sum(not f.done() for f in self.forking) - self.unsubmitted)

    def submit(self, busy: int, fn, *args) -> Future:
        """`fn(*args)` in a worker; `busy` = tasks of ours under way besides `_warm`."""
        if self._idle(busy) <= 0 and self.spawned < self.limit:
            self.spawned += 1
        return self.pool.submit(fn, *args)

    def warm(self, busy: int, upto: int) -> None:
        if self.spawned < min(upto, self.limit) and (self.warming is None or self.warming.done()) \
                and self._idle(busy) <= 0:
            self.warming = self.submit(busy, _warm)

    def prefork(self, n: int) -> threading.Thread | None:
        """Fork up to `n` workers (forked pools only): their start (the instance) overlaps what the command
        does meanwhile (the source run), instead of following the first runs' submission.

        From a thread, without waiting: a fork request waits for the fork server's answer, which comes only
        once the template has built the definitions (`start_template` does not wait for it), and the command
        must not wait for that before the run it makes itself (issue 24: the source run started up to
        seconds late, after the template). Returns the thread (None: nothing to fork)."""
        k = min(n, self.limit) - self.spawned
        if not self.forked or k <= 0:
            return None
        self.spawned += k
        with self._count_lock:
            self.unsubmitted += k

        def fork() -> None:
            left = k
            try:
                for _ in range(k):
                    self.forking.append(self.pool.submit(_warm))
                    with self._count_lock:
                        self.unsubmitted -= 1
                    left -= 1
            except Exception:  # noqa: BLE001 - a pool shut down or broken meanwhile: its own submit says so
                with self._count_lock:
                    self.unsubmitted -= left

        thread = threading.Thread(target=fork, name="wse-prefork", daemon=True)
        thread.start()
        return thread

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


_WORKER: dict = {}


def _warm() -> None:
    """Nothing: submitted to start a worker process ahead of need."""


def init_worker(loader: tuple, progress_args: tuple | None = None, token: str | None = None,
                env: dict[str, str] | None = None) -> None:
    """Once per worker process: the command's instance and config variables (`env`), the definitions (the
    template's, else built here) and the Dagster instance (the instance at $DAGSTER_HOME)."""
    import importlib

    os.environ.update(env or {})

    from dagster import DagsterInstance

    from wse_platform.progress import join_shared
    join_shared(progress_args)  # this worker's request counts, summed by the command (progress.Shared)

    target, args = loader
    defs = None
    _WORKER["forked_from"] = None
    if token is not None:
        from wse_platform import worker_template
        defs = worker_template.DEFS.get(worker_template.key(token, target, args))
        _WORKER["forked_from"] = worker_template.BUILT_BY[0] if defs is not None else None
        if defs is None and worker_template.ERROR:   # slower, same runs: say why
            import sys
            print(f"note: the worker template failed ({worker_template.ERROR[0]}); this worker process loads "
                  "the definitions itself", file=sys.stderr)
    if defs is None:
        module, func = target.split(":")
        defs = getattr(importlib.import_module(module), func)(*args)
    _WORKER["defs"] = defs
    from wse_platform.instance_sqlite import install
    install(os.environ["DAGSTER_HOME"])  # cheaper SQLite commits (instance_sqlite.py)
    instance = None
    if _WORKER.get("forked_from") is not None:   # the template's, opened once for every worker (keep_instance)
        from wse_platform import worker_template
        instance = worker_template.kept_instance(os.environ["DAGSTER_HOME"])
    if instance is None:
        from wse_platform.dagster_private import share_alembic_revisions
        share_alembic_revisions()   # (runner.get_instance: the storages' schema checks read the scripts once)
    _WORKER["instance"] = instance or DagsterInstance.get()
    from wse_platform.procs import exit_without_teardown, freeze_long_lived
    freeze_long_lived()  # definitions and instance loaded: left out of the collector's scans (procs.py)
    import atexit
    # runs first at exit (handlers run last-registered first); no teardown of Dagster & co. (~3 s of CPU per
    # worker at the command's end): everything a run writes is committed when the run ends, and the platform
    # survives a kill -9 of any process (journal, claims, run records)
    atexit.register(exit_without_teardown)


def worker_info() -> tuple[int, int | None]:
    """(this worker's pid, the pid of the template that built its definitions, or None): for tests."""
    return os.getpid(), _WORKER.get("forked_from")


def run_step(keys: list[str], partition_key: str | None, tags: dict[str, str],
             index: int | None = None) -> tuple[bool, str | None, float, str | None]:
    """(ok, first failure, seconds, infrastructure cause) of one run (planned run `index`) in this worker."""
    from dagster import AssetKey

    from wse_platform import progress
    from wse_platform.run_guard import first_failure, infrastructure_cause
    from wse_platform.runner import RunPlanStep, run_in_location

    t0 = time.perf_counter()
    step = RunPlanStep([AssetKey.from_user_string(k) for k in keys], partition_key)
    progress.running(index)   # the command tells from this slot when the run is past its requests
    try:
        result = run_in_location(_WORKER["defs"], step, _WORKER["instance"], tags)
    finally:
        progress.running(None)
    why = None if result.success else first_failure(result)
    return result.success, why, time.perf_counter() - t0, infrastructure_cause(result)
