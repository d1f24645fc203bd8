"""Many cells at once from `wse materialize`: the planned runs execute concurrently, in threads.

Design (issue 24 item 2). `runner.plan` gives one run per (asset group, partition); here each
run starts as soon as the runs it depends on have finished (a cell's judging waits for that
cell's generation only; a table over all cells waits for every cell), up to `parallel` runs
at once, and at most `settings.concurrency[backend]` runs per backend of the cell's model —
the same limits the run queue applies to UI-launched runs through the `wse/backend` tag
(`dagster.yaml`, written by `runner.ensure_dagster_home`). Each run executes in one of
`parallel` worker processes (spawned once, each loading the definitions once, then running
one run at a time with `execute_in_process`, as the sequential path does): Dagster's
in-process execution is not thread-safe (two runs starting in threads of one process
deadlock in its logging set-up). The in-flight limit per endpoint across these processes is
the LLM client's (`wse_platform.llm`). Each run is recorded in the instance as before (UI,
staleness, `wse status` see them). The request flow inside a cell is `wse_platform.flow`.

Runs past their requests (issue 24 item 1). A cell run spends seconds after its last request
(judging replays of cached answers, aggregates, checks) in which its worker sends nothing, and
cells started together finish together, the slowest conversation of a cell last. So `parallel`
bounds the runs still *sending*, not the runs: a run counts as past its requests once its worker
had an answer from a model since the run started, none for `QUIET_S`, and has at most
`FEW_IN_FLIGHT` calls in flight (the worker's `progress.Tally` publishes when its last answer from
a model came, its calls in flight and which run it executes: `progress.Shared`); the next planned
run then starts in one of `spare` extra worker processes while the other finishes. A run that never had an answer
from a model (fully cached, a table) counts as sending until it ends, as before. The per-backend
run limit counts sending runs too; the per-endpoint in-flight limit is the client's and holds
for every process whatever the number of runs. Worker processes are started one at a time
ahead of need (a `_warm` task: each loads the definitions while the others work) up to
`parallel + spare`, instead of several at once when a wave of runs is submitted. Rows do not
depend on this timing (each cell's rows depend only on its own seeds and the cache).

Signals: Ctrl-C reaches the workers too (one process group): Dagster interrupts their runs
and records them failed; the first SIGINT/SIGTERM also starts no further run; a worker killed
with -9 leaves a run the next `wse` command marks failed (`runner.fail_orphaned_runs`).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from wse_platform.config import Settings

SERVER_BACKENDS = ("litellm",)  # backends whose cells gain from running side by side
QUIET_S = float(os.environ.get("WSE_RUN_QUIET_S", "1.5"))  # no answer from a model for this long ...
FEW_IN_FLIGHT = 2   # ... and at most this many calls in flight: the run is past (or at the end of) its requests


def default_spare(parallel: int) -> int:
    """Extra worker processes for runs past their requests (`WSE_SPARE_RUNS`, else half of `parallel`)."""
    value = os.environ.get("WSE_SPARE_RUNS", "").strip()
    return max(0, int(value)) if value.isdigit() else max(1, parallel // 2)


def still_sending(running: Sequence[int], states: dict[int, tuple[int, int, int]], now_ms: int,
                  quiet_s: float | None = None) -> set[int]:
    """The running runs (planned indices) that count as sending requests (see the module doc): all but
    those whose worker (`states[i]` = (run started at, last answer from a model (ms), calls in flight))
    had an answer from a model since the run started, none for `quiet_s`, and has at most
    `FEW_IN_FLIGHT` calls in flight (the slowest conversations of a cell, or none)."""
    quiet_s = QUIET_S if quiet_s is None else quiet_s
    out = set()
    for i in running:
        started, last, in_flight = states.get(i, (0, 0, 0))
        if last <= started or now_ms - last < quiet_s * 1000 or in_flight > FEW_IN_FLIGHT:
            out.add(i)
    return out


def default_parallel(settings: Settings) -> int:
    """Concurrent runs when `--parallel` is not given: 1 while any configured model runs in this
    process (embedded llama.cpp, offline vLLM: they take the machine's cores / GPU one cell at a
    time), else the run queue's own limit (`max_concurrent_runs` in dagster.yaml)."""
    if any(m.backend not in SERVER_BACKENDS for m in settings.models.values()):
        return 1
    return max(4, sum(settings.concurrency.values()))


def step_backend(settings: Settings, partition_key: str | None) -> str:
    """The backend of a cell's model (`arch|model` partitions), else "none" (no per-backend limit)."""
    for part in str(partition_key or "").split("|"):
        if part in settings.models:
            return settings.models[part].backend
    return "none"


def largest_first(settings: Settings, steps: Sequence) -> list[int]:
    """Step indices, the cells with the most planned requests (`plan.cell_requests`) first (stable otherwise):
    the long cells start first and the short ones fill the end, instead of the heaviest architectures
    starting last together and leaving a long tail with few conversations in flight."""
    try:
        from wse_platform.plan import cell_requests
        size = {cell: n for (_, cell), n in cell_requests(settings).items()}
    except Exception:  # noqa: BLE001 - only an ordering hint
        size = {}
    return sorted(range(len(steps)), key=lambda i: -size.get(steps[i].partition_key, 0))


