"""A minimal OpenAI-compatible HTTP server for tests, used ONLY to inject what the real
local server (llama-cpp-python's) cannot produce: a Qwen3-style `<think>` block, a 429
rate limit, a `length` finish, a 401, and the faults of a dying server (issue 23): a socket that
accepts and never answers (`hang`), a 200 that trickles one byte at a time (`trickle`), an HTML
page with status 200 (`html`), `choices: []` (`no_choices`), a `content_filter` finish.
Everything else is tested against the real server.

`delay_s` holds every answer that long; `max_in_flight` is the most requests it held at once.

Each request pops the next scripted reply (the last one repeats); every request body is
kept in `requests` so a test can check what was sent (e.g. the reasoning flag).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def reply(content: str = "Y", finish: str = "stop", status: int = 200, reasoning: str | None = None,
          headers: dict[str, str] | None = None, fault: str | None = None) -> dict[str, Any]:
    return {"content": content, "finish": finish, "status": status, "reasoning": reasoning, "headers": headers or {},
            "fault": fault}


class InjectingServer:
    def __init__(self, replies: list[dict[str, Any]], delay_s: float = 0.0, trickle_s: float = 1.0):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.delay_s, self.trickle_s = delay_s, trickle_s
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # /v1/models
                self._send(200, {"object": "list", "data": [{"id": "test", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    r = server.replies[0] if len(server.replies) == 1 else server.replies.pop(0)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                finally:
                    # held until its answer starts to go out: once the bytes are out the client may free
                    # its slot and send the next request before this thread runs again, so counting down
                    # after the write would count a finished request as still in flight
                    with server._lock:
                        server.in_flight -= 1
                self._answer(r, body)

            def _answer(self, r: dict[str, Any], body: dict[str, Any]) -> None:
                fault = r.get("fault")
                if fault == "hang":  # accepts, reads the request, never answers
                    server._stop.wait(60)
                    return
                if fault == "html":
                    self._raw(200, b"<html><body>502 Bad Gateway (proxy)</body></html>", "text/html")
                    return
                if fault == "trickle":  # headers at once, then one byte per trickle_s
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    for _ in range(1000):
                        if server._stop.wait(server.trickle_s):
                            return
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
                    return
                if fault == "no_choices":
                    self._send(200, {"id": "x", "object": "chat.completion", "choices": [],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": 0}})
                    return
                if r["status"] != 200:
                    self._send(r["status"], {"error": {"message": f"injected {r['status']}", "type": "injected",
                                                       "code": r["status"]}}, r["headers"])
                    return
                message: dict[str, Any] = {"role": "assistant", "content": r["content"]}
                if r["reasoning"] is not None:
                    message["reasoning_content"] = r["reasoning"]
                n = int(body.get("n") or 1)
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": i, "message": message, "finish_reason": r["finish"]} for i in range(n)],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                })

            def _raw(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 128
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "InjectingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
