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
`client` = the sum of all but app and limiter. With --sequences (the server's log) it also prints the
mean time a slot is held beyond the server's service: (sum of client hold - sum of service) / requests.

Figures (2026-12-04, 2 cores): see the docstring's end.
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

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
    held = [r["release"] - r["slot"] for r in reqs if "release" in r and "slot" in r]
    if args.sequences and held:
        seqs = [json.loads(line) for line in Path(args.sequences).read_text().splitlines() if line.strip()]
        service = sum(s["e"] - s["s"] for s in seqs)
        fig["slot_held_beyond_service_mean_ms"] = round(1e3 * (sum(held) - service) / len(held), 2)
        fig["held_requests"], fig["server_sequences"] = len(held), len(seqs)
    print(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
