"""`procs.freeze_long_lived`: a process that runs leaves what it holds before its first run (imports,
definitions, instance) out of the cyclic garbage collector's scans, once per process (issue 24 item 3:
the full collections a run triggers visited every object of the definitions). In a child process, so
this test process keeps its collector as it is."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CODE = """
import gc, json
from wse_platform.procs import freeze_long_lived
held = [{"n": i} for i in range(1000)]
before = gc.get_freeze_count()
freeze_long_lived()
first = gc.get_freeze_count()
later = [[i] for i in range(1000)]
freeze_long_lived()
again = gc.get_freeze_count()
cycle = []
cycle.append(cycle)
del cycle
freed = gc.collect()
print(json.dumps([before, first, again, freed]))
"""


def test_freezes_what_the_process_holds_once_and_still_collects_what_comes_later():
    out = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": ""})
    before, first, again, freed = __import__("json").loads(out.stdout)
    assert before == 0 and first > 1000   # everything held then, the 1000 dicts among it
    assert again == first                 # not again in the same process (later objects stay collectable)
    assert freed >= 1                     # a cycle made after the freeze is still collected
