"""Progress of `wse materialize` against `wse plan`: requests done / planned, throughput, ETA.

Counting. The LLM client's one call path counts each request once when it is finished (answered,
or failed after its attempts) with `TALLY.add(from_cache, failed)`: a lock and three integers, no
other per-call work. `TALLY` counts for this process.

Totals. `wse materialize` asks `plan.step_requests` once for the planned requests of every
(asset, partition) it will run and gives each run a tag `wse/planned_requests`
("asset=n,asset=n"). The plan's counts are upper bounds (every trajectory and episode runs to its
horizon / t_max, a double check every NCP turn), so totals read "≤ N" and the ETA is "≤" too;
re-audit requests answered by the cache are part of the total. A run without the tag (launched
from the UI) plans its own step (`planned_in_step`, on the reporter's thread). An asset the plan
does not count (the 100-Endings rubric, the NCP auditor ablation) shows done counts and throughput
without a total; the command names such assets once.

Lines. A reporter thread looks every second and writes a line when 10 s passed or 5 % of the
total was done since the last line (at most one line per 2 s), and a last line at the end:
- inside a run's LLM step (`resources/llm.py`): `context.log`, so the run log in the UI shows it;
- in the terminal of `wse materialize`: one overall line for the whole command. With
  `--parallel N` the runs execute in N worker processes; each worker publishes its `TALLY` in its
  own slot of a small shared-memory array (`Shared`: one writer per slot, no lock across
  processes) that the command sums. Each slot also holds the time of that process's last answer
  from a model (`last_live_ms`, CLOCK_MONOTONIC, the same clock in every process), its calls in
  flight to a model (the client's `TALLY.sending` around each backend call), the most it had in
  flight since its current run started (`peak_in_flight`) and which planned run the process executes
  since when (`Shared.runs`), so `parallel_runs` can tell a run that is past its requests (its last
  conversations' answers, judging replays from the cache, aggregates, checks) from one still sending.

Throughput counts requests answered by a model (not the cache); the ETA divides what remains by it
(by the rate of all requests until a model answered one).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

EVERY_S = 10.0          # a line at least this often while requests finish
EVERY_FRACTION = 0.05   # ... or when this share of the total was done since the last line
MIN_GAP_S = 2.0         # ... but never two lines closer than this
POLL_S = 1.0
TAG = "wse/planned_requests"
FIELDS = 6              # per shared slot: done, cached, failed, last_live_ms, in_flight, peak_in_flight


def now_ms() -> int:
    """CLOCK_MONOTONIC in ms: comparable across the processes of one machine."""
    return time.monotonic_ns() // 1_000_000


class Counts(NamedTuple):
    done: int = 0
    cached: int = 0
    failed: int = 0

    def __sub__(self, other: "Counts") -> "Counts":  # type: ignore[override]
        return Counts(self.done - other.done, self.cached - other.cached, self.failed - other.failed)


class Tally:
    """Finished requests of this process (see the module doc); optionally mirrored into a shared slot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.done = self.cached = self.failed = 0
        self.last_live_ms = 0               # when a model (not the cache) last answered (`now_ms`)
        self.in_flight = 0                  # calls sent to a model and not answered yet
        self.peak_in_flight = 0             # the most in flight since `new_run` (the process's current run)
        self._slot: tuple | None = None     # (shared array, first index)
        self.slot: int | None = None        # the shared slot published to

    def add(self, cached: bool, failed: bool) -> None:
        with self._lock:
            self.done += 1
            self.cached += cached
            self.failed += failed
            if not cached:
                self.last_live_ms = now_ms()
            if self._slot is not None:
                arr, i = self._slot
                arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = self.done, self.cached, self.failed, self.last_live_ms
                arr[i + 4] = self.in_flight

    def sending(self, n: int) -> None:
        """`n` calls more (less, when negative) in flight to a model in this process."""
        with self._lock:
            self.in_flight += n
            if self.in_flight > self.peak_in_flight:
                self.peak_in_flight = self.in_flight
            if self._slot is not None:
                arr, i = self._slot
                arr[i + 4], arr[i + 5] = self.in_flight, self.peak_in_flight

    def new_run(self) -> None:
        """A new run starts in this process: its peak in flight counts from now."""
        with self._lock:
            self.peak_in_flight = self.in_flight
            if self._slot is not None:
                arr, i = self._slot
                arr[i + 5] = self.peak_in_flight

    def counts(self) -> Counts:
        return Counts(self.done, self.cached, self.failed)

    def publish(self, arr, slot: int | None) -> None:
        """Mirror the counts into `arr[FIELDS*slot:FIELDS*(slot+1)]` from now on (None: stop)."""
        with self._lock:
            self._slot = None if slot is None else (arr, FIELDS * slot)
            self.slot = slot
            if self._slot is not None:
                i = FIELDS * slot
                arr[i], arr[i + 1], arr[i + 2], arr[i + 3] = self.done, self.cached, self.failed, self.last_live_ms
                arr[i + 4], arr[i + 5] = self.in_flight, self.peak_in_flight


TALLY = Tally()


