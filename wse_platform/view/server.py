"""`wse view`: a local, read-only web page to read what the models wrote.

Bound to 127.0.0.1 only; answers only requests whose Host is this machine's loopback name with the
port (a page on another site cannot reach it through DNS rebinding); GET and HEAD only; every page
is built from read-only queries and served with a Content-Security-Policy that allows no script and
no external resource. Each request opens the warehouse read-only for the time of its queries, so
runs writing cells are not blocked for longer than a page takes.
"""
from __future__ import annotations

import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from wse_platform.ui import STOP_SIGNALS
from wse_platform.view import pages
from wse_platform.warehouse import read_only_or_empty

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def allowed_hosts(port: int) -> set[str]:
    return {f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")}


def make_handler(warehouse: Path, port: int) -> type[BaseHTTPRequestHandler]:
    hosts = allowed_hosts(port)

    class Handler(BaseHTTPRequestHandler):
        server_version = "wse-view"
        sys_version = ""

        def log_message(self, fmt: str, *args) -> None:  # quiet: one line per error only
            pass

        def _send(self, status: int, body: str, head_only: bool = False) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in HEADERS.items():
                self.send_header(k, v)
            self.end_headers()
            if not head_only:
                self.wfile.write(data)

        def _handle(self, head_only: bool) -> None:
            if self.headers.get("Host") not in hosts:
                self._send(403, "forbidden: wse view answers only requests addressed to this machine's "
                                "loopback name", head_only)
                return
            url = urlsplit(self.path)
            route = pages.ROUTES.get(url.path.rstrip("/") or "/")
            if route is None:
                self._send(404, pages.page("not found", pages.empty(f"no page {url.path}")), head_only)
                return
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                with read_only_or_empty(warehouse) as con:
                    body = route(con, params)
            except Exception as err:  # noqa: BLE001 - one bad page must not stop the viewer
                print(f"wse view: {url.path}: {type(err).__name__}: {err}", file=sys.stderr)
                self._send(500, pages.page("error", pages.empty(f"{type(err).__name__}: {err}")), head_only)
                return
            self._send(200, body, head_only)

        def do_GET(self) -> None:  # noqa: N802
            self._handle(False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._handle(True)

        def _refuse(self) -> None:
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    return Handler


class ViewServer:
    """The viewer on 127.0.0.1:`port` (0: a free port) in a background thread."""

    def __init__(self, warehouse: Path, port: int = 0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(warehouse, 0))
        self.port = self.httpd.server_address[1]
        self.httpd.RequestHandlerClass = make_handler(warehouse, self.port)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> "ViewServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="wse-view", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(settings, port: int) -> int:
    try:
        server = ViewServer(settings.warehouse, port)
    except OSError as err:
        print(f"error: wse view cannot listen on 127.0.0.1:{port} ({err.strerror}); pick another port with "
              "`wse view --port N`", file=sys.stderr)
        return 2
    try:
        stop_on_signals()  # before the line that says it is up: a signal right after it must stop it
        print(f"wse view: {server.url} (read-only; Ctrl-C stops)", flush=True)
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        return 130
    finally:
        server.httpd.server_close()
    return 0


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """Ctrl-C, `kill` and a closed terminal stop the server, as they stop `wse ui`. SIGINT explicitly:
    a process started in the background of a non-interactive shell (`wse view &` in a script, a
    supervisor) inherits SIGINT ignored, and Python then installs no handler of its own."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
