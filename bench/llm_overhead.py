"""Platform overhead of the LLM call path on the embedded backend (not a timed test).

1. raw: the same N schema-constrained requests straight to `EmbeddedBackend.generate`;
2. client, cache miss: through `LLMClient` (key derivation, cache lookup and write,
   validation, accounting) plus writing the call records to a temp DuckDB warehouse;
3. client, cache hit: the same requests again, `--hit-rounds` times: calls/s;
4. the same with call records written to the warehouse as calls complete (the `LLMResource`
   setting: a batch every 25 records or 2 s), the cost of crash-safe accounting.

Overhead is reported two ways: end-to-end (client time / raw time - 1, sensitive to
machine noise) and measured inside the client run (client wall time minus the
backend's own latency, over that latency), which isolates what the platform adds.

    python bench/llm_overhead.py [--n 50] [--max-tokens 32] [--hit-rounds 40]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from wse_platform.config import load_settings  # noqa: E402
from wse_platform.llm import LLMClient, LLMRequest  # noqa: E402
from wse_platform.llm.accounting import write_call_records  # noqa: E402
from wse_platform.llm.backends import BackendCall, attempt_seed  # noqa: E402
from wse_platform.llm.backends.embedded import EmbeddedBackend  # noqa: E402
from wse_platform.llm.validation import schema_of  # noqa: E402
from wse_platform.warehouse import Warehouse  # noqa: E402


class Beat(BaseModel):
    place: Literal["hall", "tower", "cellar", "garden"]
    tension: Literal["low", "medium", "high"]


def requests(n: int, max_tokens: int) -> list[LLMRequest]:
    return [LLMRequest(role="bench.beat", model="smollm2", output_model=Beat, sampling={"max_tokens": max_tokens},
                       messages=[{"role": "system", "content": "You plan story beats. Answer in JSON."},
                                 {"role": "user", "content": f"Beat {i}: the heroine reaches room {i}."}])
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--hit-rounds", type=int, default=40)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="wse-bench-"))
    settings = load_settings(overrides={"cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb")})
    reqs = requests(args.n, args.max_tokens)
    probe = LLMClient(settings, progress=False)
    states = [probe._prepare(r) for r in reqs]  # the exact backend calls the client will make
    calls = [BackendCall(model_id=s.model.model_id, messages=s.req.messages, sampling=s.sampling, n=1,
                         seed=attempt_seed(s.sampling.seed, s.request_key, 1), json_schema=schema_of(Beat)[0],
                         role=s.req.role, attempt=1) for s in states]

    backend: EmbeddedBackend = probe.backend("smollm2")
    backend.generate(calls[:1])  # load the model and warm up outside the timings

    t0 = time.perf_counter()
    raw = backend.generate(calls)
    t_raw = time.perf_counter() - t0

    client = LLMClient(settings, run_id="bench-miss", backends={"smollm2": backend}, progress=False)
    warehouse = Warehouse(settings.warehouse)
    warehouse.ensure_schema()
    t0 = time.perf_counter()
    results = client.complete_many(reqs)
    t_client_calls = time.perf_counter() - t0
    records = client.drain_call_records()
    t1 = time.perf_counter()
    write_call_records(warehouse, records)
    t_write = time.perf_counter() - t1
    t_client = t_client_calls + t_write
    backend_latency = sum(r["latency_s"] for r in records if not r["cache_hit"])
    first_attempts = [r for r in records if r["attempt"] == 1]
    same_text = sum(res.texts == rw.texts for res, rw in zip(results, raw) if res.attempts == 1)

    calls_before = backend.n_calls
    hits = 0
    t0 = time.perf_counter()
    for k in range(args.hit_rounds):
        hit_client = LLMClient(settings, run_id=f"bench-hit-{k}", backends={"smollm2": backend}, progress=False)
        hits += sum(r.cache_hit for r in hit_client.complete_many(reqs))
    t_hits = time.perf_counter() - t0
    assert backend.n_calls == calls_before, "cache hits must make no backend call"

    from resources.llm import FLUSH_EVERY, FLUSH_INTERVAL_S
    ended = 0
    t0 = time.perf_counter()
    for k in range(args.hit_rounds):  # records written once, when the step ends (the old way)
        end_client = LLMClient(settings, run_id=f"bench-end-{k}", backends={"smollm2": backend}, progress=False)
        ended += sum(r.cache_hit for r in end_client.complete_many(reqs))
        write_call_records(warehouse, end_client.drain_call_records())
    t_end = time.perf_counter() - t0
    sunk = 0
    t0 = time.perf_counter()
    for k in range(args.hit_rounds):
        sink_client = LLMClient(settings, run_id=f"bench-sink-{k}", backends={"smollm2": backend}, progress=False,
                                record_sink=lambda rows: write_call_records(warehouse, rows),
                                flush_every=FLUSH_EVERY, flush_interval_s=FLUSH_INTERVAL_S)
        sunk += sum(r.cache_hit for r in sink_client.complete_many(reqs))
        sink_client.flush_records()
    t_sink = time.perf_counter() - t0

    extra_attempts = len(records) - len(first_attempts)
    rows = [
        ("requests", f"{args.n} (JSON schema, max_tokens={args.max_tokens})"),
        ("valid results", f"{sum(r.ok for r in results)}/{args.n} ({extra_attempts} retry attempts)"),
        ("raw backend time", f"{t_raw:.2f} s ({t_raw / args.n * 1000:.0f} ms/request)"),
        ("client time (miss path)", f"{t_client_calls:.2f} s + warehouse write {t_write * 1000:.1f} ms"),
        ("backend latency inside client", f"{backend_latency:.2f} s"),
        ("overhead measured inside client", f"{(t_client - backend_latency) / backend_latency * 100:.2f} % "
                                            f"({(t_client - backend_latency) / len(records) * 1000:.2f} ms/call)"),
        ("end-to-end ratio client/raw", f"{t_client / t_raw:.3f} (noise-sensitive; includes retries)"),
        ("identical texts raw vs client", f"{same_text}/{sum(r.attempts == 1 for r in results)}"),
        ("cache hits", f"{hits} in {t_hits:.2f} s = {hits / t_hits:,.0f} calls/s"),
        ("cache hits + records written at step end", f"{ended} in {t_end:.2f} s = {ended / t_end:,.0f} calls/s"),
        ("cache hits + records written as calls complete", f"{sunk} in {t_sink:.2f} s = {sunk / t_sink:,.0f} calls/s "
                                                           f"(batches of {FLUSH_EVERY} or every {FLUSH_INTERVAL_S} s)"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)} | value")
    print(f"{'-' * width}-+-{'-' * 40}")
    for k, v in rows:
        print(f"{k.ljust(width)} | {v}")


if __name__ == "__main__":
    main()
