"""`wse ui`: the Dagster UI behind a guard, the plot server, and one way to stop all of it.

What runs (all of it started, and stopped, by the `wse ui` process):
- `dagster dev` (which runs the webserver, the daemon and the code server) in a process group of its
  own, its webserver on an internal loopback port that browsers refuse to fetch from
  (`ui_guard.INTERNAL_PORTS`);
- the guard proxy (`wse_platform.ui_guard`) on the user's port, a thread of this process;
- the plot server (`wse_platform.plot_server`), a thread of this process.

Stopping: SIGINT (Ctrl-C), SIGTERM or SIGHUP sent to the `wse ui` process alone stops everything:
SIGTERM to `dagster dev` (it stops its webserver and daemon the way Ctrl-C does), then, after
`GRACE_S`, SIGTERM and finally SIGKILL to whatever is left in its process group (and of the process
tree noted before, should a child have left the group); a second signal skips the grace period.
The guard and the plot server stop first, so no request reaches a webserver that is going away.
`wse ui` killed with SIGKILL cannot do that; `dagster dev` then gets SIGTERM from the kernel
(PR_SET_PDEATHSIG, Linux) and stops its webserver and daemon itself.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from wse_platform import ui_guard

# `dagster dev` gets this long to stop its services before they are signalled directly (it took
# 18-20 s on a loaded 2-core machine)
GRACE_S = 30.0
KILL_AFTER_S = 5.0    # then SIGTERM to the group, and SIGKILL after this long
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def dagster_dev_command(root: Path, internal_port: int) -> list[str]:
    return [sys.executable, "-m", "dagster", "dev", "-w", str(root / "workspace.yaml"), "-h", "127.0.0.1",
            "-p", str(internal_port)]


# Run a command so that it gets SIGTERM when the process that started it dies, even by SIGKILL
# (Linux prctl PR_SET_PDEATHSIG, kept across exec): `kill -9` of `wse ui` still stops `dagster dev`.
_PDEATHSIG = ("import ctypes, os, signal, sys\n"
              "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
              "if os.getppid() != int(sys.argv[1]): sys.exit(143)\n"  # the parent died before prctl
              "os.execv(sys.argv[2], sys.argv[2:])")


def with_parent_death_signal(cmd: list[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-c", _PDEATHSIG, str(os.getpid()), *cmd]


def start_plot_server(settings):
    """Serve the published plots so they show inline on the assets' Overview pages (see
    `wse_platform.plot_server`); a taken port only costs the inline view, not the UI."""
    from wse_platform import plot_server
    if not settings.plots_port:
        return None
    try:
        server = plot_server.start(settings.artifacts, settings.plots_port)
    except OSError as e:
        print(f"note: plots will not show inline: port {settings.plots_port} is not free ({e}); "
              "set plots_port in the config to another port (or 0 to silence this)", file=sys.stderr)
        return None
    print(f"plots: served from {plot_server.served_dir(settings.artifacts)} on "
          f"http://127.0.0.1:{settings.plots_port}/")
    return server


class _Signals:
    """Stop signals turned into flags (no KeyboardInterrupt in the middle of a shutdown)."""

    def __init__(self):
        self.received: list[int] = []
        self._old = {}

    def __enter__(self):
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, lambda s, _f: self.received.append(s))
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def run(settings, port: int, env: dict[str, str], root: Path) -> int:
    """Start the guarded UI, wait until it stops or a stop signal arrives, stop everything."""
    try:
        internal = ui_guard.free_internal_port()
        guard = ui_guard.GuardServer(port, internal)
    except OSError as e:
        print(f"error: wse ui cannot listen on 127.0.0.1:{port}: {e}" if "browser-blocked" not in str(e)
              else f"error: {e}", file=sys.stderr)
        return 2
    cmd = dagster_dev_command(root, internal)
    with _Signals() as sigs:
        print("running:", " ".join(cmd))
        proc = subprocess.Popen(with_parent_death_signal(cmd), env=env, cwd=root, start_new_session=True)
        plots = start_plot_server(settings)
        guard.start()
        print(f"wse ui: open http://127.0.0.1:{guard.port}/ (a guard in front of the Dagster webserver: this "
              f"machine's pages only, no mutations over GET; the webserver's own port {internal} is one "
              "browsers refuse to open)", flush=True)
        try:
            while proc.poll() is None and not sigs.received:
                time.sleep(0.2)
        finally:
            guard.stop()
            if plots is not None:
                plots.shutdown()
                plots.server_close()
            rc = stop_tree(proc, sigs)
    if sigs.received:
        print("\nwse ui: stopped", file=sys.stderr)
        return 128 + sigs.received[0]
    return rc


def _procs() -> dict[int, tuple[str, int, int, str]]:
    """{pid: (state, ppid, process group, start time)} from Linux /proc (empty elsewhere)."""
    out = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            try:
                f = Path(entry, "stat").read_text().rsplit(")", 1)[1].split()
                out[int(entry.name)] = (f[0], int(f[1]), int(f[2]), f[19])
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pid: int) -> dict[int, str]:
    """{pid: start time} of every process below `pid`."""
    procs = _procs()
    children: dict[int, list[int]] = {}
    for p, (_, ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(p)
    out, todo = {}, [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out[c] = procs[c][3]
                todo.append(c)
    return out


def survivors(pgid: int, tree: dict[int, str]) -> set[int]:
    """Live (not zombie) processes of group `pgid` or of the noted `tree` (same pid and start time)."""
    return {p for p, (state, _, group, start) in _procs().items()
            if state not in ("Z", "X") and (group == pgid or tree.get(p) == start)}


def stop_tree(proc: subprocess.Popen, sigs: _Signals | None = None) -> int:
    """Stop `proc` (the leader of its own process group) and everything below it; its exit code."""
    if proc.pid <= 1:  # not a process of ours (a stand-in): nothing below it to stop
        return proc.wait()
    forced = lambda: sigs is not None and len(sigs.received) > 1  # noqa: E731 - a second Ctrl-C
    tree = descendants(proc.pid)
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + GRACE_S
        while proc.poll() is None and time.monotonic() < end and not forced():
            time.sleep(0.1)
    for sig, wait in ((signal.SIGTERM, KILL_AFTER_S), (signal.SIGKILL, 5.0)):
        proc.poll()  # reaped: a zombie leader is not a survivor
        left = survivors(pgid, tree)
        if not left:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        for p in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
        end = time.monotonic() + wait
        while time.monotonic() < end and not (sig == signal.SIGTERM and forced()):
            proc.poll()
            if not survivors(pgid, tree):
                break
            time.sleep(0.1)
    return proc.wait()
