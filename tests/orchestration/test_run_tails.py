"""`wse materialize --parallel N` bounds the runs still sending requests, not the runs: a run past its
last request (judging replays, aggregates, checks) lets the next planned run start in a spare worker
(wse_platform/parallel_runs.py, issue 24 item 1).

With `parallel=1` the old scheduler started cell b only when cell a had ended; here cell a has an
answer from a model and then waits (up to 15 s) for b to start, which only a scheduler that sees
a is past its requests does. Cell b never has an answer from a model: it counts as sending until
it ends, so cell c starts after b although a spare worker is free.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from dagster import AssetKey, DagsterInstance, Definitions, MaterializeResult, StaticPartitionsDefinition, asset

from wse_platform import parallel_runs, progress
from wse_platform.config import settings_from_dict
from wse_platform.parallel_runs import execute_parallel, still_sending
from wse_platform.runner import plan

CELLS = StaticPartitionsDefinition(["a", "b", "c"])


@asset(partitions_def=CELLS)
def tail_cell(context):
    pk, folder = context.partition_key, Path(os.environ["WSE_TEST_TAIL_DIR"])
    (folder / f"started-{pk}").write_text(str(time.time()))
    if pk == "a":
        progress.TALLY.add(False, False)        # an answer from a model (as the LLM client counts it)
        deadline = time.monotonic() + 15
        while not (folder / "started-b").exists():   # a's tail: b must start meanwhile
            assert time.monotonic() < deadline, "b did not start while a was past its requests"
            time.sleep(0.05)
    elif pk == "b":
        time.sleep(1.5)                          # no answer from a model: b counts as sending throughout
    (folder / f"done-{pk}").write_text(str(time.time()))
    return MaterializeResult()


def tail_definitions(*_args) -> Definitions:
    return Definitions(assets=[tail_cell])


def test_the_next_run_starts_while_a_run_is_past_its_requests(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_TEST_TAIL_DIR", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(parallel_runs, "QUIET_S", 0.3)
    (tmp_path / "home").mkdir()
    defs = tail_definitions()
    steps = plan(defs, [AssetKey("tail_cell")], {AssetKey("tail_cell"): None})
    shared = progress.Shared(3)
    lines: list[str] = []
    report = execute_parallel(defs, steps, DagsterInstance.get(), settings_from_dict({}), 1,
                              (f"{__name__}:tail_definitions", ()), echo=lines.append,
                              progress_args=shared.worker_args(), spare=2)
    assert report.ok and len(report.steps) == 3, "\n".join(lines)
    t = {p.name: float(p.read_text()) for p in tmp_path.glob("*-*") if p.is_file()}
    assert t["started-b"] < t["done-a"]       # b started in a spare worker while a was in its tail
    assert t["started-c"] >= t["done-b"]      # b sent nothing: it kept its place until it ended


def test_which_runs_count_as_sending():
    states = {0: (1_000, 5_000, 0, 0),    # answered at 5 s, quiet since, nothing in flight: past its requests at 7 s
              1: (1_000, 6_500, 0, 0),    # answered 0.5 s ago
              2: (1_000, 900, 0, 0),      # last answer in the worker's previous run
              3: (1_000, 0, 0, 0),        # no answer at all
              5: (1_000, 5_000, 2, 0),    # its two slowest calls still out: at the end of its requests
              6: (1_000, 5_000, 3, 0)}    # quiet for 2 s but 3 calls in flight (a stalled process): sending
    assert still_sending([0, 1, 2, 3, 4, 5, 6], states, 7_000, quiet_s=1.5) == {1, 2, 3, 4, 6}   # 4: no slot yet


def test_a_run_down_to_its_stragglers_counts_as_past_while_answers_still_arrive():
    """Answers keep arriving (the last one 0.1 s ago) but the run has 4 of its peak 40 calls in flight
    (its last conversations): past its requests once that lasted `LOW_HOLD_S` (0.3 s). The old rule
    (quiet for 1.5 s, at most 2 in flight) kept it sending until 1.5 s after its very last answer."""
    low: dict[int, int] = {}
    def states(now: int, in_flight: int, peak: int = 40, last_ago: int = 100) -> dict:
        return {0: (1_000, now - last_ago, in_flight, peak)}
    assert still_sending([0], states(9_000, 4), 9_000, quiet_s=1.5, low_since=low) == {0}    # just got low
    assert still_sending([0], states(9_200, 5), 9_200, quiet_s=1.5, low_since=low) == {0}    # 0.2 s low
    assert still_sending([0], states(9_300, 3), 9_300, quiet_s=1.5, low_since=low) == set()  # 0.3 s: past
    assert still_sending([0], states(9_400, 7), 9_400, quiet_s=1.5, low_since=low) == {0}    # 7 > 15 % of 40: sending
    assert still_sending([0], states(9_500, 2), 9_500, quiet_s=1.5, low_since=low) == {0}    # the hold starts anew
    assert still_sending([0], states(9_800, 2), 9_800, quiet_s=1.5, low_since=low) == set()
    assert still_sending([], {}, 9_900, low_since=low) == set() and low == {}               # ended: forgotten
    # not past: a peak too small for a share to mean anything, no answer in this run, or still many out
    for st in ({0: (1_000, 8_900, 2, 3)}, {0: (1_000, 900, 1, 40)}, {0: (1_000, 8_900, 12, 40)}):
        low.clear()
        assert still_sending([0], st, 9_000, quiet_s=1.5, low_since=low) == {0}
        assert still_sending([0], st, 9_500, quiet_s=1.5, low_since=low) == {0}, st
    # a larger peak: a larger share (15 % of 200 = 30 in flight)
    low.clear()
    still_sending([0], {0: (1_000, 8_900, 30, 200)}, 9_000, quiet_s=1.5, low_since=low)
    assert still_sending([0], {0: (1_000, 9_200, 30, 200)}, 9_400, quiet_s=1.5, low_since=low) == set()


def marking_definitions(*_args) -> Definitions:
    """`tail_definitions`, noting the process that built them."""
    (Path(os.environ["WSE_TEST_TAIL_DIR"]) / f"defs-{os.getpid()}").write_text("")
    return tail_definitions()


def test_a_worker_loads_the_definitions_while_the_command_plans(tmp_path, monkeypatch, config_file):
    """`wse materialize --parallel N` starts its first worker process before it observes the sources
    and plans: here the observation waits (up to 20 s) until a worker process has built the definitions."""
    from wse_platform import cli, runner

    monkeypatch.setenv("WSE_TEST_TAIL_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "_defs", lambda args: tail_definitions())
    monkeypatch.setattr(cli, "_defs_loader", lambda args: (f"{__name__}:marking_definitions", ()))
    observed = []

    def observe_after_a_worker(defs, instance):
        deadline = time.monotonic() + 20
        while not [p for p in tmp_path.glob("defs-*") if p.name != f"defs-{os.getpid()}"]:
            if time.monotonic() > deadline:
                observed.append("no worker process had built the definitions")
                break
            time.sleep(0.05)
        return []

    monkeypatch.setattr(runner, "observe_sources", observe_after_a_worker)
    rc = cli.main(["--config", str(config_file), "materialize", "--partition", "c", "--parallel", "2"])
    assert rc == 0 and observed == []


TWO = StaticPartitionsDefinition(["a", "b"])


@asset(partitions_def=TWO)
def held_cell(context):
    pk, folder = context.partition_key, Path(os.environ["WSE_TEST_TAIL_DIR"])
    time.sleep(2.0)                              # the cell's start up to its first answer
    (folder / f"answered-{pk}").write_text(str(time.time()))
    progress.TALLY.add(False, False)             # an answer from a model (as the LLM client counts it)
    time.sleep(1.0)
    return MaterializeResult()


@asset
def side_table():
    (Path(os.environ["WSE_TEST_TAIL_DIR"]) / "started-side").write_text(str(time.time()))
    return MaterializeResult()


def held_definitions(*_args) -> Definitions:
    return Definitions(assets=[held_cell, side_table])


def test_a_side_run_starts_after_the_cells_first_answers(tmp_path, monkeypatch):
    """A run nothing waits for (NCP's spec statistics beside the cells) is submitted only once each running cell
    has had an answer from a model (`parallel_runs.held_back`), also when it is ready in the same pass as they are."""
    monkeypatch.setenv("WSE_TEST_TAIL_DIR", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(parallel_runs, "HOLD_MAX_S", 120.0, raising=False)   # the workers' own start may be slow on a busy machine
    (tmp_path / "home").mkdir()
    defs = held_definitions()
    keys = [AssetKey("held_cell"), AssetKey("side_table")]
    steps = plan(defs, keys, {AssetKey("held_cell"): None, AssetKey("side_table"): None})
    shared = progress.Shared(3)
    lines: list[str] = []
    report = execute_parallel(defs, steps, DagsterInstance.get(), settings_from_dict({}), 3,
                              (f"{__name__}:held_definitions", ()), echo=lines.append,
                              progress_args=shared.worker_args(), spare=0)
    assert report.ok and len(report.steps) == 3, "\n".join(lines)
    t = {p.name: float(p.read_text()) for p in tmp_path.glob("*-*") if p.is_file()}
    assert t["started-side"] >= max(t["answered-a"], t["answered-b"]), "\n".join(lines)
