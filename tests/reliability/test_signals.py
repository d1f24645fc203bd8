"""Ctrl-C / SIGTERM on a multi-run materialization (issue 14, item 9).

Before: the signal interrupted the current run only and the next run started; only SIGKILL
stopped the command. Now the first signal stops the whole command (the interrupted run is
recorded as failed) and a second one exits at once. Tested on the real runner in a subprocess
with a tiny graph of slow partitions (no model needed).
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

SCRIPT = """
import sys, time
from dagster import DagsterInstance, Definitions, StaticPartitionsDefinition, asset
from wse_platform.runner import execute, plan, materializable

STUBBORN = sys.argv[1] == "stubborn"

@asset(partitions_def=StaticPartitionsDefinition(["a", "b", "c"]))
def slow(context):
    print("step started", context.partition_key, flush=True)
    end = time.time() + 60
    while time.time() < end:
        try:
            time.sleep(0.05)
        except BaseException:  # like native code that does not return on an interrupt
            if not STUBBORN:
                raise
    return 1

defs = Definitions(assets=[slow])
instance = DagsterInstance.get()
keys = list(materializable(defs))
steps = plan(defs, keys, {k: None for k in keys})
report = execute(defs, steps, instance)
print("report", report.interrupted_by, [ok for _, ok, _ in report.steps], flush=True)
sys.exit(130 if report.interrupted_by else 0)
"""


def _start(tmp_path, mode):
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path), PYTHONPATH=str(REPO), DAGSTER_DISABLE_TELEMETRY="1")
    return subprocess.Popen([sys.executable, "-c", SCRIPT, mode], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_for(proc, text, timeout=120) -> list[str]:
    lines, deadline = [], time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"never saw {text!r}: {''.join(lines)[-3000:]}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_stops_the_whole_command_and_fails_the_run(tmp_path, sig):
    from dagster import DagsterInstance, DagsterRunStatus

    proc = _start(tmp_path, "normal")
    try:
        _wait_for(proc, "step started a")
        time.sleep(0.5)
        t0 = time.time()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
        took = time.time() - t0
    finally:
        proc.kill()
    assert "materializing [b]" not in out, out[-3000:]  # no further run started
    assert "step started b" not in out
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted by" in out and "report" in out
    assert took < 30
    instance = DagsterInstance.from_config(str(tmp_path))
    runs = instance.get_runs()
    assert len(runs) == 1 and runs[0].status == DagsterRunStatus.FAILURE


def test_second_signal_exits_at_once(tmp_path):
    proc = _start(tmp_path, "stubborn")
    try:
        _wait_for(proc, "step started a")
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert proc.poll() is None  # the stubborn step ignores the first one
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        took = time.time() - t0
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert took < 5 and "exiting now" in out
    assert "step started b" not in out
