"""An upper bound on fleet efficiency set by the longest chain of sequential requests.

However many slots a fleet has, a run cannot end before its longest conversation (an NCP
episode, a WSE trajectory) has had every one of its requests answered one after the other. With
`--chains` conversations of `--length` sequential requests each, lognormal service times (the
fleet bench's `--median`/`--sigma`), `--sequences` requests in all and `--slots` slots, the
request span is at least max(sum of service / slots, the longest chain's time), so the
efficiency over the span is at most (sum / slots) / that. Monte Carlo over `--trials` draws;
prints the median and the 10th-90th percentiles of the bound (no server, no platform code).

    python bench/chain_bound.py --slots 256                      # NCP fleet design at t_max 3
    python bench/chain_bound.py --slots 256 --length 45 --sequences 15000   # a longer t_max
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics


def bound(rng: random.Random, chains: int, length: int, sequences: int, slots: int,
          median: float, sigma: float) -> float:
    mu = math.log(median)
    draw = lambda: rng.lognormvariate(mu, sigma)  # noqa: E731
    longest = max(sum(draw() for _ in range(length)) for _ in range(chains))
    total = sum(draw() for _ in range(sequences))
    return (total / slots) / max(total / slots, longest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=300, help="conversations (NCP: 100 specs x 3 architectures)")
    ap.add_argument("--length", type=int, default=20, help="sequential requests of the longest kind of chain")
    ap.add_argument("--sequences", type=int, default=5600, help="requests in all (the fleet bench's `sequences`)")
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--median", type=float, default=0.4)
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    got = sorted(bound(rng, a.chains, a.length, a.sequences, a.slots, a.median, a.sigma) for _ in range(a.trials))
    q = statistics.quantiles(got, n=10)
    print(json.dumps({**vars(a), "bound_median": round(statistics.median(got), 3),
                      "bound_p10": round(q[0], 3), "bound_p90": round(q[-1], 3)}))


if __name__ == "__main__":
    main()