def step_dependencies(defs, steps: Sequence) -> list[set[int]]:
    """For each run, the earlier runs it must wait for: those writing a parent asset (looking
    through external tables such as `llm_calls`), except other partitions of the same partitioning."""
    from wse_platform.runner import _parents

    graph = defs.resolve_asset_graph()
    owners: dict = {}
    for i, st in enumerate(steps):
        for k in st.keys:
            owners.setdefault(k, []).append(i)
    out: list[set[int]] = []
    for i, st in enumerate(steps):
        deps: set[int] = set()
        for k in st.keys:
            pdef = graph.get(k).partitions_def
            for p in _parents(graph, k):
                for j in owners.get(p, ()):
                    other = steps[j]
                    if j >= i:
                        continue
                    if (pdef is not None and graph.get(p).partitions_def == pdef and other.partition_key is not None
                            and st.partition_key is not None and other.partition_key != st.partition_key):
                        continue  # another cell: independent
                    deps.add(j)
        out.append(deps)
    return out


def execute_parallel(defs, steps: Sequence, instance, settings: Settings, parallel: int, loader: tuple,
                     tags: dict[str, str] | None = None, echo=print, guard=None, progress_args: tuple | None = None,
                     spare: int | None = None):
    """Run the planned steps in worker processes, each step as soon as its dependencies are done, at most
    `parallel` still sending requests and `spare` more past their requests (see the module doc).
    `loader` = ("module:function", args) rebuilds `defs` in a worker.
    The command's `guard` (run_guard) as in `runner.execute`: no run starts after an infrastructure
    failure or once another process recorded a new config version, and a run reading an asset that
    failed is skipped."""
    from wse_platform.run_guard import RunGuard
    from wse_platform.runner import RunReport, StopOnSignal

    guard = guard or RunGuard(defs)

    deps = step_dependencies(defs, steps)
    limits = {b: max(1, int(n)) for b, n in settings.concurrency.items()}
    backends = [step_backend(settings, s.partition_key) for s in steps]
    report = RunReport()
    pending = largest_first(settings, steps)
    finished: set[int] = set()
    running: dict[Future, int] = {}
    parallel = max(1, parallel)
    spare = default_spare(parallel) if spare is None else max(0, spare)
    shared = _shared_of(progress_args)
    if shared is None:
        spare = 0   # no way to tell a run past its requests: `parallel` runs at once, as before
    cap = min(parallel + spare, len(steps))
    pool = _EARLY.pop() if _EARLY else Workers(loader, cap, progress_args)
    if pool.loader != loader or (pool.progress_args or (None,))[0] is not (progress_args or (None,))[0]:
        # made for another command (or another progress array): start anew
        pool.shutdown()
        pool = Workers(loader, cap, progress_args)
    workers = min(cap, pool.limit)
    with StopOnSignal() as stop, pool:
        while pending or running:
            if not stop.signal_name and not guard.stopped and (moved := guard.config_recorded_elsewhere()):
                guard.stopped = moved
            if not stop.signal_name and not guard.stopped:
                sending = (still_sending(list(running.values()), shared.run_states(), _now_ms())
                           if shared is not None else set(running.values()))
                in_use: dict[str, int] = {}
                for j in sending:
                    in_use[backends[j]] = in_use.get(backends[j], 0) + 1
                for i in list(pending):
                    if len(sending) >= parallel or len(running) >= workers:
                        break
                    b = backends[i]
                    if not deps[i] <= finished or in_use.get(b, 0) >= limits.get(b, 1 << 30):
                        continue
                    pending.remove(i)
                    if skip := guard.skip_reason(steps[i]):
                        echo(f"[{i + 1}/{len(steps)}] skipped {steps[i].label()}: {skip}")
                        guard.mark_failed(steps[i])
                        finished.add(i)
                        report.steps.append((steps[i], False, 0.0))
                        continue
                    in_use[b] = in_use.get(b, 0) + 1
                    sending.add(i)
                    echo(f"[{i + 1}/{len(steps)}] materializing {steps[i].label()}")
                    keys = [k.to_user_string() for k in steps[i].keys]
                    running[pool.submit(len(running), _run_step, keys, steps[i].partition_key,
                                        {**(tags or {}), **steps[i].tags, "wse/backend": b}, i)] = i
                if pending:   # the next worker process ahead of need, one at a time (see the module doc)
                    pool.warm(len(running), workers)
            if not running:
                break
            done, _ = wait(list(running), timeout=0.25 if shared is not None and pending else 0.5,
                           return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                finished.add(i)
                try:
                    ok, why, dt, infrastructure = fut.result()
                except Exception as err:  # the worker died (killed, out of memory)
                    ok, why, dt, infrastructure = False, f"worker process failed: {type(err).__name__}: {err}", 0.0, None
                report.steps.append((steps[i], ok, dt))
                guard.after_outcome(steps[i], ok, infrastructure)
                if not ok:
                    report.first_failure = report.first_failure or why
                echo(f"    [{i + 1}/{len(steps)}] ok ({dt:.1f}s)" if ok
                     else f"    [{i + 1}/{len(steps)}] FAILED after {dt:.1f}s: {why}")
            if note := guard.config_note():
                echo(f"note: {note}")
        report.interrupted_by = stop.signal_name
    if not report.interrupted_by and guard.stopped:
        report.stopped_by = guard.stopped
        if len(steps) > len(report.steps):
            echo(f"stopped: none of the {len(steps) - len(report.steps)} remaining runs was started; fix the "
                 "cause below and rerun (`wse materialize --stale` runs what is missing)")
    if report.interrupted_by:
        echo(f"interrupted by {report.interrupted_by}: {len(report.steps)} of {len(steps)} runs finished "
             f"(runs under way were interrupted and recorded as failed); {len(steps) - len(report.steps)} "
             "not started")
    return report


class Workers:
    """The worker processes of one command (a spawn-context process pool), started one at a time ahead
    of need: `warm` starts the next one (its initializer loads the definitions) when none is idle
    and none is starting. `prestart` makes one before the command has planned (see `prestart`)."""

    def __init__(self, loader: tuple, limit: int, progress_args: tuple | None = None):
        import multiprocessing

        self.loader, self.limit, self.progress_args = loader, max(1, limit), progress_args
        ctx = multiprocessing.get_context("spawn")  # a clean interpreter: no threads or locks inherited
        self.pool = ProcessPoolExecutor(max_workers=self.limit, mp_context=ctx, initializer=_init_worker,
                                        initargs=(loader, progress_args))
        self.spawned = 0               # processes the pool started (it starts one when a task finds none idle)
        self.warming: Future | None = None

    def _idle(self, busy: int) -> int:
        return self.spawned - busy - (self.warming is not None and not self.warming.done())

    def submit(self, busy: int, fn, *args) -> Future:
        """`fn(*args)` in a worker; `busy` = tasks of ours under way besides `_warm`."""
        if self._idle(busy) <= 0 and self.spawned < self.limit:
            self.spawned += 1
        return self.pool.submit(fn, *args)

    def warm(self, busy: int, upto: int) -> None:
        if self.spawned < min(upto, self.limit) and (self.warming is None or self.warming.done()) \
                and self._idle(busy) <= 0:
            self.warming = self.submit(busy, _warm)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


_EARLY: list[Workers] = []


def prestart(settings: Settings, parallel: int | None, loader: tuple, spare: int | None = None):
    """At the start of `wse materialize`: the first worker process, loading the definitions while this
    process builds its own, observes the sources and plans (instead of after). Returns the
    `progress.Shared` its workers publish to (for `progress.CommandProgress`), or None (no workers)."""
    from wse_platform.progress import Shared

    parallel = parallel or default_parallel(settings)
    if parallel <= 1:
        return None
    release()
    spare = default_spare(parallel) if spare is None else spare
    try:
        shared = Shared(parallel + spare)
    except OSError:
        return None
    pool = Workers(loader, parallel + spare, shared.worker_args())
    pool.warm(0, 1)
    _EARLY.append(pool)
    return shared


def release() -> None:
    """Stop worker processes `prestart` made that no `execute_parallel` used (nothing to do, an error)."""
    while _EARLY:
        _EARLY.pop().shutdown()


_WORKER: dict = {}


def _shared_of(progress_args: tuple | None):
    """The command's `progress.Shared` view of the workers' slots, from their `worker_args()`."""
    if not progress_args or len(progress_args) < 4:
        return None
    from wse_platform.progress import Shared
    return Shared.view(*progress_args)


def _now_ms() -> int:
    from wse_platform.progress import now_ms
    return now_ms()


def _warm() -> None:
    """Nothing: submitted to start a worker process (its initializer loads the definitions) ahead of need."""


def _init_worker(loader: tuple, progress_args: tuple | None = None) -> None:
    """Once per worker process: the definitions and the Dagster instance (the instance at $DAGSTER_HOME)."""
    import importlib
    import os

    from dagster import DagsterInstance

    from wse_platform.progress import join_shared
    join_shared(progress_args)  # this worker's request counts, summed by the command (progress.Shared)

    target, args = loader
    module, func = target.split(":")
    _WORKER["defs"] = getattr(importlib.import_module(module), func)(*args)
    from wse_platform.instance_sqlite import install
    install(os.environ["DAGSTER_HOME"])  # cheaper SQLite commits (instance_sqlite.py)
    _WORKER["instance"] = DagsterInstance.get()
    import atexit
    atexit.register(_exit_now)   # runs first at exit (handlers run last-registered first)


def _exit_now() -> None:
    """A worker's exit without the interpreter's teardown of Dagster & co. (~3 s of CPU per process on
    2 cores, paid by the command's end): everything a run writes is committed when the run ends,
    and the platform is built to survive a kill -9 of any process (journal, claims, run records)."""
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing to keep
            pass
    os._exit(0)


def _run_step(keys: list[str], partition_key: str | None, tags: dict[str, str],
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
