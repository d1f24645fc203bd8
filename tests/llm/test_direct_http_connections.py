"""The direct OpenAI-compatible path keeps its connections alive while a client works and closes
them with the client (issue 24 item 4: at 256 in flight the transport's own CPU per call mattered;
bench/fleet_capacity.py measures it). Before, the httpx pools of a closed client stayed connected
to the server until the process ended."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest


class KeepAliveServer:
    """HTTP/1.1 with keep-alive; counts the connections open now and the requests per connection."""

    def __init__(self) -> None:
        self.open = self.connections = self.requests = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.open += 1
                    server.connections += 1

            def finish(self) -> None:
                with server.lock:
                    server.open -= 1
                super().finish()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
                time.sleep(0.05)
                data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": "Y"}}],
                                   "usage": {"prompt_tokens": len(body["messages"]), "completion_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_connections_are_reused_within_the_limit_and_closed_with_the_client(tmp_path):
    srv = KeepAliveServer()
    try:
        settings = make_settings(tmp_path, judge={
            "backend": "litellm", "model_id": "openai/local-judge", "api_base": srv.url, "endpoint_concurrency": 4,
            "sampling": {"temperature": 0.0, "max_tokens": 4}, "extra": {"structured_output": "prompt"}})
        client = LLMClient(settings, use_cache=False, progress=False)
        reqs = [LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                           messages=[{"role": "user", "content": f"Same ending {i}? Y or N."}]) for i in range(24)]
        assert all(r.ok for r in client.complete_many(reqs))
        assert srv.requests == 24
        assert 1 <= srv.connections <= 4 + 4           # kept alive: at most the endpoint limit (+4) connections
        assert srv.open >= 1                            # still connected while the client lives
        client.close()
        deadline = time.monotonic() + 5
        while srv.open and time.monotonic() < deadline:
            time.sleep(0.02)
        assert srv.open == 0, f"{srv.open} connection(s) still open after LLMClient.close()"
        # the next client on the same endpoint connects again
        client2 = LLMClient(settings, use_cache=False, progress=False)
        assert client2.complete(reqs[0]).ok
        client2.close()
    finally:
        srv.close()
