"""A run killed mid-way, resumed: no duplicate rows and no repeated backend calls (real embedded model)."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import write_config
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

pytest.importorskip("llama_cpp")

SELECT = ["endings_stories", "endings_positions", "endings_predictions"]


def _cached(cache_dir) -> int:
    db = cache_dir / "responses.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT count(*) FROM responses").fetchone()[0]
    except sqlite3.Error:
        return 0


def _materialize(cfg, env):
    return [sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "materialize",
            "--select", *SELECT, "--partition", "human:public_domain"]


@pytest.mark.slow
def test_killed_run_resumes_without_duplicates_or_repeated_calls(tmp_path):
    # Short forecasts (12 tokens, as test_records_survive_kill's): the 3 runs' cost is the resuming, not
    # 135M-model text; an answer cut at the cap is a recorded failure row, counted like a prediction.
    cfg = write_config(tmp_path, endings={"k": 2, "max_human_stories": 1, "position_stride": 2,
                                          "max_positions_per_story": 4, "generators": [],
                                          "forecast_sampling": {"temperature": 1.2, "max_tokens": 12}})
    settings = load_settings(cfg)
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "dh"), WSE_CONFIG=str(cfg))
    (tmp_path / "dh").mkdir()
    first = subprocess.Popen(_materialize(cfg, env), env=env, cwd=tmp_path, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while _cached(settings.cache) < 1 and first.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, "the first run finished before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    answered_before = _cached(settings.cache)
    assert answered_before >= 1

    done = subprocess.run(_materialize(cfg, env), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    wh = Warehouse(settings.warehouse)
    dupes = wh.query("SELECT story_id, position, sample_index, count(*) c FROM endings_predictions "
                     "GROUP BY ALL HAVING count(*) > 1")
    assert dupes.height == 0
    n_positions = wh.query("SELECT count(*) n FROM endings_positions")["n"][0]
    assert wh.query("SELECT count(*) n FROM endings_predictions")["n"][0] == 2 * n_positions
    # Records are written as calls complete, so the killed run may have left some of its own rows.
    resumed = wh.query("SELECT run_id FROM llm_calls WHERE role = 'endings.forecast' "
                       "GROUP BY run_id ORDER BY max(created_at) DESC LIMIT 1")["run_id"][0]
    calls = wh.query("SELECT cache_hit, count(*) n FROM llm_calls WHERE role = 'endings.forecast' AND run_id = ? "
                     "GROUP BY ALL", [resumed])
    by_hit = dict(calls.iter_rows())
    # every answer the killed run had obtained is replayed from the cache, never asked again
    assert by_hit.get(True, 0) >= answered_before
    assert by_hit.get(True, 0) + by_hit.get(False, 0) == n_positions  # one request per position, 1 attempt each
    misses = wh.query("SELECT count(*) AS n FROM llm_calls WHERE role = 'endings.forecast' AND NOT cache_hit")["n"][0]
    assert misses <= n_positions  # across both runs, no position went to the backend twice
    # rerunning the finished materialization changes nothing
    again = subprocess.run(_materialize(cfg, env), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0
    assert wh.query("SELECT count(*) n FROM endings_predictions")["n"][0] == 2 * n_positions
    hits = wh.query("SELECT count(*) FILTER (WHERE NOT cache_hit) AS misses FROM llm_calls "
                    "WHERE role = 'endings.forecast'")["misses"][0]
    assert hits == misses  # the third run made no backend call
