"""`wse ui` behind a guard, and stopped whole by a signal to its own process (issue 23 item 2, issue 21).

Before: the Dagster webserver answered on the user's port itself: a GraphQL mutation sent as a GET
from another origin deleted a run, any Host was answered (DNS rebinding), and SIGTERM to `wse ui`
left `dagster dev` serving with its daemon. Here `wse ui` runs as a real process whose `dagster
dev` is a stand-in process tree (`_fake_dagster_dev.py`: a webserver that executes every GraphQL
document it receives, and a "daemon" child that ignores SIGTERM); the requests are real HTTP and
WebSocket requests to the user's port, the signal goes to the `wse ui` process alone.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, write_config
from wse_platform.ui_guard import refusal

FAKE = Path(__file__).with_name("_fake_dagster_dev.py")
DRIVER = r"""
import subprocess, sys
FAKE = sys.argv.pop(1)
class Rewriting(subprocess.Popen):  # `[prefix] python -m dagster dev ... -p PORT` -> the stand-in on that port
    def __init__(self, cmd, *a, **kw):
        at = next((i for i in range(len(cmd)) if list(cmd[i:i + 3]) == ["-m", "dagster", "dev"]), None)
        if at is not None:
            cmd = [*cmd[:at - 1], sys.executable, FAKE, "-p", cmd[cmd.index("-p", at) + 1]]
        super().__init__(cmd, *a, **kw)
subprocess.Popen = Rewriting
try:
    from wse_platform import ui
    ui.KILL_AFTER_S = 1.0  # the stuck "daemon" is SIGKILLed after 1 s instead of 5
except ImportError:
    pass
