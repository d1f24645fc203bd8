"""The final tables of `wse materialize --parallel` run as several runs side by side
(wse_platform/run_split.py): independent tables are cut apart, tables reading each other and the
outputs of a multi-asset that cannot run partially stay together, and each part still waits for
every cell."""
from __future__ import annotations

from dagster import AssetKey, AssetOut, Definitions, StaticPartitionsDefinition, asset, multi_asset

from wse_platform.parallel_runs import step_dependencies
from wse_platform.run_split import split_independent
from wse_platform.runner import plan

CELLS = StaticPartitionsDefinition(["x", "y"])


@asset(partitions_def=CELLS)
def cell():
    return 1


@asset(deps=[cell])
def metrics():
    return 1


@asset(deps=[metrics])
def pareto():
    return 1


@multi_asset(outs={"kinds": AssetOut(), "agreement": AssetOut()}, deps=[cell])
def judged():
    return 1, 2


@asset(deps=[cell])
def failures():
    return 1


@asset(deps=[cell])
def costs():
    return 1


def test_the_final_tables_are_cut_into_independent_runs_after_every_cell():
    defs = Definitions(assets=[cell, metrics, pareto, judged, failures, costs])
    keys = [AssetKey(n) for n in ("cell", "metrics", "pareto", "kinds", "agreement", "failures", "costs")]
    steps = plan(defs, keys, {k: None for k in keys})
    assert [s.partition_key for s in steps] == ["x", "y", None] and len(steps[2].keys) == 6   # one tables run
    split = split_independent(defs, steps, 2)
    tables = [{k.to_user_string() for k in s.keys} for s in split if s.partition_key is None]
    assert len(tables) == 2 and set().union(*tables) == {"metrics", "pareto", "kinds", "agreement", "failures", "costs"}
    assert all(len(t) == 3 for t in tables)                                   # balanced
    assert any({"metrics", "pareto"} <= t for t in tables)                    # pareto reads metrics
    assert any({"kinds", "agreement"} <= t for t in tables)                   # one multi-asset
    deps = step_dependencies(defs, split)
    assert deps[2] == deps[3] == {0, 1}        # each tables run waits for both cells, not for the other
    assert split_independent(defs, steps, 1) == steps


def test_the_runs_everything_waits_for_are_leading():
    """`parallel_runs.leading_steps`: the sources run (everything waits for it) runs in the command's own
    process; a cell or a table that others do not all wait for does not."""
    from wse_platform.parallel_runs import leading_steps

    # 0 sources; 1, 2 cells (wait for 0); 3 tables (wait for 1 and 2); 4 a last table after 3
    assert leading_steps([set(), {0}, {0}, {1, 2}, {3}]) == [0]
    assert leading_steps([set(), {0}, {1}, {2}]) == [0]              # a chain: its first (not waited for by 0)
    assert leading_steps([set(), set(), {0, 1}]) == []               # two independent sources
    assert leading_steps([set()]) == [0]


@asset
def specs():
    return 1


@asset(deps=[specs])
def spec_stats():
    return 1


@asset(partitions_def=CELLS, deps=[specs])
def episode():
    return 1


@asset(deps=[episode, spec_stats])
def summary():
    return 1


def test_what_the_cells_do_not_read_runs_beside_them():
    """NCP's source run: the cells read `specs`, not `spec_stats`; so `spec_stats` gets its own run that
    waits for `specs` only, the cells wait for `specs` only, and the table waits for both."""
    from wse_platform.parallel_runs import leading_steps
    from wse_platform.run_split import defer_unneeded

    defs = Definitions(assets=[specs, spec_stats, episode, summary])
    keys = [AssetKey(n) for n in ("specs", "spec_stats", "episode", "summary")]
    steps = plan(defs, keys, {k: None for k in keys})
    assert [[k.to_user_string() for k in s.keys] for s in steps][0] == ["specs", "spec_stats"]   # one run
    steps = defer_unneeded(defs, steps)
    names = [([k.to_user_string() for k in s.keys], s.partition_key) for s in steps]
    assert names == [(["specs"], None), (["spec_stats"], None), (["episode"], "x"), (["episode"], "y"),
                     (["summary"], None)]
    deps = step_dependencies(defs, steps)
    assert deps[1] == {0} and deps[2] == deps[3] == {0} and deps[4] == {1, 2, 3}
    assert leading_steps(deps) == [0]      # only `specs` before the cells, in the command's process


@asset(deps=[cell], metadata={"wse/run_weight": 5.0})
def heavy():
    return 1


@asset(deps=[cell], metadata={"wse/run_weight": 1.0})
def light_a():
    return 1


@asset(deps=[cell], metadata={"wse/run_weight": 1.0})
def light_b():
    return 1


@asset(deps=[cell])
def unweighted():
    return 1


def test_the_final_tables_are_balanced_by_their_run_weight():
    """`RUN_WEIGHT` metadata: the costly table gets a run of its own; by number of assets it would have shared
    one (2 + 2). An asset without a weight counts as the mean of the given ones ((5 + 1 + 1) / 3)."""
    from wse_platform.run_split import RUN_WEIGHT, _weights

    assert RUN_WEIGHT == "wse/run_weight"
    defs = Definitions(assets=[cell, heavy, light_a, light_b, unweighted])
    keys = [AssetKey(n) for n in ("cell", "heavy", "light_a", "light_b", "unweighted")]
    steps = plan(defs, keys, {k: None for k in keys})
    tables = [sorted(k.to_user_string() for k in s.keys) for s in split_independent(defs, steps, 2)
              if s.partition_key is None]
    assert sorted(tables) == [["heavy"], ["light_a", "light_b", "unweighted"]]
    assert _weights(defs, keys[1:])[AssetKey("unweighted")] == (5 + 1 + 1) / 3
    # no weights at all: the split by number, as before
    plain = Definitions(assets=[cell, metrics, pareto, judged, failures, costs])
    assert _weights(plain, [AssetKey("failures"), AssetKey("costs")]) == {AssetKey("failures"): 1.0,
                                                                          AssetKey("costs"): 1.0}
