"""Many cells at once from `wse materialize`: the planned runs execute concurrently, in worker processes.

Design (issue 24 item 2). `runner.plan` gives one run per (asset group, partition); here each
run starts as soon as the runs it depends on have finished (a cell's judging waits for that
cell's generation only; a table over all cells waits for every cell), up to `parallel` runs
at once, and at most `settings.concurrency[backend]` runs per backend of the cell's model —
the same limits the run queue applies to UI-launched runs through the `wse/backend` tag
(`dagster.yaml`, written by `runner.ensure_dagster_home`). Each run executes in one of
`parallel` worker processes (`wse_platform.workers`: forked from a template that loaded the
definitions once, each running one run at a time with `execute_in_process`, as the sequential path does): Dagster's
in-process execution is not thread-safe (two runs starting in threads of one process
deadlock in its logging set-up). The in-flight limit per endpoint across these processes is
the LLM client's (`wse_platform.llm`). Each run is recorded in the instance as before (UI,
staleness, `wse status` see them). The request flow inside a cell is `wse_platform.flow`.

Runs past their requests (issue 24 item 1). A cell run spends seconds after its last request
(judging replays of cached answers, aggregates, checks) in which its worker sends nothing, and
cells started together finish together, the slowest conversation of a cell last. So `parallel`
bounds the runs still *sending*, not the runs: a run counts as past its requests once its worker
had an answer from a model since the run started and either
- its calls in flight fell to a small share of the most it had in flight (at most
  max(`FEW_IN_FLIGHT`, `LOW_SHARE` × its peak), a peak of at least `PEAK_MIN`) and stayed there for
  `LOW_HOLD_S`: its last conversations are out, their answers still arriving; or
- it had no answer for `QUIET_S` and has at most `FEW_IN_FLIGHT` calls in flight (a run that never
  had many in flight);
(the worker's `progress.Tally` publishes when its last answer from a model came, its calls in flight,
the most it had in flight since the run started and which run it executes: `progress.Shared`); the
next planned run then starts in one of `spare` extra worker processes while the other finishes.
The first rule is what keeps the fleet busy between waves of cells: cells started together end
together, and under the second rule alone the next cells started only ~1.5 s after the last answer
of the previous ones (and then needed 1-2 s to their first requests), so a 256-slot fleet idled
between waves (WSE h3 at 256 slots: 8 cells, then 4). A run that counted as past and sends many
again (a later phase) counts as sending again; the runs started meanwhile keep running. A run that
never had an answer from a model (fully cached, a table) counts as sending until it ends. The per-backend
run limit counts sending runs too; the per-endpoint in-flight limit is the client's and holds
for every process whatever the number of runs. Worker processes (`wse_platform.workers`) are forks of
a template process that loaded the definitions when the command started; they are started ahead of
need up to `parallel + spare`. The runs nothing waits for (the part of a source run the cells do not
read, the final tables) start once the running cells have had their first answers (`held_back`, 5 s at
most): a cell's start up to its first requests then has the cores to itself. Rows do not
depend on this timing (each cell's rows depend only on its own seeds and the cache).

Signals: Ctrl-C reaches the workers too (one process group): Dagster interrupts their runs
and records them failed; the first SIGINT/SIGTERM also starts no further run; a worker killed
with -9 leaves a run the next `wse` command marks failed (`runner.fail_orphaned_runs`).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait

from wse_platform.config import Settings
from wse_platform.workers import Workers, run_step, start_template

SERVER_BACKENDS = ("litellm",)  # backends whose cells gain from running side by side
QUIET_S = float(os.environ.get("WSE_RUN_QUIET_S", "1.5"))  # no answer from a model for this long ...
FEW_IN_FLIGHT = 2   # ... and at most this many calls in flight: the run is past (or at the end of) its requests
LOW_SHARE = float(os.environ.get("WSE_RUN_LOW_SHARE", "0.15"))   # or at most this share of its peak in flight ...
LOW_HOLD_S = float(os.environ.get("WSE_RUN_LOW_HOLD_S", "0.3"))  # ... for this long (the run's stragglers)
PEAK_MIN = 4 * FEW_IN_FLIGHT   # ... when it had at least this many in flight (else a share means nothing)


def default_spare(parallel: int) -> int:
    """Extra worker processes for runs past their requests (`WSE_SPARE_RUNS`, else half of `parallel`)."""
    value = os.environ.get("WSE_SPARE_RUNS", "").strip()
    return max(0, int(value)) if value.isdigit() else max(1, parallel // 2)


def still_sending(running: Sequence[int], states: dict[int, tuple[int, ...]], now_ms: int,
                  quiet_s: float | None = None, low_since: dict[int, int] | None = None) -> set[int]:
    """The running runs (planned indices) that count as sending requests (see the module doc): all but
    those whose worker (`states[i]` = (run started at, last answer from a model (ms), calls in flight,
    the most in flight since the run started)) had an answer from a model since the run started and
    either has been at most `low_in_flight(peak)` in flight for `LOW_HOLD_S` (its last conversations)
    or had none for `quiet_s` with at most `FEW_IN_FLIGHT` calls in flight (the slowest conversations
    of a cell, or none). `low_since` (kept by the caller from one call to the next): run -> when it
    was first seen that low; updated here."""
    quiet_s = QUIET_S if quiet_s is None else quiet_s
    low_since = {} if low_since is None else low_since
    out = set()
    for i in running:
        started, last, in_flight, peak = states.get(i, (0, 0, 0, 0))
        answered = last > started
        if answered and peak >= PEAK_MIN and in_flight <= low_in_flight(peak):
            since = low_since.setdefault(i, now_ms)
            if now_ms - since >= LOW_HOLD_S * 1000:
                continue   # its stragglers: past its requests
        else:
            low_since.pop(i, None)
        if not answered or now_ms - last < quiet_s * 1000 or in_flight > FEW_IN_FLIGHT:
            out.add(i)
    for i in list(low_since):
        if i not in running:
            del low_since[i]
    return out


def low_in_flight(peak: int) -> int:
    """Calls in flight at which a run that had `peak` in flight is down to its stragglers."""
    return max(FEW_IN_FLIGHT, int(LOW_SHARE * peak))


# cells at once: their conversations fill the endpoints' slots this many times over. A cell's width
# (requests ÷ longest chain) is what it could keep in flight at best: a WSE seed's generation sends one
# request at a time, its judging several; measured, 4 WSE cells of width ~105 filled 64 slots at 92 %
# of the span and 256 slots at 30 % (bench/fleet.py): hence 3, not 1.
FILL = 3.0
MIN_PARALLEL = 4


def default_parallel(settings: Settings) -> int:
    """Concurrent runs when `--parallel` is not given: 1 while any configured model runs in this
    process (embedded llama.cpp, offline vLLM: they take the machine's cores / GPU one cell at a
    time), else enough cells that their conversations fill the endpoints' slots `FILL` times over
    (`fill_parallel`), at least `MIN_PARALLEL`, at most the run queue's own limit
    (`max_concurrent_runs` in dagster.yaml: the sum of `concurrency`)."""
    if in_process_models(settings):
        return 1
    ceiling = max(MIN_PARALLEL, sum(settings.concurrency.values()))
    return min(ceiling, max(MIN_PARALLEL, fill_parallel(settings)))


def in_process_models(settings: Settings) -> bool:
    """Whether a configured model runs in this process (embedded llama.cpp, offline vLLM): then one run at a time."""
    return any(m.backend not in SERVER_BACKENDS for m in settings.models.values())


def fill_parallel(settings: Settings, cells=None) -> int:
    """The fewest cells, largest first, whose conversations (a cell's planned requests ÷ its longest chain
    of requests: what it can keep in flight) add up to `FILL` × the slots of the endpoints their models
    use (an endpoint = an `api_base` with its `endpoint_concurrency`; a model without one: its own
    slots). 0 when nothing is planned."""
    from wse_platform import plan

    cells = [c for c in (_plan_cells(settings) if cells is None else cells) if c.requests > 0]
    endpoints: dict[str, int] = {}
    for c in cells:
        for load in c.loads:
            m = settings.models.get(load.model)
            if m is None or load.cached:
                continue
            bases = m.api_bases if m.endpoint_concurrency else []
            for base in bases:
                endpoints[base] = max(endpoints.get(base, 0), int(m.endpoint_concurrency))
            if not bases:
                endpoints[f"model:{load.model}"] = plan.slots(settings, load.model)
    need, have = FILL * sum(endpoints.values()), 0.0
    for n, c in enumerate(sorted(cells, key=lambda c: -c.requests), start=1):
        have += c.requests / max(1, c.chain)
        if have >= need:
            return n
    return len(cells)


_PLANS: list = []   # [(settings, plan)]: the command's plan (held: the settings' id stays its own); `release` drops it


def command_plan(settings: Settings):
    """`plan.build(settings)`, once per command (`release` ends it): the default `--parallel`, the order of the
    runs and the progress totals read the same plan (nothing writes the warehouse before the source run)."""
    if not _PLANS or _PLANS[0][0] is not settings:
        from wse_platform.plan import build
        _PLANS[:] = [(settings, build(settings))]
    return _PLANS[0][1]


def _plan_cells(settings: Settings) -> list:
    return command_plan(settings).cells


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
        size = {c.cell: c.requests for c in _plan_cells(settings)}
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


HOLD_MAX_S = float(os.environ.get("WSE_HOLD_MAX_S", "5"))   # at most this long after a cell started (see `held_back`)


def side_runs(steps: Sequence, deps: list[set[int]]) -> set[int]:
    """The unpartitioned runs no other run waits for: the part of a source run the cells do not read
    (`run_split.defer_unneeded`) and the final tables."""
    needed = set().union(*deps) if deps else set()
    return {i for i, st in enumerate(steps) if st.partition_key is None and i not in needed}


def held_back(steps: Sequence, running: Sequence[int], states: dict[int, tuple[int, ...]], now_ms: int,
              submitted: dict[int, int], hold_max_s: float | None = None) -> bool:
    """Whether a side run (`side_runs`) waits before it starts: while a running cell run has had no answer
    from a model yet (`states[i]` = (started at, last answer (ms), ...), as `still_sending`)
    and was submitted (`submitted[i]`, ms) less than `hold_max_s` ago. A cell's start (its run, the asset's set-up up to its first
    requests) and a side run's plots compete for the same cores; nothing in the command reads a side run
    until the tables at its end, whose own inputs are the cells, so its rows do not depend on when it
    starts (NCP: `ncp_spec_stats` and `ncp_spec_breakdown`, ~1.5-2 s of CPU, ran beside the cells' start,
    delaying their first requests). A fully cached cell (no answer ever) holds it `hold_max_s` at most."""
    hold_max_s = HOLD_MAX_S if hold_max_s is None else hold_max_s
    for i in running:
        if steps[i].partition_key is None:
            continue
        since = submitted.get(i, now_ms)
        started, last = states.get(i, (since, 0))[:2]
        if last <= max(started, since) and now_ms - since < hold_max_s * 1000:
            return True
    return False


INTERRUPTED = "interrupted (the run is recorded as failed)"


def leading_steps(deps: list[set[int]]) -> list[int]:
    """The runs every other run waits for (directly or through others), in order: nothing can run beside
    them, so `execute_parallel` runs them in the command's own process, which has the definitions
    already, instead of waiting for a worker (whose template may still be loading them)."""
    ancestors: list[set[int]] = []
    for d in deps:
        ancestors.append(set(d).union(*(ancestors[j] for j in d)) if d else set())
    n = len(deps)
    return [i for i in range(n) if all(i in ancestors[j] for j in range(n) if j != i)]


def run_here(defs, step, instance, tags: dict[str, str]) -> tuple[bool, str | None, float, str | None]:
    """One run in this process (as `workers.run_step` in a worker): (ok, first failure, seconds, cause),
    the failure `INTERRUPTED` when Ctrl-C stopped it."""
    from wse_platform.instance_sqlite import install
    from wse_platform.procs import freeze_long_lived
    from wse_platform.run_guard import first_failure, infrastructure_cause
    from wse_platform.runner import _interrupted, run_in_location

    if instance.root_directory:  # cheaper SQLite commits for the run's events (instance_sqlite.py)
        install(instance.root_directory)
    freeze_long_lived()  # once per process (procs.py)
    t0 = time.perf_counter()
    result = run_in_location(defs, step, instance, tags)
    dt = time.perf_counter() - t0
    if _interrupted(result):
        return False, INTERRUPTED, dt, None
    return result.success, None if result.success else first_failure(result), dt, infrastructure_cause(result)


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
    side = side_runs(steps, deps)
    submitted: dict[int, int] = {}   # planned index -> when this command submitted it (ms, `_now_ms`)
    low_since: dict[int, int] = {}   # running index -> since when it has few in flight (`still_sending`)
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

    def record(i: int, outcome: tuple) -> None:
        ok, why, dt, infrastructure = outcome
        finished.add(i)
        report.steps.append((steps[i], ok, dt))
        guard.after_outcome(steps[i], ok, infrastructure)
        if not ok:
            report.first_failure = report.first_failure or why
        echo(f"    [{i + 1}/{len(steps)}] ok ({dt:.1f}s)" if ok
             else f"    [{i + 1}/{len(steps)}] FAILED after {dt:.1f}s: {why}")

    def skipped(i: int) -> bool:
        """The guard's reason not to run step i (an input that failed), said and recorded."""
        if not (skip := guard.skip_reason(steps[i])):
            return False
        echo(f"[{i + 1}/{len(steps)}] skipped {steps[i].label()}: {skip}")
        guard.mark_failed(steps[i])
        finished.add(i)
        report.steps.append((steps[i], False, 0.0))
        return True

    with StopOnSignal() as stop, pool:
        lead = leading_steps(deps)
        if lead:   # the first runs' workers start while the command runs the leading ones
            pool.prefork(min(parallel, workers, len(steps) - len(lead)))
        for i in lead:   # what every other run waits for: here, while the workers' template loads
            if stop.signal_name or guard.stopped:
                break
            pending.remove(i)
            if skipped(i):
                continue
            echo(f"[{i + 1}/{len(steps)}] materializing {steps[i].label()} (in this process)")
            outcome = run_here(defs, steps[i], instance, {**(tags or {}), **steps[i].tags, "wse/backend": backends[i]})
            if outcome[1] == INTERRUPTED and not stop.signal_name:
                stop.signal_name = "an interrupt"
            record(i, outcome)
        while pending or running:
            if not stop.signal_name and not guard.stopped and (moved := guard.config_recorded_elsewhere()):
                guard.stopped = moved
            if not stop.signal_name and not guard.stopped:
                states = shared.run_states() if shared is not None else {}
                sending = (still_sending(list(running.values()), states, _now_ms(), low_since=low_since)
                           if shared is not None else set(running.values()))
                hold = shared is not None and held_back(steps, list(running.values()), states, _now_ms(), submitted)
                in_use: dict[str, int] = {}
                for j in sending:
                    in_use[backends[j]] = in_use.get(backends[j], 0) + 1
                for i in list(pending):
                    if len(sending) >= parallel or len(running) >= workers:
                        break
                    b = backends[i]
                    if not deps[i] <= finished or in_use.get(b, 0) >= limits.get(b, 1 << 30) or (hold and i in side):
                        continue
                    pending.remove(i)
                    if skipped(i):
                        continue
                    in_use[b] = in_use.get(b, 0) + 1
                    sending.add(i)
                    echo(f"[{i + 1}/{len(steps)}] materializing {steps[i].label()}")
                    submitted[i] = _now_ms()
                    hold = hold or (shared is not None and steps[i].partition_key is not None)   # (no answer yet)
                    keys = [k.to_user_string() for k in steps[i].keys]
                    running[pool.submit(len(running), run_step, keys, steps[i].partition_key,
                                        {**(tags or {}), **steps[i].tags, "wse/backend": b}, i)] = i
                if pending:   # the next worker process ahead of need, one at a time (see the module doc)
                    pool.warm(len(running), workers)
            if not running:
                break
            timeout = 0.25 if shared is not None and pending else 0.5
            if pending and low_since:   # a run's hold (`LOW_HOLD_S`) ends before the next look: look then
                now, hold_ms = _now_ms(), LOW_HOLD_S * 1000
                due = [since + hold_ms - now for since in low_since.values() if now - since < hold_ms]
                if due:
                    timeout = min(timeout, max(0.02, (min(due) + 5) / 1000))
            done, _ = wait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                try:
                    outcome = fut.result()
                except Exception as err:  # the worker died (killed, out of memory)
                    outcome = False, f"worker process failed: {type(err).__name__}: {err}", 0.0, None
                record(i, outcome)
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