from wse_platform.cli import main
sys.exit(main(sys.argv[1:]))
"""
MUTATION = 'mutation { deleteRun(runId: "r1") { __typename } }'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, method: str = "GET", headers: dict | None = None, body: bytes | None = None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _start_ui(tmp_path):
    """`wse ui` as its own process, the stand-in `dagster dev` below it; once it answers through the
    user's port: (process, user's port, plot port, record file, pids of the stand-in tree)."""
    port, plots = _free_port(), _free_port()
    cfg = write_config(tmp_path, plots_port=plots)
    record = tmp_path / "executed.jsonl"
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "dh"), PYTHONPATH=str(REPO), FAKE_DEV_RECORD=str(record),
               DAGSTER_DISABLE_TELEMETRY="1")
    (tmp_path / "dh").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(FAKE), "--config", str(cfg), "ui", "--port", str(port)],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while time.time() < deadline:  # up once the stand-in answers through the user's port
        try:
            if _request(f"http://127.0.0.1:{port}/server_info")[0] == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
        time.sleep(0.2)
    return proc, port, plots, record, json.loads(Path(f"{record}.pids").read_text())


def _cleanup(proc, pids) -> None:
    for pid in (proc.pid, pids.get("dev"), pids.get("daemon")):
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_wse_ui_refuses_foreign_pages_and_stops_everything_on_a_signal(tmp_path, sig):
    proc, port, plots, record, pids = _start_ui(tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        own = {"Origin": base, "Content-Type": "application/json"}
        evil = {"Origin": "http://evil.example.com", "Content-Type": "application/json"}

        # refused: a mutation as a GET (from anywhere), a cross-origin POST mutation (JSON, or a form-like
        # text/plain POST with the document in the URL), a foreign Host (DNS rebinding), a cross-origin fetch
        q = urllib.parse.urlencode({"query": MUTATION})
        assert _request(f"{base}/graphql?{q}")[0] == 405
        assert _request(f"{base}/graphql?{q}", headers={"Origin": "http://evil.example.com"})[0] in (403, 405)
        assert _request(f"{base}/graphql", "POST", evil, json.dumps({"query": MUTATION}).encode())[0] == 403
        assert _request(f"{base}/graphql?{q}", "POST", {"Origin": "http://evil.example.com",
                                                        "Content-Type": "text/plain"}, b"")[0] == 403
        assert _request(f"{base}/graphql?query=%7Bversion%7D", headers={"Host": f"evil.example.com:{port}"})[0] == 403
        assert _request(f"{base}/graphql", "POST", {"Host": f"attacker.test:{port}", **own},
                        json.dumps({"query": "{ instance { info } }"}).encode())[0] == 403
        assert _request(f"{base}/graphql?query=%7Bversion%7D", headers={"Origin": "http://localhost:8080"})[0] == 403
        # passed: the UI's own query and mutation (POST, same origin), a plain GET query, localhost names
        assert _request(f"{base}/graphql", "POST", own, json.dumps({"query": "{ version }"}).encode())[0] == 200
        assert _request(f"{base}/graphql", "POST", own, json.dumps({"query": MUTATION}).encode())[0] == 200
        assert _request(f"{base}/graphql?query=%7Bversion%7D", headers={"Host": f"localhost:{port}"})[0] == 200
        executed = [json.loads(line) for line in record.read_text().splitlines()]
        assert [(e["method"], e["query"]) for e in executed] == [
            ("POST", "{ version }"), ("POST", MUTATION), ("GET", "{version}")]

        # WebSockets (the UI's subscriptions): the UI's own origin passes with its subprotocol, others are refused
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect
        with connect(f"ws://127.0.0.1:{port}/graphql", origin=base, subprotocols=["graphql-ws"], open_timeout=10) as ws:
            assert ws.subprotocol == "graphql-ws"
            ws.send('{"type": "connection_init"}')
            assert ws.recv(timeout=10) == 'echo:{"type": "connection_init"}'
        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://127.0.0.1:{port}/graphql", origin="http://evil.example.com", subprotocols=["graphql-ws"],
                    open_timeout=10)
        assert refused.value.response.status_code == 403
        assert _request(f"http://127.0.0.1:{plots}/0123456789abcdef.png")[0] == 404  # the plot server is up

        # the signal to the `wse ui` process alone stops the webserver, the stuck daemon, the guard and the plots
        os.kill(proc.pid, sig)
        assert proc.wait(timeout=30) == 128 + sig, proc.stderr.read()
        assert "wse ui: stopped" in proc.stderr.read()
        assert not _alive(pids["dev"]) and not _alive(pids["daemon"])
        assert _closed(port) and _closed(pids["port"]) and _closed(plots)
    finally:
        _cleanup(proc, pids)


def test_wse_ui_killed_with_sigkill_still_stops_the_webserver(tmp_path):
    """`kill -9` cannot be handled by `wse ui`: the kernel sends `dagster dev` SIGTERM (PR_SET_PDEATHSIG),
    which stops it; the real one then stops its webserver and daemon (the stand-in's daemon ignores it)."""
    proc, port, plots, record, pids = _start_ui(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.time() + 20
        while _alive(pids["dev"]) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(pids["dev"])
        assert _closed(port) and _closed(pids["port"]) and _closed(plots)
    finally:
        _cleanup(proc, pids)


@pytest.mark.parametrize("method,query,headers,expected", [
    ("GET", "", {"Host": "127.0.0.1:3000"}, None),
    ("GET", "", {"Host": "LOCALHOST:3000"}, None),
    ("GET", "", {"Host": "[::1]:3000"}, None),
    ("GET", "", {"Host": "127.0.0.1:3001"}, 403),                    # another port's name
    ("GET", "", {"Host": "127.0.0.1.nip.io:3000"}, 403),
    ("GET", "", {}, 403),                                            # no Host at all
    ("GET", "query=%7Bversion%7D", {"Host": "127.0.0.1:3000"}, None),
    ("GET", "query=mutation%7Bx%7D", {"Host": "127.0.0.1:3000"}, 405),
    ("HEAD", "query=subscription%7Bx%7D", {"Host": "127.0.0.1:3000"}, 405),
    ("GET", "query=%7Bversion", {"Host": "127.0.0.1:3000"}, 400),    # does not parse: not passed on
    ("GET", "query=%7Ba%7D&query=mutation%7Bx%7D", {"Host": "127.0.0.1:3000"}, 405),
    ("POST", "", {"Host": "127.0.0.1:3000", "Origin": "http://127.0.0.1:3000"}, None),
    ("POST", "", {"Host": "127.0.0.1:3000", "Origin": "http://localhost:3000"}, None),
    ("POST", "", {"Host": "127.0.0.1:3000", "Origin": "null"}, 403),  # sandboxed frame, file:// page
    ("POST", "", {"Host": "127.0.0.1:3000", "Origin": "http://127.0.0.1:8888"}, 403),
    ("POST", "", {"Host": "127.0.0.1:3000", "Sec-Fetch-Site": "cross-site"}, 403),
    ("POST", "", {"Host": "127.0.0.1:3000"}, None),                   # a program, not a browser page
])
def test_guard_policy(method, query, headers, expected):
    got = refusal(method, query, list(headers.items()), 3000)
    assert (got and got[0]) == expected, got
