"""A minimal OpenAI-compatible HTTP server for tests, used ONLY to inject what the real
local server (llama-cpp-python's) cannot produce: a Qwen3-style `<think>` block, a 429
rate limit, a `length` finish, a 401. Everything else is tested against the real server.

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
          headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {"content": content, "finish": finish, "status": status, "reasoning": reasoning, "headers": headers or {}}


class InjectingServer:
    def __init__(self, replies: list[dict[str, Any]]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
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
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "InjectingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
