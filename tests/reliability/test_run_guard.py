"""A command stops at a broken environment and builds nothing on a failed upstream (issue 23, item 5).

Before: with the warehouse disk full every later run of the command still started (44 LLM calls
whose records could not be written), and an aggregate ran "ok" over the cells that had failed.
"""
import errno

import pytest
from dagster import AssetKey, DagsterInstance, Definitions, StaticPartitionsDefinition, asset

from wse_platform.errors import InfrastructureError
from wse_platform.llm.errors import LLMInfrastructureError
from wse_platform.runner import execute, plan


class TransportGaveUp(LLMInfrastructureError):
    """Stands in for an infrastructure error type defined after run_guard was written."""


def _defs(calls: list, fail: dict):
    parts = StaticPartitionsDefinition(["a", "b", "c"])

    @asset(partitions_def=parts)
    def cells(context):
        pk = context.partition_key
        calls.append(pk)
        if pk in fail:
            raise fail[pk]
        return pk

    @asset(deps=[cells])
    def summary():
        calls.append("summary")
        return 1

    return Definitions(assets=[cells, summary])


def _run(fail: dict):
    calls, lines = [], []
    defs = _defs(calls, fail)
    keys = [AssetKey("cells"), AssetKey("summary")]
    steps = plan(defs, keys, {AssetKey("cells"): None, AssetKey("summary"): None})
    report = execute(defs, steps, DagsterInstance.ephemeral(), echo=lines.append)
    return calls, report, "\n".join(lines)


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    InfrastructureError("the warehouse cannot be written"),
    TransportGaveUp("no answer from http://127.0.0.1:9/v1 after 3 attempts"),
], ids=["ENOSPC", "InfrastructureError", "new LLMInfrastructureError subclass"])
def test_an_infrastructure_failure_starts_no_further_run(error):
    calls, report, out = _run({"a": error})
    assert calls == ["a"], out  # was: a, b, c and the summary
    assert not report.ok and report.stopped_by
    assert "none of the 3 remaining runs was started" in out


def test_no_aggregate_is_built_from_a_failed_upstream():
    calls, report, out = _run({"b": ValueError("the model's answer could not be parsed")})
    assert calls == ["a", "b", "c"], out  # a model/data failure does not stop the other cells
    assert "summary" not in calls and "skipped summary: not run: it reads cells[b]" in out
    assert not report.ok and report.stopped_by is None
    assert report.first_failure.startswith("cells: the model's answer could not be parsed")


def test_no_aggregate_over_an_upstream_that_was_never_built():
    from wse_platform.run_guard import RunGuard

    calls, lines = [], []
    defs = _defs(calls, {})
    instance = DagsterInstance.ephemeral()
    steps = plan(defs, [AssetKey("summary")], {AssetKey("summary"): None})
    report = execute(defs, steps, instance, echo=lines.append, guard=RunGuard(defs, instance=instance))
    assert calls == [] and not report.ok  # was: the summary built "ok" over nothing
    assert "cells, which has never been built" in "\n".join(lines)
    steps = plan(defs, [AssetKey("cells"), AssetKey("summary")], {AssetKey("cells"): None, AssetKey("summary"): None})
    assert execute(defs, steps, instance, echo=lines.append, guard=RunGuard(defs, instance=instance)).ok
    assert calls == ["a", "b", "c", "summary"]
