"""Concurrent first use of a new Dagster instance (issue 14, item 2).

Before: two `wse` commands started at once on a new warehouse both created and stamped the
instance's SQLite schema, leaving "more than one head" behind for every later command.
Now creation runs under a file lock; a broken instance is reported with the fix.
"""
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, write_config

# Each racer imports everything first, then waits for the same start signal, so that the
# instance is created at the same moment by all of them (the race the file lock removes).
RACER = """
import os, sys, time
from wse_platform.config import load_settings
from wse_platform.runner import get_instance
settings = load_settings(sys.argv[1])
go = sys.argv[2]
open(go + ".ready." + str(os.getpid()), "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
instance = get_instance(settings)
print("ok", len(instance.get_runs()))
"""

CHECK = """
import sys
from wse_platform.config import load_settings
from wse_platform.runner import get_instance
instance = get_instance(load_settings(sys.argv[1]))
instance.get_runs(limit=1)
print("ok")
"""

N_RACERS = 4


def _env(home):
    env = dict(os.environ, DAGSTER_HOME=str(home), PYTHONPATH=str(REPO), DAGSTER_DISABLE_TELEMETRY="1")
    env.pop("WSE_CONFIG", None)
    return env


def test_concurrent_first_use_leaves_a_working_instance(tmp_path):
    """Four racers on one new instance (on the code before the lock, 2 of 2 trials failed this way)."""
    cfg = write_config(tmp_path)
    home = tmp_path / "dagster_home"  # does not exist yet: created by the racers
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(cfg), str(go)], env=_env(home), cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(N_RACERS)]
    deadline = time.time() + 120
    while len(list(tmp_path.glob("go.ready.*"))) < N_RACERS and time.time() < deadline:
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    later = subprocess.run([sys.executable, "-c", CHECK, str(cfg)], env=_env(home), cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    assert later.returncode == 0 and "ok" in later.stdout, later.stderr[-3000:]


def test_broken_instance_is_reported_with_the_fix(tmp_path, monkeypatch):
    from wse_platform.config import load_settings
    from wse_platform.runner import InstanceBroken, get_instance

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "history").mkdir()
    (home / "history" / "runs.db").write_text("this is not an SQLite database\n" * 20)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with pytest.raises(InstanceBroken) as err:
        get_instance(load_settings(write_config(tmp_path)))
    msg = str(err.value)
    # only the damaged file is moved aside (issue 23, item 6), not the whole home
    assert f"mv {home}/history/runs.db {home}/history/runs.db.broken" in msg and "not affected" in msg


def test_cli_reports_a_broken_instance_without_a_traceback(tmp_path):
    home = tmp_path / "dagster_home"
    (home / "history").mkdir(parents=True)
    (home / "history" / "runs.db").write_text("garbage\n" * 50)
    cfg = write_config(tmp_path)
    out = subprocess.run([sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "status"],
                         env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=180)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and str(home) in out.stderr and "fix:" in out.stderr
