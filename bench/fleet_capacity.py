"""How many calls per second can this machine drive through the fleet bench's stack? (issue 24 item 5)

At 256 slots and a lognormal service time (median 0.4 s, sigma 0.8: mean 0.55 s) a busy fleet
completes 256 / 0.55 = ~465 sequences per second; on this machine the simulated server, our client
and the Dagster runs share the same cores. This bench measures each part's CPU per call:

  server  `bench/fleet_server.py` with an instant service (median 1 ms) driven by a minimal aiohttp
          load generator (64 in flight): calls/s, and the server process's CPU per call
          (/proc/<pid>/stat, user + system), with a WSE Story Agent JSON schema in every request
  raw     the raw `openai.AsyncOpenAI` client with the same requests, 256 in flight: its CPU per call
          (the reference: nothing validated, cached or recorded) and the server's
  client  our `LLMClient.complete_many` (the fleet bench's model config: litellm backend on
          `hosted_vllm/`: the direct aiohttp path, cache on as in the bench, records into DuckDB in the batches a Dagster run writes) against the same
          instant server, 256 in flight: calls/s end to end, the client's CPU per call
          (time.process_time) and the server's

The ceiling of the stack is cores / (server + client CPU per call), before any Dagster or
warehouse work. Run from the repository root (the machine's load average is printed with it):

    PYTHONPATH=. python bench/fleet_capacity.py [--calls 2000]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK   # utime + stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(slots: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fleet_server.py"), "--port", str(port),
                             "--slots", str(slots), "--median", "0.001", "--sigma", "0.1"])
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the fleet server did not start")
            time.sleep(0.1)


def story_schema() -> dict:
    from wse_platform.llm.validation import schema_of
    from wse_platform.wse.schemas import StoryAgentOutput
    return schema_of(StoryAgentOutput)[0]


def messages(i: int) -> list[dict]:
    return [{"role": "system", "content": "You are the Story Agent of an interactive story. " * 8},
            {"role": "user", "content": f"Step {i}. The player opens the door. " * 20}]


async def drive_raw(port: int, calls: int, in_flight: int, schema: dict) -> float:
    import aiohttp
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    sem = asyncio.Semaphore(in_flight)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as http:
        async def one(i: int) -> None:
            body = {"model": "fleet", "messages": messages(i), "max_tokens": 256,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}}
            async with sem, http.post(url, json=body) as resp:
                await resp.read()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return time.perf_counter() - t0


def run_server(calls: int) -> dict:
    proc, port = start_server(1024)
    try:
        schema = story_schema()
        asyncio.run(drive_raw(port, 64, 16, schema))           # warm-up
        c0 = proc_cpu(proc.pid)
        wall = asyncio.run(drive_raw(port, calls, 64, schema))
        server = proc_cpu(proc.pid) - c0
    finally:
        proc.terminate()
        proc.wait(10)
    return {"part": "server alone", "calls": calls, "wall_s": round(wall, 2), "calls_per_s": round(calls / wall),
            "server_cpu_ms_per_call": round(1000 * server / calls, 2)}


def run_raw_client(calls: int, in_flight: int) -> dict:
    """The raw `openai.AsyncOpenAI` client, `in_flight` requests at once, the same bodies: the reference
    for our client's CPU per call (nothing validated, cached or recorded)."""
    import openai

    proc, port = start_server(1024)
    try:
        schema = story_schema()
        fmt = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}

        async def drive(n: int, tag: str) -> float:
            client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="no-key", max_retries=0,
                                        timeout=600.0)
            sem = asyncio.Semaphore(in_flight)

            async def one(i: int) -> None:
                async with sem:
                    r = await client.chat.completions.create(
                        model="fleet", messages=messages(i) + [{"role": "user", "content": f"{tag} {i}"}],
                        max_tokens=256, temperature=0.7, response_format=fmt)
                    json.loads(r.choices[0].message.content)
            t = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            wall = time.perf_counter() - t
            await client.close()
            return wall

        asyncio.run(drive(64, "warm"))
        c0, s0 = time.process_time(), proc_cpu(proc.pid)
        wall = asyncio.run(drive(calls, "run"))
        mine, server = time.process_time() - c0, proc_cpu(proc.pid) - s0
    finally:
        proc.terminate()
        proc.wait(10)
    return {"part": "raw openai client + server", "calls": calls, "in_flight": in_flight, "wall_s": round(wall, 2),
            "calls_per_s": round(calls / wall), "client_cpu_ms_per_call": round(1000 * mine / calls, 2),
            "server_cpu_ms_per_call": round(1000 * server / calls, 2)}


