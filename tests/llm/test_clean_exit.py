"""A process that drops an LLM client without closing it exits (the cross-process test's hang).

Before: the journal's fsync thread is a daemon thread holding the journal's lock while it fsyncs.
When the interpreter exits during an fsync (a busy disk: a loaded machine), Python stops that
thread where it stands, lock held; the client's `__del__` then waited for that lock forever, so
the process printed its results and never ended (tests/llm/test_cross_process.py timed out).
Here the fsync is made slow so that the exit always falls inside one.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend

ROOT = Path(__file__).resolve().parents[2]

DROPPED = r"""
import os, sys
from pathlib import Path
from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend

# a disk busy with other work: each fsync takes a second. Defined outside this script's globals: a thread
# stopped inside a function of __main__ would keep them, and so the client, alive (no __del__ at exit)
disk: dict = {}
exec("import os, threading, time\nin_fsync = threading.Event()\nreal = os.fsync\n"
     "def fsync(fd):\n    in_fsync.set()\n    time.sleep(1.0)\n    real(fd)\n", disk)
os.fsync = disk["fsync"]
client = LLMClient(make_settings(Path(sys.argv[1])),
                   backends={"smollm2": ScriptedBackend({"*": "answer"}, namespace="exit")}, progress=False)
assert client.complete(LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "hi"}])).output
assert disk["in_fsync"].wait(10)
print("answered", flush=True)
# the client is not closed: the interpreter drops it at exit, while the journal's fsync runs
"""


def test_a_dropped_client_does_not_hang_the_exit_during_a_journal_fsync(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", DROPPED, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the process answered ({out.strip()!r}) but did not exit within 30 s") from None
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "answered"
    backend = ScriptedBackend({"*": "other"}, namespace="exit")
    again = LLMClient(make_settings(tmp_path), backends={"smollm2": backend}, progress=False)
    result = again.complete(LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "hi"}]))
    again.close()
    assert (result.output, backend.n_calls) == ("answer", 0)  # the answer paid for before the exit is kept
