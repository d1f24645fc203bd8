"""CPU of one step session's call-record writes, per session (issue 24, `write_call_records`).

A session as a run's step has it: a client (scripted backend, cache and journal on) answers 200
requests, a periodic record write is handed off as a backend's event loop hands it off
(`LLMClient._flush_soon`), 200 more requests, then the step's final write (`flush_records`) and
`close`; records go into a DuckDB warehouse that already holds `--rows` rows of llm_calls. Reported:
the process's CPU (all threads, `time.process_time`) per session, the load average with it.
Measure two trees alternately, e.g.

    for code in /tmp/base $PWD; do (cd $code && PYTHONPATH=$code python $OLDPWD/bench/record_writes_cpu.py); done
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000, help="rows already in llm_calls")
    ap.add_argument("--sessions", type=int, default=8)
    args = ap.parse_args()
    from tests.llm.conftest import make_settings
    from tests.llm.test_durability import backend
    from wse_platform.llm import LLMClient, LLMRequest
    from wse_platform.llm.accounting import write_call_records
    from wse_platform.warehouse import Warehouse

    tmp = Path(tempfile.mkdtemp(prefix="wse-record-writes-"))
    try:
        wh = Warehouse(tmp / "wh.duckdb")
        wh.ensure_schema()
        write_call_records(wh, [{"call_id": f"pre{i}", "run_id": "pre", "partition_key": "p", "role": "r",
                                 "model": "m", "request_key": f"k{i}", "attempt": 1, "valid": True,
                                 "created_at": datetime.now()} for i in range(args.rows)])

        async def on_the_loop(fn) -> None:
            fn()

        def reqs(tag: str) -> list:
            return [LLMRequest(role="endings.forecast", model="smollm2",
                               messages=[{"role": "user", "content": f"{tag}-{i}"}]) for i in range(200)]
        cpu = 0.0
        for k in range(args.sessions):
            t0 = time.process_time()
            c = LLMClient(make_settings(tmp), run_id=f"s{k}", backends={"smollm2": backend()},
                          record_sink=lambda rows: write_call_records(wh, rows), flush_every=10**6,
                          flush_interval_s=5.0)
            c.complete_many(reqs(f"{k}a"))
            c._last_flush -= 5.1
            asyncio.run(on_the_loop(c._flush_soon))
            c.complete_many(reqs(f"{k}b"))
            c.flush_records()
            c.close()
            cpu += time.process_time() - t0
        n = wh.query("SELECT count(*) AS n FROM llm_calls")["n"][0]
        print(f"{os.environ.get('PYTHONPATH', '.')}: {1000 * cpu / args.sessions:.1f} ms CPU per session "
              f"(400 calls, a handed-off periodic write, the final write; llm_calls {n} rows at the end); "
              f"load {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
