"""`wse status` answers from its last report, without Dagster, only while nothing it reads changed
(issue 13: ≤ 5 s). Each change below must make the next call compute in full again."""
from __future__ import annotations

import os
import subprocess
import sys

from dagster import AssetMaterialization, DagsterInstance

from tests.orchestration._tiny import CELL, edit_config
from wse_platform import cli, status_report
from wse_platform.config import load_settings

CACHED = "nothing changed since the full check"


def _status(capsys, *extra) -> str:
    assert cli.main(["status", *extra]) == 0
    return capsys.readouterr().out


def _no_full_check(*_a, **_k):
    raise AssertionError("computed in full although nothing changed")


def test_answered_from_the_last_report_until_anything_changes(tiny, capsys, monkeypatch):
    first = _status(capsys)
    assert CACHED not in first and "0 stale, 0 missing" in first
    with monkeypatch.context() as m:
        m.setattr(cli, "_full_status", _no_full_check)
        again = _status(capsys)
    assert again.startswith(first.rsplit("(", 1)[0]) and CACHED in again  # same report, said to be cached
    assert CACHED not in _status(capsys, "--all")  # another flag, another report
    assert CACHED not in _status(capsys, "--full")  # asked to check in full

    # the config changes: full check, and it sees the stale cells
    edit_config(tiny, lambda raw: raw["wse"].update(horizon=2))
    edited = _status(capsys)
    assert CACHED not in edited and f"stale      wse_trajectories[{CELL}]" in edited.splitlines()
    assert "(wse-gen › horizon: 1 → 2)" in edited  # the cause names the edit (config asset metadata)
    assert CACHED in _status(capsys)  # its own config observations are part of the state it saved

    # a file a setting names (a user prompt folder) changes
    prompts = tiny.parent / "prompts"
    (prompts / "wse").mkdir(parents=True)
    edit_config(tiny, lambda raw: raw.update(prompts_dir=str(prompts)))
    _status(capsys)
    assert CACHED in _status(capsys)
    (prompts / "wse" / "notes.md").write_text("a new file in the prompts folder")
    assert CACHED not in _status(capsys)

    # an event recorded by another process (a run, the UI, a sensor)
    assert CACHED in _status(capsys)
    with DagsterInstance.get() as instance:
        instance.report_runless_asset_event(AssetMaterialization("wse_trajectories", partition=CELL))
    assert CACHED not in _status(capsys)

    # the warehouse file changes (here a table written by hand)
    assert CACHED in _status(capsys)
    import duckdb
    with duckdb.connect(str(load_settings(str(tiny)).warehouse)) as con:
        con.execute("CREATE TABLE scratch AS SELECT 1 AS x")
    assert CACHED not in _status(capsys)


def test_a_cached_answer_does_not_import_dagster(tiny):
    code = ("import sys; from wse_platform.cli import main; rc = main(['status']); "
            "print('dagster imported' if 'dagster' in sys.modules else 'no dagster', rc)")
    env = {**os.environ, "WSE_CONFIG": str(tiny)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    assert runs[0].stdout.strip().endswith("dagster imported 0"), runs[0].stderr[-2000:]
    assert CACHED in runs[1].stdout and runs[1].stdout.strip().endswith("no dagster 0"), runs[1].stderr[-2000:]


def test_a_broken_report_file_is_ignored(config_file, tmp_path):
    settings = load_settings(str(config_file))
    home = settings.dagster_home
    assert status_report.quick_key(settings) is None  # no event index yet: no key, always a full check
    (home / status_report.EVENT_INDEX).parent.mkdir(parents=True)
    (home / status_report.EVENT_INDEX).write_bytes(b"")
    key = status_report.quick_key(settings)
    status_report.save_report(settings, key, "report\n")
    assert status_report.cached_report(settings, key)[0] == "report\n"
    assert status_report.cached_report(settings, "another key") is None
    for content in ["", "{", '{"key": 1}', '{"key": "%s", "text": "t"}' % key, "[]"]:
        (home / status_report.REPORT_FILE).write_text(content)
        assert status_report.cached_report(settings, key) is None, content
