"""Per-call CPU of our LLM client against the raw `openai` client, and the import time of the LLM path
(issue 24, item 4).

An instant OpenAI-compatible stub server runs in a subprocess on 127.0.0.1 (its CPU is not
counted); the bench process measures its own CPU time (`time.process_time`) per call:

  raw     openai.OpenAI, one call after another
  ours-1  LLMClient.complete, one call after another (caches off: every answer is still journaled,
          written to the cache and recorded, records flushed to a DuckDB warehouse in batches of 200)
  ours-b  LLMClient.complete_many over the same calls in batches of 32

Median of 3 interleaved runs. Then a latency run: the server answers after 0.2 s, 32 requests in
flight, 200 calls: raw AsyncOpenAI (32 tasks) vs LLMClient.complete_many (endpoint_concurrency 32).
Finally the import time of the LLM path (client + direct backend, and litellm for comparison),
each in a fresh interpreter.

    PYTHONPATH=. python bench/client_cost.py [--calls 300] [--cache]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MESSAGES = [{"role": "system", "content": "You judge whether two story endings match."},
            {"role": "user", "content": "Ending A: the ship sails home.\nEnding B: the ship returns to port.\n"
             "Same ending? Reply Y or N."}]


# ---- the stub server (subprocess) -------------------------------------------------------------
async def _serve(port_file: str, latency: float) -> None:
    body = json.dumps({"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "Y"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}}).encode()
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                if latency:
                    await asyncio.sleep(latency)
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


class Stub:
    def __init__(self, latency: float):
        self.port_file = tempfile.mktemp(prefix="stub-port-")
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", self.port_file, str(latency)])
        while not (Path(self.port_file).exists() and Path(self.port_file).read_text()):
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{Path(self.port_file).read_text()}/v1"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        Path(self.port_file).unlink(missing_ok=True)


# ---- the clients -----------------------------------------------------------------------------
def raw_calls(url: str, n: int) -> float:
    import openai
    client = openai.OpenAI(base_url=url, api_key="no-key", max_retries=0)
    client.chat.completions.create(model="stub", messages=MESSAGES, max_tokens=4)  # connect, warm
    t0 = time.process_time()
    for _ in range(n):
        r = client.chat.completions.create(model="stub", messages=MESSAGES, max_tokens=4, temperature=0.0)
        assert r.choices[0].message.content == "Y"
    return (time.process_time() - t0) / n * 1000


USE_CACHE = False  # --cache: ours with the cache on (lookups and cross-process claims per batch; all misses)


def our_client(url: str, tmp: Path, concurrency: int = 8):
    from wse_platform.config import settings_from_dict
    from wse_platform.llm import LLMClient
    from wse_platform.llm.accounting import write_call_records
    from wse_platform.warehouse import Warehouse

    settings = settings_from_dict({
        "cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb"),
        "models": {"judge": {"backend": "litellm", "model_id": "openai/stub", "api_base": url,
                             "endpoint_concurrency": concurrency, "sampling": {"temperature": 0.0, "max_tokens": 4},
                             "extra": {"structured_output": "prompt", "max_retries": 0}}}})
    wh = Warehouse(settings.warehouse)
    wh.ensure_schema()
    return LLMClient(settings, run_id=f"bench-{time.time_ns()}", use_cache=USE_CACHE, progress=False,
                     record_sink=lambda rows: write_call_records(wh, rows), flush_every=200, flush_interval_s=2.0)


def requests(n: int, salt: str):
    from wse_platform.llm import LLMRequest
    return [LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                       messages=[MESSAGES[0], {"role": "user", "content": f"{MESSAGES[1]['content']} ({salt}{i})"}])
            for i in range(n)]


def ours_calls(url: str, n: int, tmp: Path, batch: int) -> float:
    client = our_client(url, tmp)
    assert client.complete(requests(1, "warm")[0]).output == "Y"
    reqs = requests(n, f"{batch}-{time.time_ns()}-")
    t0 = time.process_time()
    if batch == 1:
        for r in reqs:
            assert client.complete(r).output == "Y"
    else:
        for i in range(0, n, batch):
            assert all(r.output == "Y" for r in client.complete_many(reqs[i:i + batch]))
    client.flush_records()
    ms = (time.process_time() - t0) / n * 1000
    client.close()
    return ms


def latency_run(url: str, tmp: Path, n: int = 200, inflight: int = 32) -> tuple[float, float]:
    import openai

    async def raw() -> float:
        client = openai.AsyncOpenAI(base_url=url, api_key="no-key", max_retries=0)
        sem = asyncio.Semaphore(inflight)

        async def one() -> None:
            async with sem:
                await client.chat.completions.create(model="stub", messages=MESSAGES, max_tokens=4)
        await one()
        t0 = time.monotonic()
        await asyncio.gather(*(one() for _ in range(n)))
        took = time.monotonic() - t0
        await client.close()
        return took

    raw_s = asyncio.run(raw())
    client = our_client(url, tmp, concurrency=inflight)
    client.complete(requests(1, "warm")[0])
    reqs = requests(n, f"lat-{time.time_ns()}-")
    t0 = time.monotonic()
    assert all(r.output == "Y" for r in client.complete_many(reqs))
    ours_s = time.monotonic() - t0
    client.close()
    return raw_s, ours_s


def import_time(stmt: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    best = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", stmt], check=True, env=env)
        best.append(time.monotonic() - t0)
    return statistics.median(best)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--serve", nargs=2, metavar=("PORT_FILE", "LATENCY"))
    ap.add_argument("--cache", action="store_true", help="our client with the cache on (every call a miss)")
    args = ap.parse_args()
    global USE_CACHE
    USE_CACHE = args.cache
    if args.serve:
        asyncio.run(_serve(args.serve[0], float(args.serve[1])))
        return
    os.environ.setdefault("WSE_SLOTS_DIR", tempfile.mkdtemp(prefix="wse-bench-slots-"))
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    rows: dict[str, list[float]] = {"raw": [], "ours-1": [], "ours-b": []}
    stub = Stub(0.0)
    try:
        with tempfile.TemporaryDirectory() as d:
            for k in range(3):
                rows["raw"].append(raw_calls(stub.url, args.calls))
                rows["ours-1"].append(ours_calls(stub.url, args.calls, Path(d) / f"one{k}", batch=1))
                rows["ours-b"].append(ours_calls(stub.url, args.calls, Path(d) / f"batch{k}", batch=32))
    finally:
        stub.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"CPU per call, median of 3 interleaved runs of {args.calls} calls (ms):")
    for k, v in rows.items():
        print(f"  {k:7s} {med[k]:6.2f}   runs {', '.join(f'{x:.2f}' for x in v)}")
    for k in ("ours-1", "ours-b"):
        print(f"  {k} - raw = {med[k] - med['raw']:+.2f} ms per call, ratio {med[k] / med['raw']:.2f}")
    slow = Stub(0.2)
    try:
        with tempfile.TemporaryDirectory() as d:
            raw_s, ours_s = latency_run(slow.url, Path(d))
    finally:
        slow.close()
    print(f"latency run (0.2 s per answer, 32 in flight, 200 calls): raw {raw_s:.2f} s, ours {ours_s:.2f} s "
          f"(ideal {200 / 32 * 0.2:.2f} s)")
    direct = import_time("import wse_platform.llm.client, wse_platform.llm.backends.openai_http, aiohttp")
    lite = import_time("import wse_platform.llm.client, wse_platform.llm.backends.litellm_backend as b; b._litellm()")
    base = import_time("pass")
    print(f"import of the LLM path (fresh interpreter, median of 3, minus {base:.2f} s for python itself): "
          f"direct {direct - base:.2f} s, with litellm {lite - base:.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
