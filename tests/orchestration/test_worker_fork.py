"""Worker processes of `wse materialize --parallel` are forks of a template that built the definitions
once (wse_platform/workers.py, worker_template.py): starting one costs no imports and no definitions.

Run in a fresh interpreter (the fork server is one per process: a test process may have started it
already for another command). The toy definitions note each build with the building process's pid.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dagster import Definitions, asset

REPO = Path(__file__).resolve().parents[2]


@asset
def toy():
    return 1


def noting_definitions(folder: str) -> Definitions:
    (Path(folder) / f"built-{os.getpid()}").write_text("")
    return Definitions(assets=[toy])


SCRIPT = """
import json, os, sys
from wse_platform import workers
loader = ("tests.orchestration.test_worker_fork:noting_definitions", (sys.argv[1],))
from dagster import DagsterInstance
DagsterInstance.get()   # the instance exists before its workers (as `wse materialize` makes it first)
started = workers.start_template(loader)
pool = workers.Workers(loader, 3)
with pool:
    futs = [pool.submit(i, workers.worker_info) for i in range(3)]
    infos = [f.result(timeout=120) for f in futs]
workers.forget_template()             # the command ended; a second one in this process ...
again = workers.start_template(loader)    # ... cannot preload anew (one fork server per process)
print(json.dumps({"started": started, "forked": pool.forked, "infos": infos, "me": os.getpid(),
                  "again": again, "then_forked": workers.Workers(loader, 1).forked}))
"""


def _run(script: str, tmp_path, timeout: int) -> dict:
    """Run `script` in a fresh interpreter with its own Dagster home; its last stdout line, as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])

def test_workers_are_forked_from_one_template_that_built_the_definitions(tmp_path):
    got = _run(SCRIPT, tmp_path, timeout=240)
    built = sorted(int(p.name.split("-")[1]) for p in tmp_path.glob("built-*"))
    assert got["started"] and got["forked"]
    assert not got["again"] and not got["then_forked"]   # its workers are spawned, with their own definitions
    assert len(built) == 1, "the definitions were built more than once"   # once, in the template
    template = built[0]
    assert template != got["me"]
    assert all(info == [info[0], template] and info[0] not in (template, got["me"]) for info in got["infos"])


def test_the_template_refuses_what_a_fork_must_not_carry(tmp_path):
    import threading

    from wse_platform.worker_template import check_fork_safe

    assert "x.duckdb" not in (check_fork_safe() or "")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="held-thread")
    t.start()
    try:
        with open(tmp_path / "x.duckdb", "w"):
            problem = check_fork_safe() or ""
    finally:
        stop.set()
        t.join()
    assert "held-thread" in problem and "x.duckdb" in problem


def slow_definitions(folder: str, delay: float) -> Definitions:
    import time
    time.sleep(delay)   # a template still building its definitions
    return noting_definitions(folder)


PREFORK = """
import json, os, sys, time
from wse_platform import workers
loader = ("tests.orchestration.test_worker_fork:slow_definitions", (sys.argv[1], 6.0))
from dagster import DagsterInstance
DagsterInstance.get()
workers.start_template(loader)
pool = workers.Workers(loader, 2)
t = time.monotonic()
thread = pool.prefork(2)
took = time.monotonic() - t
print(f"prefork returned after {took:.1f} s", file=sys.stderr, flush=True)
with pool:
    infos = [f.result(timeout=180) for f in [pool.submit(i, workers.worker_info) for i in range(2)]]
    if thread is not None:   # (a prefork that waited has none)
        thread.join(60)
    print(json.dumps({"took": took, "infos": infos, "spawned": pool.spawned, "processes": len(pool.pool._processes),
                      "unsubmitted": getattr(pool, "unsubmitted", 0), "forking": len(pool.forking)}))
"""


