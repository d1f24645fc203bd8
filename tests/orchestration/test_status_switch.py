"""A judge panel or the NCP ablation turned off, replayed without Dagster (`status_switch`, issue 21):
the graph transform is the graph the definitions build with the switch off, and the replayed report
is what the full check (`wse status --full`) prints. On the old code these edits were checked in full
(`_replayed` fails if the full check runs)."""
from __future__ import annotations

import copy
import json

import yaml

from tests.orchestration._tiny import CELL, MODEL, edit_config
from tests.orchestration.test_status_replay import _replayed, _report, _status
from wse_platform import cli, status_switch
from wse_platform.config import load_settings


def _graph(tmp_path, raw: dict, name: str) -> tuple[dict, list[str]]:
    from wse_platform.definitions import build_definitions
    from wse_platform.status import _signatures

    path = tmp_path / name
    path.write_text(yaml.safe_dump({k: v for k, v in raw.items() if k != "source_file"}))
    graph = build_definitions(str(path)).resolve_asset_graph()
    return ({k: json.loads(v) for k, v in _signatures(graph).items()},
            [k.to_user_string() for k in graph.toposorted_asset_keys])


def test_a_switch_turned_off_gives_the_graph_the_definitions_build(tmp_path):
    """`graph_without` + `toposorted` on the shipped config's graph (with the NCP ablation set) equal
    the definitions built with each switch of `SWITCHED` turned off (assets, kinds, partitions,
    parents, code versions, Dagster's topological order); `SWITCHED` names every switchable asset."""
    shipped = load_settings(str(cli.Path(__file__).resolve().parents[2] / "wse.yaml"))
    raw = json.loads(shipped.model_dump_json())
    raw["ncp"]["ablation"] = {"narrator": MODEL, "auditors": [{"model": MODEL}]}
    raw["endings"]["rubric"] = {"model": MODEL}
    on, order = _graph(tmp_path, raw, "on.yaml")
    assert status_switch.toposorted(on) == order
    assert status_switch.switchable() <= set(on)
    offs = {"wse.consistency_judges": ("wse", "consistency_judges"), "wse.richness_judges": ("wse", "richness_judges"),
            "ncp.ablation": ("ncp", "ablation"), "endings.rubric": ("endings", "rubric")}
    assert set(offs) == set(status_switch.SWITCHED)
    for switch, (section, key) in offs.items():
        edited = copy.deepcopy(raw)
        edited[section][key] = None
        off, off_order = _graph(tmp_path, edited, f"{key}.yaml")
        removed = set(status_switch.SWITCHED[switch])
        mine = status_switch.graph_without(on, removed, removed if switch in status_switch.DROPPED else set())
        assert mine == off, switch
        assert status_switch.toposorted(mine) == off_order, switch


def test_a_judge_turned_off_and_back_on_is_replayed_as_the_full_check_reports_it(tiny, capsys, monkeypatch):
    assert "0 stale, 0 missing" in _status(capsys)
    settings = load_settings(str(tiny))
    richness, consistency = settings.wse.richness_judge.model_dump(), settings.wse.consistency_judge.model_dump()
    # the richness judge off: the tables that still name its verdicts read Dagster's stub of them
    edit_config(tiny, lambda raw: raw["wse"].update(richness_judge=None))
    replayed = _replayed(capsys, monkeypatch)
    assert "wse_richness_verdicts: has a new dependency data version" in replayed
    assert f"wse_richness_verdicts[{CELL}]" not in replayed
    assert _report(_status(capsys, "--full")) == _report(replayed)
    # back on (its verdicts built before): replayed on the facts of the full check before the switch
    # (`status_switch.restore`), the judge configuration recorded meanwhile named as an edit
    edit_config(tiny, lambda raw: raw["wse"].update(richness_judge=richness))
    replayed = _replayed(capsys, monkeypatch, "--all")
    assert f"fresh      wse_richness_verdicts[{CELL}]" in replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)
    # the consistency judge off, listing every row
    edit_config(tiny, lambda raw: raw["wse"].update(consistency_judge=None))
    replayed = _replayed(capsys, monkeypatch, "--all")
    assert "wse_consistency_verdicts: has a new dependency data version" in replayed
    assert f"wse_consistency_steps[{CELL}]" not in replayed and "fresh      wse_trajectories" in replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)
    # back on with a setting edited at the same time
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2, consistency_judge=consistency))
    replayed = _replayed(capsys, monkeypatch)
    assert "horizon: 1 → 2" in replayed and f"stale      wse_consistency_steps[{CELL}]" in replayed
    assert _report(_status(capsys, "--full")) == _report(replayed)
