"""Per-request cost of the progress counter the LLM client calls once per finished request
(`wse_platform.progress.TALLY.add`), alone and while published into the shared array that
`wse materialize` reads (issue 24 item 4: the client's own CPU per call matters).

    python bench/progress_tally.py [--n 200000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wse_platform.progress import Shared, Tally  # noqa: E402


def per_call_us(tally: Tally, n: int) -> float:
    best = float("inf")
    for _ in range(3):                      # the best of three: the least disturbed by other load
        t0 = time.process_time()
        for i in range(n):
            tally.add(i % 4 == 0, i % 50 == 0)
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    n = ap.parse_args().n
    local = per_call_us(Tally(), n)
    shared, tally = Shared(4), Tally()
    tally.publish(shared.arr, 0)
    published = per_call_us(tally, n)
    print(f"TALLY.add: {local:.2f} µs CPU per request; published into the shared array: {published:.2f} µs "
          f"(best of 3 x {n:,} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
