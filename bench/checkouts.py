"""What the `--ref REF` A/B scripts of `bench/` share: REF's code in a temporary git worktree, one run of
a script on a checkout's code (its last stdout line, JSON), and a timed stub client."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def ref_worktree(ref: str, path: Path | None = None) -> Iterator[Path]:
    """REF checked out (detached) into `path` (a new temporary folder when None), removed afterwards."""
    wt = Path(tempfile.mkdtemp(prefix="wse-bench-ref-")) if path is None else path
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(wt), ref], check=True,
                   capture_output=True)
    try:
        yield wt
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(wt)], check=False)


def run_json(script: str, args: list[str], code: Path) -> dict:
    """`python script args` with `code` first on the import path; its last stdout line, parsed."""
    res = subprocess.run([sys.executable, str(Path(script).resolve()), *args],
                         env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


class TimedStub:
    """A stand-in for the LLM client that answers every request at once (`answer`, a subclass's) and counts
    the requests and the CPU it spent on them (summed over the threads that call it), for a script to
    subtract from its process CPU."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cpu = 0.0
        self.requests = 0

    def answer(self, req):
        raise NotImplementedError

    def complete(self, req):
        return self.complete_many([req])[0]

    def complete_many(self, reqs):
        t0 = time.thread_time()
        out = [self.answer(q) for q in reqs]
        dt = time.thread_time() - t0
        with self._lock:
            self.cpu += dt
            self.requests += len(reqs)
        return out