def run_client(calls: int, in_flight: int) -> dict:
    from wse_platform.config import settings_from_dict
    from wse_platform.llm import LLMClient
    from wse_platform.llm.accounting import write_call_records
    from wse_platform.llm.types import LLMRequest
    from wse_platform.warehouse import Warehouse
    from wse_platform.wse.schemas import StoryAgentOutput

    proc, port = start_server(1024)
    tmp = Path(tempfile.mkdtemp(prefix="wse-fleet-capacity-"))
    try:
        model = {"backend": "litellm", "model_id": "hosted_vllm/fleet", "api_base": f"http://127.0.0.1:{port}/v1",
                 "endpoint_concurrency": in_flight, "sampling": {"temperature": 0.7, "max_tokens": 256},
                 "extra": {"timeout_s": 600, "max_retries": 2}}
        settings = settings_from_dict({"models": {"fleet": model}, "cache_dir": str(tmp / "cache"),
                                       "warehouse_path": str(tmp / "wh.duckdb"),
                                       "concurrency": {"embedded": 1, "litellm": 8, "vllm": 1}})
        wh = Warehouse(settings.warehouse)
        from resources.llm import FLUSH_EVERY, FLUSH_INTERVAL_S   # the batches a Dagster run's client writes
        client = LLMClient(settings, progress=False, record_sink=lambda rows: write_call_records(wh, rows),
                           flush_every=FLUSH_EVERY, flush_interval_s=FLUSH_INTERVAL_S)

        def reqs(n: int, tag: str) -> list[LLMRequest]:
            return [LLMRequest(role="wse.story_agent", model="fleet", messages=messages(i) + [
                {"role": "user", "content": f"{tag} {i}"}], output_model=StoryAgentOutput) for i in range(n)]
        client.complete_many(reqs(64, "warm"))
        c0, s0, t0 = time.process_time(), proc_cpu(proc.pid), time.perf_counter()
        out = client.complete_many(reqs(calls, "run"))
        wall = time.perf_counter() - t0
        client.flush_records()
        mine, server = time.process_time() - c0, proc_cpu(proc.pid) - s0
        client.close()
        ok = sum(r.ok for r in out)
    finally:
        proc.terminate()
        proc.wait(10)
    return {"part": "our client + server", "calls": calls, "valid": ok, "in_flight": in_flight,
            "wall_s": round(wall, 2), "calls_per_s": round(calls / wall),
            "client_cpu_ms_per_call": round(1000 * mine / calls, 2),
            "server_cpu_ms_per_call": round(1000 * server / calls, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--in-flight", type=int, default=256)
    args = ap.parse_args()
    print(json.dumps({"load_average": os.getloadavg(), "cores": os.cpu_count()}), flush=True)
    server = run_server(args.calls)
    print(json.dumps(server), flush=True)
    raw = run_raw_client(args.calls, args.in_flight)
    print(json.dumps(raw), flush=True)
    client = run_client(args.calls, args.in_flight)
    print(json.dumps(client), flush=True)
    print(json.dumps({"ours_over_raw_client_cpu": round(client["client_cpu_ms_per_call"]
                                                        / raw["client_cpu_ms_per_call"], 2)}), flush=True)
    per_call = client["client_cpu_ms_per_call"] + client["server_cpu_ms_per_call"]
    cores = os.cpu_count() or 1
    print(json.dumps({"ceiling_calls_per_s_on_idle_cores": round(1000 * cores / per_call),
                      "needed_at_256_slots_median_0.4": round(256 / (0.4 * 2.718281828 ** (0.8 ** 2 / 2))),
                      "load_average_after": os.getloadavg()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
