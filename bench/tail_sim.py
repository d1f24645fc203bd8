"""The end-of-span tail of a fleet run, simulated: does serving waiting requests by a priority beat FIFO?

A discrete-event simulation (no server, no platform code). A design is a set of conversations (NCP
episodes, WSE trajectories); a conversation is a small graph of request groups: a group's requests go
out together (in parallel) once the groups it depends on are answered, each `--think` s after the
answer that released it. A fleet of `--slots` slots serves each request in a lognormal time (median
`--median`, shape `--sigma`, as `bench/fleet_server.py`); a request that finds no free slot waits, and
a freed slot goes to one waiting request, chosen by the ORDER:

  fifo        the earliest waiting (what `wse_platform/llm/limiter.py` did in one process before the hints)
  hint        the largest hint the chain runners give (`limiter.expect`: NCP 2 + 6 x t_max at the episode's
              start, WSE (steps left) x (requests per step + panel) + richness panel in the trajectory's
              thread and (panels left) x panel + richness panel in its consistency chain; minus the
              requests the thread sent since), strict
  aged        the limiter's rule: earliest (queued at - --age x min(hint, --max-hint)) first
  remaining   the most requests its conversation still expects (planned - done): a client knows it
  depth       the longest chain of groups its conversation still has to go through (critical path,
              in requests: also known to the client)
  oracle      the most remaining service time of its conversation (needs the future: a bound)
  random      any waiting request

With `--procs P` the conversations are split over P processes (the cell runs of a fleet share one
endpoint's slots). Across processes a freed slot goes to a process chosen uniformly among those with a
waiter (the limiter's polling race), then to that process's best waiter by ORDER; `ORDER+x` instead
gives it to the process holding the globally best waiter (each process publishes its best waiter's
priority), i.e. one queue for all processes.

Per order it prints, over `--draws` draws (the same draws for every order), the median and the 10th and
90th percentiles of: span efficiency `eff` = sum of service / slots / (last answer - first request);
`lost` = span - sum of service / slots (seconds of the full fleet idle in the span); `tail` = last
answer - the last moment a request waited for a slot.

Designs (`--design`):
  ncp      NCP-Bench at `--t-max` as in the fleet run of /tmp/m4-ncp64-n1/ncp (read from its
           `llm_calls` joined to `ncp_turns.llm_call_ids`): 300 episodes, each one chain (every stage of a
           turn waits for the previous answer): opening, its fact update, then per turn player, narrator,
           fact update, conflict check, node update, commitment status. baseline+natural 20 requests;
           baseline+adversarial 20 of which 1-3 of the first 3 come from the cache (the other adversarial
           cell asked them: ~0 s here); memory+adversarial 21 (HiAgent's one subgoal summary; 2-3
           cache answers at the start). Every episode ran all turns (no CONFLICT/SUCCESS in the fleet's
           stand-in answers). Processes: one per architecture (`--procs 3`).
  wse      WSE-bench: 12 architectures x 42 trajectories (as `fleet_new64`'s llm_calls): per step the
           generation chain (B2: one character-agent request, B3: 4 parallel ones; WMOD: world model;
           the story agent; WMEM: world memory), then the step's consistency panel (6 parallel: 3 judges
           x 2) once the step and the previous panel are answered, and the richness panel (6 parallel)
           after the last step. Processes: the architectures round-robin over `--procs`.
  uniform  `--chains` chains of `--length` requests.

`--hedge S`: a request in service for S s while a slot is free and nothing waits gets a second copy
(a fresh draw); the first answer wins, the other copy is cancelled. `eff` stays the conversations' own
service (without copies) / slots / span; `copies_s` is the slot time the copies took.

    python bench/tail_sim.py --design ncp --slots 64 --procs 3 --draws 40
    python bench/tail_sim.py --design ncp --slots 64 --procs 3 --draws 40 --orders fifo,remaining --hedge 1.2

FINDINGS (2026-12-03, issue 24; span efficiency in %, median [10th, 90th percentile] over the draws;
3 processes as in a fleet run; `+x`: the order also across processes; --think 0.005 unless said)

  design, slots         draws  fifo               remaining          remaining+x  oracle
  NCP t_max 3, 64       40     95.3 [88.5, 97.1]  95.5 [90.5, 97.4]  95.5         99.9
    (one process)       40     95.1 [90.3, 96.9]  95.5 [90.9, 97.1]  -            99.9
    (--think 0.05)      40     95.1 [88.5, 97.1]  95.6 [90.4, 97.4]  95.5         99.8
  NCP t_max 3, 256      20     60.3               61.9               62.1         62.5  (chain-bound)
  NCP t_max 10, 64      20     97.8               98.2               98.5         100.0
  NCP t_max 10, 256     20     77.0               80.1               80.2         81.9
  WSE h3, 64            20     98.3               98.0               98.3         99.5  (depth: 98.0)
  WSE h10, 64           10     99.2               99.4               99.5         99.8
  WSE h3, 256           20     88.3               90.7               90.5         96.7
  WSE h10, 256          20     92.0               95.8               96.3         98.8  (depth+x: 96.5)

  - At 64 slots a priority a client can know (expected remaining requests, or the remaining critical
    path: `depth`, the same for NCP's chains) gains 0.2-0.7 points of span efficiency for every design:
    far below the ~3 points that would pay for a priority queue in the limiter. A priority lets a chain
    that fell behind skip the queue, but chains fall behind mostly by their service draws, and in the
    last seconds of the span the queue is short anyway; nor do the NCP episodes differ in length as
    assumed in the brief (measured in /tmp/m4-ncp64-n1/ncp: every
    episode ran its 3 turns; baseline 20 requests, memory 21 -- HiAgent adds one subgoal summary per
    episode, not ~4 -- and 1-3 of the adversarial cells' first requests come from the cache).
  - What the tail is made of is the service time of the last requests, which no client knows before the
    answer (the oracle, ordering by the true remaining service, reaches 99.9 %). The measured NCP-64
    runs show it: their span efficiency is bimodal on one server draw. The stand-in server draws every
    service from one `random.Random(0)` stream in arrival order, so runs share most of their draws; in
    4 of the 8 NCP t_max 3 runs at 64 slots in /tmp (m2-ncp64-b, m4-ncp64-b2, -n1, -n2) a 10.6 s service
    (4.1 sigma) starts at 43-44 s, ~4 s before the fleet's saturation ends, and the run's span efficiency
    (sum of service / 64 / span from sequences.jsonl) is 86.7-88.8 %; in the 4 others (fl_newncp,
    m2-ncp64-n, m4-ncp64-b1, ncpt) the longest service is 5.6-8.5 s and early, and they reach 92.0-94.8 %.
    In m4-ncp64-n1 that request (memory+adversarial movie76's turn-3 fact update, 12.4 s latency in
    llm_calls) ends at 53.6 s and its episode's last three requests at 54.8 s (the span's end); the
    next-latest answer is at 51.9 s. Runs of both arms of the lead's A/B (m4-ncp64-b*, -n*) drew it, but
    the NCP-64 figure moves ~5 points with this one draw.
  - At 256 slots a client-known priority gains 1.6 (NCP t_max 3: chain-bound), 2.4 (WSE h3), 3.1 (NCP
    t_max 10) and 3.8-4.3 points (WSE h10). The measured 256-slot runs are far below even FIFO here
    (NCP t_max 10: 72.6 % of the span, WSE h10: 80 %, WSE h3 CPU-bound), so something else (the
    client's CPU) costs more there than the order could win.
  - Hedging the stragglers instead (a second copy of a request in service for 1.2 s, only while a slot
    is free and nothing waits) at NCP t_max 3, 64 slots, 40 draws: fifo 96.8 [95.7, 97.8], remaining
    97.6 [96.0, 98.3], with ~19 slot-s of copies (0.6 % of the slot time); --hedge 2.0: fifo 96.3
    [94.9, 97.5], ~10 slot-s. It cuts the bad-luck tail (10th percentile 88.5 -> 95.7) where a priority
    cannot, but it sends requests twice (rows stay the same only if both copies give one answer, e.g.
    the same seed on a deterministic server) and needs the server to stop the loser (vLLM aborts a
    request whose connection closes): a design decision, not done here. WSE h10 at 256 slots with
    --hedge 1.2 (10 draws): fifo 94.9, remaining 98.6 (~73 slot-s of copies, 0.3 %).
  - The limiter's rule with the runners' exact hints (`aged`: key = queued at - --age x min(hint,
    --max-hint), per process; limiter.py's AGE_S 0.02, MAX_HINT 200: no waiter passed by one queued > 4 s
    after it). 2026-12-03 ~22:30 UTC, 6 draws, --think 0.02, 256 slots, 3 processes (WSE 4), median
    span efficiency: NCP t_max 25 fifo 84.6, remaining 89.2, remaining+x 89.5, aged 89.1 (--age 0.25
    --max-hint 120: 89.2; the cap matters more than the weight: 0.02 x 60: 86.8, 0.05 x 30: 85.4, since
    hints above the cap look alike); NCP t_max 10 fifo 77.6, aged 80.3 (0.25 x 120: 80.6); WSE h10
    fifo 94.2, aged 94.7 (0.25 x 120: 95.6, 0.03 x 200: 94.9); aged+x (one order across processes) adds
    0.2-0.4 points to aged in each: the per-process order gets nearly all of the gain.
  - NCP t_max 25 as measured in a fleet run (/tmp/prio2-fl-new0, 22:36 UTC): HiAgent's episodes send
    ~172 requests to the server, the baseline's ~151 (ncp.memory_summary: 276 calls per episode, 253
    from the cache), and its cell is one process: its median episode ends 17-36 s after the baseline
    cells' (6 runs), and its 100 episodes are the run's tail (at most 100 of the 256 slots in flight).
    With `--memory-extra 23` (47,453 requests; the run: 47,400), 6 draws: fifo 81.5, aged 85.2, aged+x
    85.5; aged+x with a hint that also counts HiAgent's summaries (the runner's hint is 2 + 6 x t_max
    for every architecture): 87.2, against aged 85.2 with the same hints -- what a cross-process order
    could add there, if the hint knew HiAgent's length.
  - Built (h/xprio, 2026-12-04): the limiter's order across processes (limiter.py: each waiting process
    publishes its best key; a slot freed < 20 ms ago is left to a process whose key is > 50 ms better) and
    the NCP hint as the sim's: 2 + 7 x t_max for HiAgent (its fleet runs send 23 new summaries per
    episode at t_max 25, 1 per turn from turn 3), set again each turn, the cached summaries not counted.
    Before, the real hint was not the sim's: the client counted HiAgent's ~253 cached summaries per
    episode against it (turn t: t - 2 of them), so it ran out in turn ~14 (turns 14-25 with hint 0, at
    the back of the queue). Fleet A/B, NCP 256 slots t_max 25 (`bench/fleet.py ... --seed S`, base =
    main 604c4fd, back-to-back pairs, load 2.6-5.8 from other work on the 2 cores), efficiency over the
    command / in the span, %, base -> new: seed 0 77.2/80.5 -> 81.9/85.7; seed 1 71.3/75.8 -> 74.6/77.9;
    seed 2 71.2/74.3 -> 75.4/79.4; seed 3 77.1/80.5 -> 81.1/84.9; seed 4 78.9/82.6 -> 77.5/81.3; seed 5
    76.8/80.2 -> 83.1/87.5 (new at load 0.5, base 2.3): +3.5 points mean, 5 of 6 pairs better, median
    77.0 -> 79.3, but new's lowest 74.6 (seed 1): not yet >= 75 % in every run. The load was higher in
    the base arm in seed 1, in the new in seed 2. The
    HiAgent cell is less often the tail: its last answer 16.6 / 22.0 / 17.9 / 15.3 s after the baseline
    cells' in base seeds 0 / 1 / 3 / 4, 3.1 / 18.0 / -3.1 / 11.6 s in new (seed 1's new tail: 1-6 HiAgent
    episodes left from 110 s on, chain-bound: a request order cannot shorten one episode's own chain).
    The CLI's process tree used 3-10 CPU s more in new (126.2/129.3, 122.8/129.6, 133.4/143.6,
    125.8/129.4, 134.2/140.7, 123.9/129.0), not broken down (a suspect: the process with the best waiter
    looks at POLL_S instead of POLL_S x 3; a look itself is cheaper than main's, 7.4 vs 8.3 us with 256
    slots held elsewhere).
  - 100-Endings was not simulated: its fleet run (/tmp/m1-64-endings-/endings) is 99 forecasts and 19,800
    judge requests in wide parallel batches, and its span efficiency is already 98.3 % (170.1 s of
    sum of service / 64 in a 173.1 s span): no order can win more than 1.7 points.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
from dataclasses import dataclass, field

@dataclass
class Conv:
    groups: list[list[float]]           # service time of each request of each group (0.0: from the cache)
    deps: list[list[int]]               # groups each group waits for
    proc: int = 0
    planned: int = 0                    # requests the client expects
    hints: list[int] = field(default_factory=list)   # per group: the priority hint the chain runners give it
    depth: list[int] = field(default_factory=list)   # per group: requests on the longest path from it to the end

    def __post_init__(self) -> None:
        self.planned = sum(len(g) for g in self.groups)
        n = len(self.groups)
        after: list[list[int]] = [[] for _ in range(n)]
        for g, ds in enumerate(self.deps):
            for d in ds:
                after[d].append(g)
        self.depth = [0] * n
        for g in reversed(range(n)):   # groups are listed in a topological order
            self.depth[g] = 1 + max((self.depth[h] for h in after[g]), default=0)
        self.after = after


def chain(services: list[float], proc: int, hint0: int | None = None) -> Conv:
    c = Conv([[s] for s in services], [[k - 1] if k else [] for k in range(len(services))], proc)
    c.hints = [max(0, (len(services) if hint0 is None else hint0) - k) for k in range(len(services))]
    return c


def ncp(rng: random.Random, ln, t_max: int, memory_extra: int = 1, memory_hint: int = 1) -> list[Conv]:
    out = []
    for arch in range(3):
        for _ in range(100):
            n = 2 + 6 * t_max + (memory_extra if arch == 2 else 0)
            cached = 0 if arch == 0 else rng.choice((2, 2, 3) if arch == 2 else (1, 2, 2, 3))
            # the hint (ncp/episode.py): 2 + (6 + memory_hint for HiAgent) x t_max at the episode's start, minus
            # the requests sent
            hint = 2 + (6 + (memory_hint if arch == 2 else 0)) * t_max
            out.append(chain([0.0 if k < cached else ln() for k in range(n)], arch, hint))
    return out


def wse(rng: random.Random, ln, horizon: int, procs: int) -> list[Conv]:
    out = []
    for a in range(12):
        base, wmem, wmod = 1 + a // 4, bool(a & 2), bool(a & 1)
        for _ in range(42):
            groups: list[list[float]] = []
            deps: list[list[int]] = []
            hints: list[int] = []
            prev_gen, prev_panel = None, None
            panels = []
            per_step = (1 if base == 2 else 4 if base == 3 else 0) + wmod + 1 + wmem
            for t in range(1, horizon + 1):
                stages = ([[ln()]] if base == 2 else [[ln() for _ in range(4)]] if base == 3 else [])
                stages += ([[ln()]] if wmod else []) + [[ln()]] + ([[ln()]] if wmem else [])
                sent = 0
                for st in stages:
                    deps.append([prev_gen] if prev_gen is not None else [])
                    groups.append(st)
                    # the hint (wse/simulate.py): the step's and later steps' generation and panels + richness
                    hints.append((horizon - t + 1) * (per_step + 6) + 6 - sent)
                    sent += len(st)
                    prev_gen = len(groups) - 1
                panels.append((prev_gen, [ln() for _ in range(6)]))
            # panels after the generation (topological order): step k's panel after step k and panel k-1
            for k, (g, svc) in enumerate(panels, 1):
                deps.append([g] + ([prev_panel] if prev_panel is not None else []))
                groups.append(svc)
                hints.append((horizon - k + 1) * 6 + 6)   # the hint (wse/early.py): panels left + richness
                prev_panel = len(groups) - 1
            deps.append([prev_gen])
            groups.append([ln() for _ in range(6)])
            hints.append(0)   # the richness panel: no hint (asked from a judge thread)
            c = Conv(groups, deps, a % procs)
            c.hints = hints
            out.append(c)
    return out


def simulate(convs: list[Conv], slots: int, order: str, think: float, rng: random.Random,
             hedge: float = 0.0, draw=None, age: float = 0.02, max_hint: int = 200) -> dict:
    """One run. `hedge` > 0: a request in service for `hedge` s while a slot is free and nothing waits
    gets a second copy (a fresh service draw from `draw()`); the first answer wins and the other copy
    is cancelled (its slot freed at once)."""
    cross = order.endswith("+x")
    base = order[:-2] if cross else order
    nproc = max(c.proc for c in convs) + 1
    rem_work = [sum(map(sum, c.groups)) for c in convs]
    done = [0] * len(convs)                       # requests answered per conversation
    left = [[len(g) for g in c.groups] for c in convs]          # unanswered requests per group
    need = [[len(d) for d in c.deps] for c in convs]            # unanswered dependencies per group
    queues: list[list] = [[] for _ in range(nproc)]
    waiting = seq = 0
    free = slots
    events: list = []   # (time, kind, a, b): 0 = copy b of request a answered, 1 = group b of conv a
                        # released, 2 = request a in service for `hedge` s
    reqs: list[list] = []   # [conv, group, service, copies: list of [start, end, live], answered]
    overdue: list[int] = []
    first, last, last_wait, work, extra = math.inf, 0.0, 0.0, 0.0, 0.0

    def key(i: int, g: int, t: float) -> tuple:
        if base == "fifo":
            return (t,)
        if base == "remaining":
            return (-(convs[i].planned - done[i]), t)
        if base == "hint":        # the chain runners' hint, strict
            return (-convs[i].hints[g], t)
        if base == "aged":        # the limiter's rule: queued AGE_S x min(hint, MAX_HINT) earlier
            return (t - age * min(convs[i].hints[g], max_hint), t)
        if base == "depth":
            return (-convs[i].depth[g], t)
        if base == "oracle":
            return (-rem_work[i], t)
        if base == "random":
            return (rng.random(),)
        raise ValueError(order)

    def start(r: int, t: float, s: float) -> None:
        nonlocal free
        free -= 1
        assert free >= 0, "the fleet's limit was exceeded"
        copies = reqs[r][3]
        copies.append([t, t + s, True])
        heapq.heappush(events, (t + s, 0, r, len(copies) - 1))
        if hedge and len(copies) == 1:
            heapq.heappush(events, (t + hedge, 2, r, 0))

    def answered(i: int, g: int, t: float) -> None:
        done[i] += 1
        left[i][g] -= 1
        if left[i][g] == 0:
            for h in convs[i].after[g]:
                need[i][h] -= 1
                if need[i][h] == 0:
                    heapq.heappush(events, (t + think, 1, i, h))

    def release(i: int, g: int, t: float) -> None:
        nonlocal seq, waiting, first, work
        for s in convs[i].groups[g]:
            if s == 0.0:          # from the cache: no slot, no time
                answered(i, g, t)
                continue
            first = min(first, t)
            work += s
            reqs.append([i, g, s, [], False])
            r = len(reqs) - 1
            if free > 0 and waiting == 0:
                start(r, t, s)
                continue
            seq += 1
            heapq.heappush(queues[convs[i].proc], (key(i, g, t), seq, r))
            waiting += 1

    def give(t: float) -> None:
        """A slot is free: to a waiter, else (hedging) a second copy of an overdue request."""
        nonlocal waiting, last_wait
        if waiting:
            last_wait = t
            live = [q for q in queues if q]
            q = min(live, key=lambda q: q[0][:2]) if cross else live[rng.randrange(len(live))]
            r = heapq.heappop(q)[2]
            waiting -= 1
            start(r, t, reqs[r][2])
            return
        while overdue:
            r = overdue.pop(0)
            if not reqs[r][4]:
                start(r, t, draw())
                return

    for i, c in enumerate(convs):
        for g, ds in enumerate(c.deps):
            if not ds:
                heapq.heappush(events, (0.0, 1, i, g))
    while events:
        t, kind, a, b = heapq.heappop(events)
        if kind == 1:
            release(a, b, t)
            continue
        if kind == 2:
            if not reqs[a][4] and len(reqs[a][3]) == 1:
                if free > 0 and waiting == 0:
                    start(a, t, draw())
                else:
                    overdue.append(a)
            continue
        req = reqs[a]
        copy = req[3][b]
        if not copy[2]:
            continue        # cancelled when the other copy answered
        req[4] = True
        last = max(last, t)
        for k, c in enumerate(req[3]):
            if c[2]:
                c[2] = False
                free += 1
                if k != b:
                    extra += t - c[0]
                give(t)
        rem_work[req[0]] -= req[2]
        answered(req[0], req[1], t)
    span = last - first
    # eff: the requests' own service times (what the fleet must serve without copies) / slots / span
    return {"eff": work / slots / span, "lost": span - work / slots, "tail": last - max(last_wait, first),
            "copies_s": extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="ncp", choices=("ncp", "wse", "uniform"))
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--procs", type=int, default=1, help="processes sharing the slots")
    ap.add_argument("--orders", default="fifo,remaining,depth,oracle,random")
    ap.add_argument("--chains", type=int, default=300)
    ap.add_argument("--length", type=int, default=20)
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--t-max", type=int, default=3)
    ap.add_argument("--median", type=float, default=0.4)
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--think", type=float, default=0.005, help="client time between an answer and the next request")
    ap.add_argument("--hedge", type=float, default=0.0,
                    help="a request in service this long gets a second copy when a slot is free and nothing waits")
    ap.add_argument("--age", type=float, default=0.02, help="order aged: seconds of queueing per hinted request")
    ap.add_argument("--max-hint", type=int, default=200, help="order aged: hints above count as this")
    ap.add_argument("--memory-extra", type=int, default=1,
                    help="ncp: HiAgent's requests per episode beyond the baseline's (1 as measured at t_max 3; "
                         "23 at t_max 25: its subgoal summaries, ~1 per turn after the cache)")
    ap.add_argument("--memory-hint", type=int, default=1,
                    help="ncp: the runner's hint counts this many more requests per turn for HiAgent (0: before "
                         "2026-12-04, when every architecture's hint was 2 + 6 x t_max)")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    orders = a.orders.split(",")
    if a.procs > 1:
        orders += [o + "+x" for o in orders if o not in ("fifo", "random")]
    res: dict[str, list[dict]] = {o: [] for o in orders}
    for d in range(a.draws):
        rng = random.Random(a.seed * 100_003 + d)
        mu = math.log(a.median)
        ln = lambda: rng.lognormvariate(mu, a.sigma)  # noqa: E731
        if a.design == "ncp":
            convs = ncp(rng, ln, a.t_max, a.memory_extra, a.memory_hint)
            for c in convs:
                c.proc %= a.procs
        elif a.design == "wse":
            convs = wse(rng, ln, a.horizon, a.procs)
        else:
            convs = [chain([ln() for _ in range(a.length)], i % a.procs) for i in range(a.chains)]
        for o in orders:
            hr = random.Random(-1 - d)
            res[o].append(simulate(convs, a.slots, o, a.think, random.Random(d), a.hedge,
                                   lambda: hr.lognormvariate(mu, a.sigma), a.age, a.max_hint))
    out = {"design": a.design, "slots": a.slots, "procs": a.procs, "draws": a.draws,
           "requests": sum(1 for c in convs for g in c.groups for s in g if s)}
    for o, rows in res.items():
        q = {}
        for k in ("eff", "lost", "tail") + (("copies_s",) if a.hedge else ()):
            v = sorted(r[k] for r in rows)
            p = statistics.quantiles(v, n=10) if len(v) > 1 else [v[0]] * 9
            q[k] = [round(p[0], 3), round(statistics.median(v), 3), round(p[-1], 3)]
        out[o] = q
    print(json.dumps(out))


if __name__ == "__main__":
    main()
