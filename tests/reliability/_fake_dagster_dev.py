"""A stand-in for `dagster dev`, for the `wse ui` tests: a real process tree, light enough for the suite.

It serves a "webserver" on `-p PORT` (every GraphQL document it receives, by GET or POST, is
"executed": appended to $FAKE_DEV_RECORD with the method and Origin; a WebSocket on /graphql
speaks the graphql-ws subprotocol and echoes), and starts a "daemon" child that ignores SIGTERM and
SIGINT, as a stuck service would: only a signal to the whole process group (or SIGKILL) stops it.
Both give up by themselves after two minutes, so a failed test leaves nothing running for long.
"""
import json
import os
import subprocess
import sys
import threading
from urllib.parse import parse_qsl

import uvicorn

PORT = int(sys.argv[sys.argv.index("-p") + 1])
RECORD = os.environ["FAKE_DEV_RECORD"]
LIFETIME_S = 120

daemon = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                           f"time.sleep({LIFETIME_S})"])
with open(RECORD + ".pids", "w") as f:
    json.dump({"dev": os.getpid(), "daemon": daemon.pid, "port": PORT}, f)
threading.Timer(LIFETIME_S, lambda: os._exit(3)).start()


def _record(entry: dict) -> None:
    with open(RECORD, "a") as f:
        f.write(json.dumps(entry) + "\n")


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept", "subprotocol": "graphql-ws"})
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "echo:" + (msg.get("text") or "")})
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    data = dict(parse_qsl(scope["query_string"].decode()))
    if body and "json" in headers.get("content-type", ""):
        data = json.loads(body)
    if "query" in data:
        _record({"method": scope["method"], "query": data["query"], "origin": headers.get("origin")})
    out = json.dumps({"data": {"executed": data.get("query")}}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
