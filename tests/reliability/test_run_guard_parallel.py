"""The run guard holds in `wse materialize --parallel N` too (the default with remote models):
after an infrastructure failure in one worker no further run starts (issue 23 item 5)."""
from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from dagster import AssetKey, DagsterInstance, Definitions, StaticPartitionsDefinition, asset

from wse_platform.config import settings_from_dict
from wse_platform.parallel_runs import execute_parallel
from wse_platform.runner import plan

PARTS = StaticPartitionsDefinition(["a", "b", "c"])


def _note(name: str) -> Path:
    folder = Path(os.environ["WSE_TEST_GUARD_DIR"])
    (folder / name).write_text("x")
    return folder


@asset(partitions_def=PARTS)
def cells(context):
    pk = context.partition_key
    folder = _note("started-" + pk)
    if pk == "a":
        raise OSError(errno.ENOSPC, "No space left on device")
    if pk == "b":   # still running when a fails: the guard must not start c after either of them
        deadline = time.monotonic() + 30
        while not (folder / "started-a").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
    return None


@asset(deps=[cells])
def summary():
    _note("started-summary")


def guard_definitions(*_args) -> Definitions:
    return Definitions(assets=[cells, summary])


def test_an_infrastructure_failure_in_a_worker_starts_no_further_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_TEST_GUARD_DIR", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    defs = guard_definitions()
    keys = [AssetKey("cells"), AssetKey("summary")]
    steps = plan(defs, keys, dict.fromkeys(keys))
    lines: list[str] = []
    settings = settings_from_dict({"concurrency": {"embedded": 4, "litellm": 4, "vllm": 4}})
    report = execute_parallel(defs, steps, DagsterInstance.get(), settings, 2,
                              (f"{__name__}:guard_definitions", ()), echo=lines.append)
    out = "\n".join(lines)
    started = sorted(p.name for p in tmp_path.glob("started-*"))
    assert started == ["started-a", "started-b"], out      # c and the summary never started
    assert report.stopped_by and "No space left on device" in report.stopped_by, out
    assert "remaining runs was started" in out
