"""CPU per warehouse open + close (issue 24 item 3): a new DuckDB database instance per open (what
`Warehouse.connect` did before) against `Warehouse.connect` now (ATTACH/DETACH on the thread's
in-memory instance), read-write and read-only, on a warehouse with the full schema (`sql/`).
Interleaved rounds, median of the rounds; one process, so the ratio is stable under load.

    python bench/warehouse_open.py [--n 50] [--rounds 5] [--warehouse PATH]   # a copy of PATH is used
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from wse_platform.warehouse import Warehouse  # noqa: E402


def per_open_ms(fn, n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50, help="opens per round and kind")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warehouse", type=Path, default=None, help="measure on a copy of this warehouse file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wh.duckdb"
        if args.warehouse:
            shutil.copy(args.warehouse, path)
        wh = Warehouse(path)
        wh.ensure_schema()
        tables = len(wh.tables())

        def instance(read_only: bool):
            def f():
                con = duckdb.connect(str(path), read_only=read_only)
                con.execute("SELECT 1").fetchall()
                con.close()
            return f

        def attach(read_only: bool):
            def f():
                with wh.connect(read_only=read_only) as con:
                    con.execute("SELECT 1").fetchall()
            return f

        kinds = {"instance per open, read-write": instance(False), "attach, read-write": attach(False),
                 "instance per open, read-only": instance(True), "attach, read-only": attach(True)}
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for k, f in kinds.items():
                times[k].append(per_open_ms(f, args.n))
    print(f"warehouse with {tables} tables; {args.rounds} rounds x {args.n} opens; CPU ms per open + close "
          "(median of rounds), incl. the inter-process lock for `Warehouse.connect`:")
    for k, v in times.items():
        print(f"  {k:32s} {statistics.median(v):6.2f} ms")
    for mode in ("read-write", "read-only"):
        a, b = statistics.median(times[f"instance per open, {mode}"]), statistics.median(times[f"attach, {mode}"])
        print(f"  {mode}: attach costs {b / a:.2f}x an instance per open")
    return 0


if __name__ == "__main__":
    sys.exit(main())
