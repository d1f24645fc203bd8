"""CPU per acquired slot of the cross-process endpoint limiter (`wse_platform/llm/limiter.py`), and
the slot utilisation it keeps, when K worker processes share one endpoint of N slots (issue 24
item 4: 8-12 `wse materialize --parallel` workers on a 256-slot server).

Each of K processes runs W asyncio tasks that loop: acquire a slot, hold it for a service time
(lognormal, median 0.4 s, sigma 0.8, as the fleet's stand-in server; or fixed), release. Demand
K x W exceeds N, so every process waits all the time, as in the fleet. Per implementation:

  cpu/slot      CPU seconds of all K processes in the window / slots acquired in it
  cpu cores     CPU seconds / wall seconds of the window (how many cores the K processes burn)
  utilisation   slot-seconds held in the window / N / window (100 % = the limit is always used)
  per process   the fewest and most slots one process acquired in the window (fairness)

The implementations are interleaved in one run (old, new, old, new, ...): `--ref` names a git
revision whose limiter.py is the "old" one (default HEAD), "new" is the working tree's. `none`
(optional, `--floor`) is a per-process asyncio.Semaphore of N/K: the same tasks with no
cross-process limit, the CPU floor of the loop itself.

    PYTHONPATH=. python bench/limiter_cost.py [--procs 10] [--waiters 64] [--slots 256] [--seconds 8]
        [--fixed 0.4] [--ref HEAD] [--rounds 2] [--floor] [--hints 60]

Measured 2026-12-03 11:38 UTC on the shared 2-core machine (load 9-11), `--rounds 3 --floor --ref 0376acc`,
10 processes x 64 waiters, 256 slots, lognormal: median of 3 interleaved rounds
  old  0.795 ms CPU/slot (rounds 0.66-1.04), 0.43 cores, util 92.7 %, per process 313-611 slots
  new  0.248 ms CPU/slot (0.24-0.25),        0.14 cores, util 92.8 %, per process 384-556 slots
  none 0.132 ms CPU/slot,                    0.07 cores, util 91.5 % (the bench's own ceiling at that load)
12 processes x 48 waiters, fixed 0.4 s, 2 rounds: old 0.636, new 0.138, none 0.020 ms CPU/slot; util 97.1 / 96.2 / 95.7 %.
The order among one process's waiters (helper prio2, 2026-12-03 22:44 UTC, load 11-15, `--ref a9ea0cf --rounds 2`,
10 x 64, 256 slots, lognormal): `--hints 60` (new: each task a conversation of 60 requests, old FIFO) old 0.275,
new 0.286 ms CPU/slot (rounds: old 0.237 / 0.313, new 0.260 / 0.312), util 92.4 / 92.9 %; `--hints 0` old 0.280,
new 0.259 ms, util 92.7 / 93.5 %: no difference beyond the rounds' spread.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"limiter_impl_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def child(args: argparse.Namespace) -> None:
    impl, slots_dir, n, k = args.child_impl, Path(args.child_dir), args.slots, args.procs
    if impl == "none":
        sem = asyncio.Semaphore(max(1, n // k))

        class Lim:
            async def acquire(self):
                await sem.acquire()
                return 0

            def release(self, slot):
                sem.release()
        lim = Lim()
    else:
        lim = _load(impl).EndpointLimiter("http://fleet/v1", n, slots_dir)
    rng = random.Random(os.getpid())
    held_s = [0.0]
    acquired = [0]
    holding = [0]
    max_holding = [0]
    stop = [False]

    def service() -> float:
        return args.fixed if args.fixed else rng.lognormvariate(0.0, args.sigma) * args.median

    hinted = args.hints and "priority" in inspect.signature(lim.acquire).parameters

    async def worker(t0: float, t1: float) -> None:
        left = rng.randrange(args.hints + 1) if hinted else 0   # a conversation's requests still expected
        while not stop[0]:
            slot = await (lim.acquire(left) if hinted else lim.acquire())
            left = left - 1 if left > 0 else args.hints
            a = time.time()
            if stop[0] or a >= t1:
                lim.release(slot)
                return
            acquired[0] += 1
            holding[0] += 1
            max_holding[0] = max(max_holding[0], holding[0])
            try:
                await asyncio.sleep(service())
            finally:
                b = time.time()
                holding[0] -= 1
                lim.release(slot)
            held_s[0] += max(0.0, min(b, t1) - max(a, t0))

    async def main() -> dict:
        # all processes start at the same moment (a barrier in the file system), the window after warm-up
        # one window (wall clock) for all processes, whenever each got going
        start = float(args.child_start)
        await asyncio.sleep(max(0.0, start - time.time()))
        t0 = start + args.warmup
        t1 = t0 + args.seconds
        tasks = [asyncio.ensure_future(worker(t0, t1)) for _ in range(args.waiters)]
        await asyncio.sleep(max(0.0, t0 - time.time()))
        c0 = time.process_time()
        await asyncio.sleep(max(0.0, t1 - time.time()))
        c1 = time.process_time()
        stop[0] = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {"cpu": c1 - c0, "acquired": acquired[0], "held_s": held_s[0], "max_holding": max_holding[0],
                "scans": getattr(lim, "scans", 0)}

    print(json.dumps(asyncio.run(main())), flush=True)


def run_once(args: argparse.Namespace, impl: str) -> dict:
    slots = Path(tempfile.mkdtemp(prefix="limiter-cost-"))
    start = time.time() + 1.5 + 0.05 * args.procs   # after every interpreter is up
    cmd = [sys.executable, __file__, "--child-impl", impl, "--child-dir", str(slots), "--child-start", str(start)]
    for k in ("procs", "waiters", "slots", "seconds", "warmup", "median", "sigma", "fixed", "hints"):
        cmd += [f"--{k}", str(getattr(args, k))]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) for _ in range(args.procs)]
    try:
        outs = [json.loads(p.communicate(timeout=args.seconds + args.warmup + 60)[0].strip().splitlines()[-1])
                for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(slots, ignore_errors=True)
    cpu = sum(o["cpu"] for o in outs)
    acq = sum(o["acquired"] for o in outs)
    per_proc = sorted(o["acquired"] for o in outs)
    return {"cpu_s": cpu, "acquired": acq, "cpu_ms_per_slot": 1000 * cpu / max(1, acq),
            "cores": cpu / args.seconds, "util": sum(o["held_s"] for o in outs) / args.slots / args.seconds,
            "min_max_proc": (per_proc[0], per_proc[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--waiters", type=int, default=64, help="tasks per process")
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=8.0, help="measured window per run")
    ap.add_argument("--warmup", type=float, default=1.5)
    ap.add_argument("--median", type=float, default=0.4)
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--fixed", type=float, default=0.0, help="fixed service time instead of lognormal")
    ap.add_argument("--hints", type=int, default=0,
                    help="each task a conversation of this many requests: acquire(priority = requests left), "
                         "where the implementation takes a priority (limiter.py's order); 0: no hint")
    ap.add_argument("--ref", default="HEAD", help="git revision of the old limiter.py")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--floor", action="store_true", help="also run `none` (no cross-process limit)")
    ap.add_argument("--child-impl")
    ap.add_argument("--child-dir")
    ap.add_argument("--child-start")
    args = ap.parse_args()
    if args.child_impl:
        return child(args)
    tmp = Path(tempfile.mkdtemp(prefix="limiter-ref-"))
    old = tmp / "limiter_old.py"
    old.write_text(subprocess.run(["git", "show", f"{args.ref}:wse_platform/llm/limiter.py"], cwd=ROOT,
                                  check=True, capture_output=True, text=True).stdout)
    impls = {"old": str(old), "new": str(ROOT / "wse_platform/llm/limiter.py")}
    if args.floor:
        impls["none"] = "none"
    print(f"{args.procs} processes x {args.waiters} waiters, {args.slots} slots, "
          + (f"fixed {args.fixed} s" if args.fixed else f"lognormal median {args.median} s sigma {args.sigma}")
          + f", {args.seconds} s window; old = {args.ref}; hints {args.hints}; load {os.getloadavg()[0]:.2f}")
    results: dict[str, list[dict]] = {k: [] for k in impls}
    for r in range(args.rounds):
        for name, impl in impls.items():
            res = run_once(args, impl)
            results[name].append(res)
            print(f"  round {r + 1} {name:4s}: {res['cpu_ms_per_slot']:.3f} ms CPU/slot, {res['cores']:.2f} cores, "
                  f"util {100 * res['util']:.1f} %, {res['acquired']} slots, per process (min, max) "
                  f"{res['min_max_proc']}", flush=True)
    print("median over rounds:")
    for name, rs in results.items():
        print(f"  {name:4s}: {statistics.median(r['cpu_ms_per_slot'] for r in rs):.3f} ms CPU/slot, "
              f"{statistics.median(r['cores'] for r in rs):.2f} cores, util {100 * statistics.median(r['util'] for r in rs):.1f} %")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
