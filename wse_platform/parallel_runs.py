"""Many cells at once from `wse materialize`: the planned runs execute concurrently, in threads.

Design (issue 24 item 2). `runner.plan` gives one run per (asset group, partition); here each
run starts as soon as the runs it depends on have finished (a cell's judging waits for that
cell's generation only; a table over all cells waits for every cell), up to `parallel` runs
at once, and at most `settings.concurrency[backend]` runs per backend of the cell's model —
the same limits the run queue applies to UI-launched runs through the `wse/backend` tag
(`dagster.yaml`, written by `runner.ensure_dagster_home`). Runs are in-process
(`execute_in_process`) in threads of one process, so they share the process's LLM
runtimes and their in-flight limits per endpoint; each run is recorded in the instance as
before (UI, staleness, `wse status` see them). The request flow inside a cell is
`wse_platform.flow`.

Signals: the first SIGINT/SIGTERM starts no further run and lets the running ones finish
(Dagster cannot interrupt a run outside the main thread); a second one exits at once (the
next `wse` command marks those runs failed, see `runner.fail_orphaned_runs`).
"""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from wse_platform.config import Settings

SERVER_BACKENDS = ("litellm",)  # backends whose cells gain from running side by side


def default_parallel(settings: Settings) -> int:
    """Concurrent runs when `--parallel` is not given: 1 while any configured model runs in this
    process (embedded llama.cpp, offline vLLM: they take the machine's cores / GPU one cell at a
    time), else the run queue's own limit (`max_concurrent_runs` in dagster.yaml)."""
    if any(m.backend not in SERVER_BACKENDS for m in settings.models.values()):
        return 1
    return max(4, sum(settings.concurrency.values()))


def step_backend(settings: Settings, partition_key: str | None) -> str:
    """The backend of a cell's model (`model|arch` partitions), else "none" (no per-backend limit)."""
    if not partition_key or "|" not in partition_key:
        return "none"
    model = partition_key.split("|", 1)[0]
    cfg = settings.models.get(model)
    return cfg.backend if cfg is not None else "none"


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


def execute_parallel(defs, steps: Sequence, instance, settings: Settings, parallel: int,
                     tags: dict[str, str] | None = None, echo=print):
    """Run the planned steps, each as soon as its dependencies are done (see the module doc)."""
    from wse_platform.runner import (QUIET_RUN_CONFIG, RunReport, StopOnSignal, _first_error, _remote_origin,
                                     process_tags)

    deps = step_dependencies(defs, steps)
    limits = {b: max(1, int(n)) for b, n in settings.concurrency.items()}
    backends = [step_backend(settings, s.partition_key) for s in steps]
    job = defs.resolve_implicit_global_asset_job_def()
    origin = _remote_origin(job.name)
    run_tags = {**(tags or {}), **process_tags()}
    report = RunReport()
    lock = threading.Lock()

    def run(i: int):
        step = steps[i]
        t0 = time.perf_counter()
        try:
            result = job.execute_in_process(run_config=QUIET_RUN_CONFIG, instance=instance,
                                            partition_key=step.partition_key, raise_on_error=False,
                                            tags={**run_tags, "wse/backend": backends[i]},
                                            asset_selection=list(step.keys))
            ok, why = result.success, (None if result.success else _first_error(result))
        except Exception as err:  # a run that could not even start: reported, the others go on
            ok, why = False, f"{type(err).__name__}: {err}"
        dt = time.perf_counter() - t0
        with lock:
            report.steps.append((step, ok, dt))
        echo(f"    [{i + 1}/{len(steps)}] ok ({dt:.1f}s)" if ok else f"    [{i + 1}/{len(steps)}] FAILED after "
             f"{dt:.1f}s: {why}")
        return ok

    original = instance.create_run_for_job
    if origin is not None:  # once for all threads (see runner.run_in_location)
        instance.create_run_for_job = functools.partial(original, remote_job_origin=origin)  # type: ignore[method-assign]
    pending = list(range(len(steps)))
    finished: set[int] = set()
    running: dict[Future, int] = {}
    in_use: dict[str, int] = {}
    try:
        with StopOnSignal() as stop, ThreadPoolExecutor(max_workers=max(1, parallel),
                                                        thread_name_prefix="wse-run") as pool:
            while pending or running:
                if not stop.signal_name:
                    for i in list(pending):
                        if len(running) >= parallel:
                            break
                        b = backends[i]
                        if not deps[i] <= finished or in_use.get(b, 0) >= limits.get(b, 1 << 30):
                            continue
                        pending.remove(i)
                        in_use[b] = in_use.get(b, 0) + 1
                        echo(f"[{i + 1}/{len(steps)}] materializing {steps[i].label()}")
                        running[pool.submit(run, i)] = i
                elif not running:
                    break
                if not running:
                    if pending:  # cannot happen: steps depend on earlier steps only
                        raise RuntimeError(f"no run can start: {[steps[i].label() for i in pending]}")
                    break
                done, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = running.pop(fut)
                    finished.add(i)
                    in_use[backends[i]] -= 1
            report.interrupted_by = stop.signal_name
    finally:
        if origin is not None:
            del instance.create_run_for_job
    if report.interrupted_by:
        echo(f"interrupted by {report.interrupted_by}: {len(report.steps)} of {len(steps)} runs finished "
             f"(the running ones were let finish); {len(steps) - len(report.steps)} not started")
    return report
