"""The time between an answer and the same conversation's next request, split into its parts.

Run a fleet run with tracing on (`wse_platform/llm/trace.py`), then read the trace:

    WSE_LLM_TRACE=/tmp/x-fl/trace flock /tmp/fleet.lock python bench/fleet.py --slots 256 --benchmarks ncp \\
        --t-max 25 --seed 0 --workdir /tmp/x-fl
    python bench/chain_gap.py /tmp/x-fl/trace [--sequences /tmp/x-fl/ncp/sequences.jsonl]

Per pair of consecutive batches of one thread (an NCP episode runs in one thread), from the last answer of
the first (its body read on the HTTP loop) to the first request of the next holding a slot:
  hold_after  answer -> slot released (the coroutine resuming to leave `async with limiter.slot()`)
  on_result   released -> the client's on_result done (journal, validation, record) on the loop
  wake        on_result done -> the caller's thread running again
  after       the client after the answers (the cache write of the claim's answers, settle) to return
  app         returned -> the next complete_many (the conversation's own code: parse, next prompt)
  before      complete_many -> the batch handed to the backend (prepare, plain read, claim)
  dispatch    handed -> the request on the loop asking for a slot (the loop's queue, the body)
  limiter     asking -> holding a slot (while every slot is busy: free time for the fleet)
`client` = the sum of all but app and limiter; `slot_free`: the same over the pairs whose request found a
slot free (limiter < 1 ms: the run's tail, where the gap leaves a slot idle). With --sequences (the server's
log) it also prints the mean time a slot is held beyond the server's service: (sum of client hold - sum of
service) / requests, and (by the trace's clock offsets and sums: no request is matched to its sequence) its
parts before the server's arrival stamp and after its end stamp.

FINDINGS (2026-12-04, 2 cores shared with other fleet runs and tests; NCP 256 slots t_max 25, 3 worker
processes, ~47,100 pairs a run; `base` = tracing only, i.e. main's client; ms, mean unless said)

  run (seed, 1-min load)            eff / span %   client  client, slot free (p90)  after  before  held beyond service
  base (0, 4.5 -> 3.7)              76.8 / 80.2    11.2    27.4 (80.5)              15.5   5.7     9.95
  carry (0, 3.7 -> 3.2)             78.3 / 82.1     7.0    19.0 (42.2)               0.4  12.8     6.57
  carry, again (0, 1.8 -> 3.0)      73.4 / 76.7    10.6    21.4 (57.7)               0.4  13.8    10.78
  carry + 1-ms switch interval (0)  76.3 / 79.8    10.0    35.7 (99.4)               0.6  25.8     8.28  (reverted)
  base (1, 5.8 -> 5.8)              70.5 / 75.7    32.4    58.9 (166.5)             35.5  10.8    18.8
  carry + busy poll (1, 5.8 -> 3.0) 75.1 / 78.2     5.5    14.0 (29.7)               0.3   8.3     6.02
  base (0, 2.6 -> 2.9)              79.2 / 83.1     7.8    21.5 (45.2)              12.3   4.0     6.13
  carry + busy poll (0, 2.9 -> 2.4) 72.1 / 75.4     6.5    16.8 (38.4)               0.6   9.4     6.74
  (after, before: the slot-free pairs' parts. "carry, again" and the last row: an 18.7-s draw ended the span)

  - The gap is mostly limiter wait (median ~65-80 ms while every slot is busy: free for the fleet). The
    client's own time matters where a slot is free (the tail): there its largest part was `after`, the
    cache write of the answer and its claim's release in a transaction of its own (plus the group
    commit's, and the SQLite write lock shared with the other processes). Tried (branch h/gap, NOT merged:
    a settler thread and an exit hook in the one path every answer takes, for a gain these pairs cannot
    resolve): carried by the next claim's transaction, `after` ~0.3 ms. The claim (`before`) then pays about half of it
    back (its transaction holds the answers' inserts too): in the two quietest pairs the slot-free client
    time fell 27.4 -> 19.0 and 21.5 -> 16.8 ms (mean), the client's time over all pairs 11.2 -> 7.0 and
    7.8 -> 6.5 ms.
  - `before`: SQLite's busy handler sleeps 1, 2, 5, 10 ... ms while another process writes; polling the
    lock every 0.3 ms (h/gap, not merged): the slot-free `before` with the carry 12.8 and 13.8 ms (seed 0),
    with the carry and the poll 9.4 (seed 0) and 8.3 ms (seed 1): not pairs, indicative only.
  - Fleet efficiency of single runs is a draw (the same code and seed: 78.3 and 73.4 %; whether a ~19-s
    service draw lands on the last conversation decides ~5 points): these pairs cannot resolve the ~1 point
    the gap is worth; `bench/tail_sim.py --design ncp --slots 256 --procs 3 --t-max 25 --orders aged
    --draws 20 --think T` puts a per-request gap of 39 -> 27 ms at 87.1 -> 87.7 % span efficiency (median).
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

FREE_S = 0.001   # a limiter wait below this: a slot was free when the request asked
OFFSETS: dict[str, float] = {}   # per process: wall clock - monotonic clock (trace.py's first line)
PARTS = ("hold_after", "on_result", "wake", "after", "app", "before", "dispatch", "limiter")


def load(folder: Path) -> tuple[list[dict], list[dict]]:
    batches, reqs = [], []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            rec["pid"] = path.stem
            if rec["k"] == "clock":
                OFFSETS[path.stem] = rec["off"]
                continue
            (batches if rec["k"] == "batch" else reqs).append(rec)
    return batches, reqs


def pairs(batches: list[dict], reqs: list[dict]) -> list[dict[str, float]]:
    """The parts (s) of each answer -> next request of one thread."""
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    for b in batches:
        if "call" in b and "woke" in b:
            b["reqs"] = []
            by_thread[(b["pid"], b["tid"])].append(b)
    for bs in by_thread.values():
        bs.sort(key=lambda b: b["enter"])
    for r in reqs:
        if "slot" not in r or "done" not in r:
            continue
        for b in by_thread.get((r["pid"], r["tid"]), ()):
            if b["call"] <= r["ask"] <= b["woke"]:
                b["reqs"].append(r)
                break
    out = []
    for bs in by_thread.values():
        for b1, b2 in zip(bs, bs[1:]):
            if not b1["reqs"] or not b2["reqs"] or "exit" not in b1:
                continue
            last = max(b1["reqs"], key=lambda r: r["done"])
            first = min(b2["reqs"], key=lambda r: r["ask"])
            out.append({"hold_after": last["release"] - last["answer"], "on_result": last["done"] - last["release"],
                        "wake": b1["woke"] - last["done"], "after": b1["exit"] - b1["woke"],
                        "app": b2["enter"] - b1["exit"], "before": b2["call"] - b2["enter"],
                        "dispatch": first["ask"] - b2["call"], "limiter": first["slot"] - first["ask"],
                        "total": first["slot"] - last["answer"]})
    for p in out:
        p["client"] = p["total"] - p["app"] - p["limiter"]
    return out


def summary(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {"median_ms": round(1e3 * statistics.median(v), 2), "mean_ms": round(1e3 * statistics.fmean(v), 2),
            "p90_ms": round(1e3 * v[int(0.9 * (len(v) - 1))], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="the WSE_LLM_TRACE folder of a run")
    ap.add_argument("--sequences", default=None, help="the fleet server's sequences.jsonl of the same run")
    args = ap.parse_args()
    batches, reqs = load(Path(args.trace))
    ps = pairs(batches, reqs)
    fig: dict = {"batches": len(batches), "requests": len(reqs), "pairs": len(ps)}
    if ps:
        for part in (*PARTS, "client", "total"):
            fig[part] = summary([p[part] for p in ps])
        # a slot was free (the run's tail, fewer conversations than slots): the gap left a slot idle
        free = [p for p in ps if p["limiter"] < FREE_S]
        fig["slot_free_pairs"] = len(free)
        if free:
            fig["slot_free"] = {part: summary([p[part] for p in free]) for part in (*PARTS, "client", "total")}
    held = [r["release"] - r["slot"] for r in reqs if "release" in r and "slot" in r]
    if args.sequences and held:
        seqs = [json.loads(line) for line in Path(args.sequences).read_text().splitlines() if line.strip()]
        service = sum(s["e"] - s["s"] for s in seqs)
        fig["slot_held_beyond_service_mean_ms"] = round(1e3 * (sum(held) - service) / len(held), 2)
        fig["held_requests"], fig["server_sequences"] = len(held), len(seqs)
        done = [r for r in reqs if "slot" in r and "answer" in r and r["pid"] in OFFSETS]
        if len(done) == len(seqs) == sum(1 for s in seqs if "a" in s):   # one sequence per request (n = 1)
            # sums need no matching of requests to sequences: slot -> server arrival, server end -> body read
            fig["slot_to_server_arrival_mean_ms"] = round(1e3 * (sum(s["a"] for s in seqs) - sum(
                r["slot"] + OFFSETS[r["pid"]] for r in done)) / len(done), 2)
            fig["server_end_to_answer_read_mean_ms"] = round(1e3 * (sum(
                r["answer"] + OFFSETS[r["pid"]] for r in done) - sum(s["e"] for s in seqs)) / len(done), 2)
            fig["server_arrival_to_start_mean_ms"] = round(1e3 * sum(s["s"] - s["a"] for s in seqs) / len(seqs), 2)
    print(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