class Shared:
    """Counts of several processes: slot 0 is the command's own process, workers take the next free slot."""

    def __init__(self, workers: int, ctx=None):
        import multiprocessing
        ctx = ctx or multiprocessing.get_context("spawn")
        self.slots = workers + 1
        self.arr = ctx.RawArray("q", FIELDS * self.slots)
        self.runs = ctx.RawArray("q", 2 * self.slots)   # per slot: planned run index + 1 (0: none), started at (ms)
        self.next_slot = ctx.Value("i", 1)

    @classmethod
    def view(cls, arr, next_slot, slots: int, runs) -> "Shared":
        """The same shared arrays as the `Shared` whose `worker_args()` these are."""
        out = cls.__new__(cls)
        out.arr, out.next_slot, out.slots, out.runs = arr, next_slot, slots, runs
        return out

    def counts(self) -> Counts:
        a = self.arr[:]
        return Counts(sum(a[0::FIELDS]), sum(a[1::FIELDS]), sum(a[2::FIELDS]))

    def worker_args(self) -> tuple:
        return self.arr, self.next_slot, self.slots, self.runs

    def run_states(self) -> dict[int, tuple[int, int, int, int]]:
        """Planned run index -> (started at, last answer from a model in that process (ms, `now_ms`),
        calls in flight to a model there, the most in flight there since the run started)."""
        a, r = self.arr[:], self.runs[:]
        return {r[2 * s] - 1: (r[2 * s + 1], a[FIELDS * s + 3], a[FIELDS * s + 4], a[FIELDS * s + 5])
                for s in range(self.slots) if r[2 * s] > 0}


_RUNS: list = []   # in a worker: the shared `Shared.runs` array (see `running`)


def running(index: int | None) -> None:
    """In a worker process: note that it now executes planned run `index` (None: none)."""
    if not _RUNS or TALLY.slot is None:
        return
    runs, i = _RUNS[0], 2 * TALLY.slot
    TALLY.new_run()
    runs[i + 1] = now_ms()
    runs[i] = 0 if index is None else index + 1


def join_shared(args: tuple | None) -> None:
    """In a worker process: publish this process's counts in a free slot of the command's array."""
    if args is None:
        return
    arr, next_slot, slots, runs = args
    with next_slot.get_lock():
        slot = next_slot.value
        next_slot.value += 1
    if slot < slots:
        TALLY.publish(arr, slot)
        _RUNS[:] = [runs]


# ---- planned totals ------------------------------------------------------------------------------

def encode_tag(per_asset: dict[str, int]) -> str:
    return ",".join(f"{a}={n}" for a, n in sorted(per_asset.items()))


