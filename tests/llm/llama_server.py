"""Start llama-cpp-python's real OpenAI-compatible server (`python -m llama_cpp.server`) with
the embedded GGUF on a free 127.0.0.1 port, as the litellm tests' stand-in for vLLM/a provider."""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SERVER_DEPS = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
MISSING = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(gguf: Path, log_path: Path, n_ctx: int = 1024, n_threads: int = 1) -> tuple[subprocess.Popen, str]:
    """(process, base url) of a server that answers /v1/models; raises if it does not start."""
    port = free_port()
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads)],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"llama_cpp.server did not start (exit {proc.poll()}); see {log_path}")
            time.sleep(0.3)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
