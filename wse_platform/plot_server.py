"""Plots where a Dagster user looks first: inline on the asset's Overview page.

The Dagster UI renders a markdown metadata entry inline only when it is shorter than 1,000
characters (longer ones become a "[Show Markdown]" dialog), and a PNG embedded as a data URI is
always longer. So each plot is published as a content-addressed copy (`<sha>.png`, so an older
materialization keeps showing *its* plot) in one folder, `<artifacts>/ui_plots`, which `wse ui`
serves read-only on 127.0.0.1 next to the Dagster UI; the metadata entry is then a short
`![plot](http://127.0.0.1:<port>/<sha>.png)`. Only `<hex>.png` regular files of that folder are
served: a symbolic link (e.g. `ln -s /etc/shadow <hex>.png`), a FIFO or anything else that is not a
regular file is refused (opened with O_NOFOLLOW | O_NONBLOCK, checked with fstat), as is a request
whose Host is not this machine's loopback name with the server's port (DNS rebinding).
"""
from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import stat
import threading
from pathlib import Path

SERVED_DIR = "ui_plots"  # under the artifacts folder
DEFAULT_PORT = 3071
_NAME = re.compile(r"^/([0-9a-f]{16,64}\.png)$")


def served_dir(artifacts: Path) -> Path:
    return Path(artifacts) / SERVED_DIR


def plot_url(port: int, name: str) -> str:
    return f"http://127.0.0.1:{port}/{name}"


def publish(png: Path, artifacts: Path) -> str:
    """Copy `png` into the served folder under its content hash; return the file name."""
    data = Path(png).read_bytes()
    name = hashlib.sha256(data).hexdigest()[:24] + ".png"
    target = served_dir(artifacts) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        shutil.copyfile(png, tmp)
        os.replace(tmp, target)  # parallel runs publishing the same plot write the same bytes
    return name


def read_plot(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file itself (not a link, FIFO, device, folder), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # missing, or a symbolic link (ELOOP)
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


class _Handler(http.server.BaseHTTPRequestHandler):
    directory: Path  # set on the subclass built by `start`

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        from wse_platform.ui_guard import allowed_hosts
        if (self.headers.get("Host") or "").lower() not in allowed_hosts(self.server.server_address[1]):
            self.send_error(403, "not this machine's plot server")
            return
        m = _NAME.match(self.path.split("?", 1)[0])
        body = read_plot(self.directory / m.group(1)) if m else None
        if body is None:
            self.send_error(404, "no such plot")
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "public, max-age=31536000, immutable")  # content-addressed
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet: the UI asks for many images
        pass


def start(artifacts: Path, port: int = DEFAULT_PORT) -> http.server.ThreadingHTTPServer:
    """Serve the published plots on 127.0.0.1:`port` (0 = any free port) from a daemon thread.
    Raises OSError when the port is taken."""
    handler = type("PlotHandler", (_Handler,), {"directory": served_dir(artifacts)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="wse-plot-server", daemon=True).start()
    return server
