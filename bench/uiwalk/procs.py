"""The demo folder, the config edit, and the `wse` commands the walkthrough starts and stops."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from demo_time import demo_config, run_demo  # bench/demo_time.py: the demo as a newcomer runs it

from uiwalk.common import EDIT, OVERRIDES, child_env, log
from wse_platform.ui import descendants


# ---- 1. the demo folder ----------------------------------------------------------------------------
def prepare(folder: Path | None, work: Path) -> None:
    if folder is not None:
        if not (folder / "wse.yaml").exists() or not (folder / ".wse" / "warehouse.duckdb").exists():
            raise SystemExit(f"error: {folder} is not a demo folder (no wse.yaml and .wse/warehouse.duckdb); "
                             "make one with `python bench/demo_time.py --keep DIR`")
        log(f"copying the demo folder {folder} to {work}")
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns("*.lock", "*.pid"))
        return
    work.mkdir(parents=True)
    demo_config(work)
    log(f"running `wse demo` in {work} (the quick demo, ~4 min) ...")
    env = child_env()  # run_demo inherits this process's environment
    for k in OVERRIDES:
        os.environ.pop(k, None)
    os.environ.update(env)
    took, steps, rc = run_demo(work, full=False)
    log(f"`wse demo`: exit {rc} after {took:.0f} s ({len(steps)} steps)")
    if rc != 0:
        raise SystemExit("error: the demo failed (its output is above)")


def edit_config(config: Path) -> str:
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    section, key, value = EDIT
    before = (raw.get(section) or {}).get(key, "(from the profile)")
    raw.setdefault(section, {})[key] = value
    config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return f"{section}.{key}: {before} → {value} written to {config}"


# ---- 2. wse ui / wse view and stopping them --------------------------------------------------------
class Proc:
    """A `wse` command started by this script: its process tree is noted while it runs, so that
    after stopping it the script can say whether anything it started is still alive."""

    def __init__(self, name: str, args: list[str], cwd: Path, logfile: Path):
        self.name = name
        self.logfile = logfile
        self.out = open(logfile, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-m", "wse_platform.cli", *args], cwd=cwd, env=child_env(),
                                     stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        self.tree: dict[int, str] = {}
        self.leftover: list[str] | None = None
        self.note_tree()

    def note_tree(self) -> None:
        self.tree.update(descendants(self.proc.pid))

    def text(self) -> str:
        return self.logfile.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig=signal.SIGTERM, wait_s: float = 120.0) -> list[str]:
        """Stop it by `sig` to its own pid (as a user's Ctrl-C or `kill` would) and wait; return
        what of its process tree is still alive after that (then killed, and reported)."""
        if self.proc.poll() is None:
            self.note_tree()
            self.proc.send_signal(sig)
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        left = leftovers({self.proc.pid: "", **self.tree}) if self.proc.poll() is None else leftovers(self.tree)
        for pid, cmd in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()
        return [f"{self.name}: pid {pid} still running after {sig.name}: {cmd}" for pid, cmd in left]


def leftovers(tree: dict[int, str]) -> list[tuple[int, str]]:
    """(pid, command line) of the noted processes still alive (same pid and start time, not zombie)."""
    out = []
    for pid, start in tree.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        if stat[0] not in ("Z", "X") and (not start or stat[19] == start):
            out.append((pid, cmd))
    return out



def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