def test_prefork_does_not_wait_for_the_template(tmp_path):
    """`Workers.prefork` returns at once while the template still builds the definitions (a fork request is
    answered only after that): the command's own source run starts meanwhile, not after the template."""
    got = _run(PREFORK, tmp_path, timeout=300)
    assert got["took"] < 3.0, got   # the template sleeps 6 s (after its imports) before it can answer a fork request
    assert got["forking"] == 2 and got["unsubmitted"] == 0
    assert got["spawned"] == 2 and got["processes"] == 2, got   # the runs used the preforked workers, no more
    template = [int(p.name.split("-")[1]) for p in tmp_path.glob("built-*")]
    assert len(template) == 1 and all(info[1] == template[0] for info in got["infos"])


def test_the_template_creates_a_fresh_instance_and_keeps_nothing_open(config_file, tmp_path):
    """On a Dagster home with no instance yet, the template creates it (under `get_instance`'s lock) while the
    command builds its definitions, and closes it again: a fork carries no open file of it. An existing
    instance, or another loader, is left to the command."""
    from wse_platform.runner import get_instance
    from wse_platform.config import load_settings
    from wse_platform.worker_template import check_fork_safe, make_instance

    home = tmp_path / "dagster_home"
    target = "wse_platform.definitions:build_definitions"
    assert not make_instance("tests.orchestration.test_worker_fork:noting_definitions", [str(tmp_path)])
    assert not (home / "history" / "runs.db").exists()
    assert make_instance(target, [str(config_file), False])
    assert (home / "history" / "runs.db").exists() and (home / "dagster.yaml").exists()
    assert str(home) not in (check_fork_safe() or "")
    assert not make_instance(target, [str(config_file), False])   # there now: the command opens it
    instance = get_instance(load_settings(config_file))
    assert instance.get_runs(limit=1) == []
    instance.dispose()



def test_the_template_creates_the_instance_before_importing_the_definitions(monkeypatch):
    """The instance first (issue 24): the command opens it once it has built its own definitions and waits for
    the lock while the template creates it; made after the template imported the definitions' modules, it
    came ~0.25 s after the command needed it on idle cores."""
    import importlib

    from wse_platform import worker_template

    order: list[str] = []

    class Stop(Exception):
        pass

    def importing(name, *args):
        order.append(f"import {name}")
        raise Stop

    monkeypatch.setattr(worker_template, "make_instance", lambda target, args: order.append("instance"))
    monkeypatch.setattr(importlib, "import_module", importing)
    spec = json.dumps(["token", "wse_platform.definitions:build_definitions", ["wse.yaml", False], None])
    try:
        worker_template.build(spec)
    except Stop:
        pass
    assert order == ["instance", "import wse_platform.definitions"]

EXIT = """
import json, os, sys
from wse_platform import workers
loader = ("tests.orchestration.test_worker_fork:noting_definitions", (sys.argv[1],))
from dagster import DagsterInstance
DagsterInstance.get()
workers.start_template(loader)
with workers.Workers(loader, 1) as pool:
    info = pool.submit(0, workers.worker_info).result(timeout=120)
print(json.dumps({"info": info}), flush=True)
sys.stdin.readline()   # until the test has looked at the template
"""


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_template_exits_without_the_interpreters_teardown(tmp_path):
    """When the command ends, its fork server (the template, with Dagster and the definitions loaded) exits
    without the interpreter's teardown (~1 s of CPU with the platform's definitions, after the command's last
    line, with the command's output pipe held open meanwhile: `wse materialize | tee` and bench/fleet.py
    waited for it). Measured as the template's CPU seconds between the command's exit and its own."""
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", EXIT, str(tmp_path)], cwd=REPO, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    template = json.loads(proc.stdout.readline())["info"][1]
    assert template is not None and (tmp_path / f"built-{template}").exists()
    before = _cpu_s(template)
    proc.stdin.close()   # the command ends
    proc.wait(60)
    last, deadline = before, time.monotonic() + 60
    while (now := _cpu_s(template)) is not None and time.monotonic() < deadline:
        last = now
        time.sleep(0.005)
    assert _cpu_s(template) is None, "the template outlived its command"
    assert last - before < 0.25, f"the template spent {last - before:.2f} s of CPU after its command ended"