_EARLY: list[Workers] = []


def prestart(settings: Settings, parallel: int | None, loader: tuple, spare: int | None = None,
             select: list[str] | None = None):
    """At the start of `wse materialize`: the template the worker processes are forked from (`workers`), else
    the first worker process, loading the definitions while this process builds its own, observes the
    sources and plans (instead of after). Returns the
    `progress.Shared` its workers publish to (for `progress.CommandProgress`), or None (no workers)."""
    from wse_platform.progress import Shared

    parallel = parallel or None   # 0: the default, as the CLI reads it
    if (parallel is not None and parallel <= 1) or (parallel is None and in_process_models(settings)):
        return None
    release()
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)   # as `runner.get_instance` sets it, for the template
    forked = start_template(loader, select)   # first: the default `parallel` plans (reads the inputs), the template need not wait
    parallel = parallel or default_parallel(settings)
    spare = default_spare(parallel) if spare is None else spare
    try:
        shared = Shared(parallel + spare)
    except OSError:
        return None
    pool = Workers(loader, parallel + spare, shared.worker_args())
    if not forked:   # (a fork waits for the template: the first one is made when the first run starts)
        pool.warm(0, 1)
    _EARLY.append(pool)
    return shared


def release() -> None:
    """Stop worker processes `prestart` made that no `execute_parallel` used (nothing to do, an error)."""
    while _EARLY:
        _EARLY.pop().shutdown()
    _PLANS.clear()
    from wse_platform.workers import forget_template
    forget_template()


def _shared_of(progress_args: tuple | None):
    """The command's `progress.Shared` view of the workers' slots, from their `worker_args()`."""
    if not progress_args or len(progress_args) < 4:
        return None
    from wse_platform.progress import Shared
    return Shared.view(*progress_args)


def _now_ms() -> int:
    from wse_platform.progress import now_ms
    return now_ms()
