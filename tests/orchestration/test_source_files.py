"""Lineage from the files (issue 21): an edited input file makes what is built from it stale in
`wse status`, naming the file, and an unchanged file records nothing (observations stay cheap)."""
from __future__ import annotations

import shutil

import pytest

from tests.orchestration._tiny import CELL, status_of

pytestmark = pytest.mark.slow


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    """The shipped WSE world files, copied; the file sources read the copy."""
    from wse_platform import config

    dest = tmp_path / "data"
    for sub in ("dracor", "smallville", "bianjing", "ncp_bench"):
        shutil.copytree(config.DATA_DIR / sub, dest / sub)
    monkeypatch.setattr(config, "DATA_DIR", dest)
    return dest


def test_an_edited_play_makes_the_worlds_and_every_cell_stale_naming_the_file(tiny, data_copy, capsys):
    from dagster import AssetKey

    from wse_platform import cli
    from wse_platform.runner import observe_sources

    defs, instance, before = status_of(tiny)  # the copy is identical: nothing new
    assert not {r.asset for r in before} & {"wse_initial_worlds", "wse_trajectories"}
    assert observe_sources(defs, instance) == []  # unchanged files: no new observation

    play = data_copy / "dracor" / "shakedracor" / "hamlet.xml"
    play.write_text(play.read_text(encoding="utf-8").replace("Elsinore", "Elsinor", 1), encoding="utf-8")
    defs, instance, rows = status_of(tiny)
    stale = {(r.asset, r.partition): r.causes for r in rows if r.status == "stale"}
    assert {("wse_initial_worlds", None), ("wse_episode_seeds", None), ("wse_trajectories", CELL),
            ("wse_consistency_verdicts", CELL), ("wse_cell_metrics", None)} <= set(stale)
    edit = "dracor/shakedracor/hamlet.xml: edited"
    [cause] = stale[("wse_initial_worlds", None)]
    assert cause.startswith("wse_dracor_plays: ") and cause.endswith(f"({edit})")
    assert all(edit in c for c in stale[("wse_trajectories", CELL)])
    obs = instance.fetch_observations(AssetKey("wse_dracor_plays"), limit=1).records[0].asset_observation
    assert obs.metadata["n_files"].value == 7

    capsys.readouterr()
    cli.main(["--config", str(tiny), "status"])
    out = capsys.readouterr().out
    assert "wse_initial_worlds" in out and edit in out
