"""`wse` ends without the interpreter's teardown (`cli.entry`), after its exit handlers and with its
output flushed, and keeps `main`'s return code."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, sys
from wse_platform import cli
atexit.register(lambda: print("exit handler ran"))
class Late:
    def __del__(self):
        print("teardown ran")
keep = Late()
cli.main = lambda: (print("command output", end=""), 3)[1]
cli.entry()
"""


def test_the_command_exits_after_its_handlers_without_teardown():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3
    assert out.stdout.startswith("command output") and "exit handler ran" in out.stdout
    assert "teardown ran" not in out.stdout