def decode_tag(value: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (value or "").split(","):
        name, _, n = part.partition("=")
        if name and n.strip().isdigit():
            out[name.strip()] = int(n)
    return out


def step_totals(settings, steps) -> list[dict[str, int]]:
    """For each planned run (`runner.RunPlanStep`): asset → planned requests of its LLM assets (the command's
    plan, `parallel_runs.command_plan`: built once per command)."""
    from wse_platform import plan
    from wse_platform.parallel_runs import command_plan
    by_step = plan.step_requests(command_plan(settings))
    out = []
    for st in steps:
        names = {k.to_user_string() for k in st.keys}
        out.append({a: n for (a, pk), n in by_step.items() if a in names and pk == (st.partition_key or "")})
    return out


def unplanned(defs, steps, totals: list[dict[str, int]]) -> list[str]:
    """LLM assets (kind `llm`) among the planned runs that `wse plan` does not count."""
    ops = [{k.to_user_string() for k in a.keys} for a in (getattr(defs, "assets", None) or [])
           if any("llm" in (getattr(sp, "kinds", None) or ()) for sp in (getattr(a, "specs", None) or ()))]
    out: set[str] = set()
    for st, per_asset in zip(steps, totals):
        names = {k.to_user_string() for k in st.keys}
        for op in ops:
            if op & names and not op & set(per_asset):
                out |= op & names
    return sorted(out)


def planned_in_step(settings, asset_names, partition_key: str | None, seed_rows: list[tuple[str, str]]) -> int | None:
    """The planned requests of one step, computed inside a run that has no `TAG` (launched from the UI);
    `seed_rows` = the warehouse's WSE seeds (their NPC counts), read by the caller."""
    from wse_platform import plan
    key = (id(settings), hash(tuple(seed_rows)))
    kept = _PLANNED.get(key)
    if kept is None or kept[0] is not settings:      # once per config and seeds in a process
        if len(_PLANNED) > 8:
            _PLANNED.clear()
        kept = _PLANNED[key] = (settings, plan.step_requests(plan.build(settings, (plan.Observed(), seed_rows))))
    return total_of({a: n for (a, pk), n in kept[1].items() if pk == (partition_key or "")}, asset_names)


_PLANNED: dict[tuple[int, int], tuple[object, dict[tuple[str, str], int]]] = {}


def total_of(per_asset: dict[str, int], asset_names) -> int | None:
    """Planned requests of a step writing `asset_names` (None: the plan does not count them)."""
    found = [per_asset[a] for a in asset_names if a in per_asset]
    return sum(found) if found else None


# ---- lines -------------------------------------------------------------------------------------

def duration(s: float) -> str:
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_seconds(c: Counts, total: int | None, elapsed: float) -> float | None:
    """Seconds left at the current pace: the rest of `total` over the rate of model-answered requests
    (of all requests while none was answered by a model). None when unknown."""
    if total is None or c.done > total or elapsed <= 0:
        return None
    left = total - c.done
    if left == 0:
        return 0.0
    live = c.done - c.cached
    rate = (live if live > 0 else c.done) / elapsed
    return left / rate if rate > 0 else None


def line(label: str, c: Counts, total: int | None, elapsed: float, final: str | None = None) -> str:
    """One progress line (see the module doc for what each figure means)."""
    live_rate = (c.done - c.cached) / elapsed if elapsed > 0 else 0.0
    detail = f"{c.cached:,} from cache, {c.failed:,} failed"
    if total is None:
        head = f"{c.done:,} requests ({detail}; no planned total)"
    elif c.done > total:
        head = f"{c.done:,} requests ({detail}; more than the {total:,} planned)"
    else:
        pct = 100.0 * c.done / total if total else 100.0
        head = f"{c.done:,}/≤{total:,} requests ({pct:.0f} %; {detail})"
    text = f"{label}: {head}, {live_rate:.1f} req/s, elapsed {duration(elapsed)}"
    if final:
        return f"{text}, {final}"
    eta = eta_seconds(c, total, elapsed)
    return text + (f", ETA ≤ {duration(eta)}" if eta is not None else "")


class Reporter:
    """Writes `line(...)` through `emit` while `read()` counts grow (see the module doc for when)."""

    def __init__(self, label: str, read: Callable[[], Counts], total: int | None, emit: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic, total_fn: Callable[[], int | None] | None = None):
        self.label, self.read, self.total, self.emit, self.clock = label, read, total, emit, clock
        self._total_fn = total_fn   # computes `total` on the reporter's thread (not delaying the step)
        self.base = read()
        self.t0 = self._last_t = clock()
        self._last_done = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def counts(self) -> Counts:
        return self.read() - self.base

    def due(self, now: float, done: int) -> bool:
        if done <= self._last_done or now - self._last_t < MIN_GAP_S:
            return False
        step = EVERY_FRACTION * self.total if self.total else float("inf")
        return now - self._last_t >= EVERY_S or done - self._last_done >= step

    def poll(self) -> None:
        now, c = self.clock(), self.counts()
        if self.due(now, c.done):
            self.emit(line(self.label, c, self.total, now - self.t0))
            self._last_t, self._last_done = now, c.done

    def start(self) -> "Reporter":
        def run() -> None:
            if self._total_fn is not None:
                try:
                    self.total = self._total_fn()
                except Exception:  # noqa: BLE001 - lines without a total then
                    pass
            while not self._stop.wait(POLL_S):
                try:
                    self.poll()
                except Exception:  # noqa: BLE001 - a progress line never stops a run
                    pass
        self._thread = threading.Thread(target=run, name="wse-progress", daemon=True)
        self._thread.start()
        return self

    def finish(self, outcome: str = "done") -> None:
        """Stop the thread and write the last line (when anything was planned or done)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        c = self.counts()
        if c.done or self.total:
            self.emit(line(self.label, c, self.total, self.clock() - self.t0, final=outcome))


class CommandProgress:
    """The overall line of one `wse materialize`: tags each planned run with its planned requests
    (`TAG`) and counts the requests of this process and of its `--parallel` workers (`Shared`)."""

    def __init__(self, settings, steps, workers: int, defs=None, emit: Callable[[str], None] = print,
                 shared: "Shared | None" = None):
        try:
            totals = step_totals(settings, steps)
        except Exception as err:  # noqa: BLE001 - without a plan the lines still count
            totals = [{} for _ in steps]
            emit(f"note: progress lines without planned totals: the plan failed ({type(err).__name__}: {err})")
        if totals and any(totals) and (left_out := unplanned(defs, steps, totals)):
            emit(f"note: the progress total leaves out {', '.join(left_out)} (`wse plan` does not count them)")
        for st, per_asset in zip(steps, totals):
            st.tags[TAG] = encode_tag(per_asset)     # empty: nothing planned (the run does not plan again)
        planned = [n for per_asset in totals for n in per_asset.values()]
        try:
            self.shared: Shared | None = shared or Shared(max(1, workers))   # given: made before the plan
            TALLY.publish(self.shared.arr, 0)
        except OSError as err:  # no shared memory here: this process's own counts only
            self.shared = None
            emit(f"note: progress lines count this process only (no shared memory for workers: {err})")
        self.reporter = Reporter("progress", self.shared.counts if self.shared else TALLY.counts,
                                 sum(planned) if planned else None, emit).start()

    def worker_args(self) -> tuple | None:
        return self.shared.worker_args() if self.shared else None

    def finish(self, outcome: str = "done") -> None:
        try:
            self.reporter.finish(outcome)
        finally:
            TALLY.publish(None, None)
