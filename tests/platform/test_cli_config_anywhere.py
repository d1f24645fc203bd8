"""Issue 21: `--config` is accepted after the subcommand as well (`wse status --config X` failed with
"unrecognized arguments")."""
from __future__ import annotations

import pytest

from wse_platform import cli

COMMANDS = {
    "demo": ["demo"], "materialize": ["materialize", "--stale"], "status": ["status"],
    "sql": ["sql", "SELECT 1"], "ui": ["ui"], "doctor": ["doctor", "--no-models"],
    "ncp_play": ["ncp", "play", "--spec", "movie52", "--as", "narrator"],
    "validate": ["validate", "ncp-spec", "specs/"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_config_before_or_after_the_subcommand(name, monkeypatch):
    seen = []
    monkeypatch.setattr(cli, f"cmd_{name}", lambda args: seen.append(args.config) or 0)
    argv = COMMANDS[name]
    at = 2 if name == "ncp_play" else 1
    assert cli.main(["--config", "a.yaml", *argv]) == 0
    assert cli.main([*argv[:at], "--config", "b.yaml", *argv[at:]]) == 0
    assert cli.main([*argv, "--config", "c.yaml"]) == 0
    assert cli.main(argv) == 0
    assert seen == ["a.yaml", "b.yaml", "c.yaml", None]


def test_config_after_the_subcommand_is_the_config_used(tmp_path, monkeypatch, capsys):
    from tests.conftest import write_config
    cfg = write_config(tmp_path, plots_port=0)
    monkeypatch.setenv("WSE_CONFIG", str(tmp_path / "missing.yaml"))  # would be used without --config
    assert cli.main(["sql", "--config", str(cfg), "SELECT 41 + 1 AS x", "-f", "csv"]) == 2  # no warehouse yet
    assert f"no warehouse at {tmp_path / 'wh.duckdb'}" in capsys.readouterr().err
