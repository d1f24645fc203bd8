"""Call records are written while calls complete, so `kill -9` mid-step keeps the accounting
of the calls already made (issue 14, item 10, call-record part).

Before: records were written only when the step ended; a killed run left `llm_calls` empty
although its backend calls had been made (and paid for). Real embedded model, real CLI.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import write_config
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

pytest.importorskip("llama_cpp")

SELECT = ["endings_stories", "endings_positions", "endings_predictions"]


def _forecast_rows(wh: Warehouse) -> int:
    if not wh.path.exists():
        return 0
    try:
        return int(wh.query("SELECT count(*) AS n FROM llm_calls WHERE role = 'endings.forecast'")["n"][0])
    except Exception:  # the schema may not exist yet
        return 0


@pytest.mark.slow
def test_kill_9_mid_step_keeps_the_records_of_completed_calls(tmp_path):
    cfg = write_config(tmp_path, endings={"k": 2, "max_human_stories": 1, "position_stride": 1,
                                          "max_positions_per_story": 8, "generators": [],
                                          "forecast_sampling": {"temperature": 1.2, "max_tokens": 12}})
    settings = load_settings(cfg)
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "dh"), WSE_CONFIG=str(cfg))
    (tmp_path / "dh").mkdir()
    cmd = [sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "materialize", "--select", *SELECT,
           "--partition", "human:public_domain"]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wh = Warehouse(settings.warehouse, lock_timeout=30)
    deadline = time.time() + 400
    try:
        while _forecast_rows(wh) < 1 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.3)
        assert proc.poll() is None, "the run ended before a call record was written mid-step"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    written = _forecast_rows(wh)
    assert written >= 1
    # the step did not finish: the records come from the batches written as calls completed
    assert wh.query("SELECT count(*) AS n FROM endings_predictions")["n"][0] == 0
    n_positions = wh.query("SELECT count(*) AS n FROM endings_positions")["n"][0]
    assert written < n_positions  # killed mid-step, not after it
