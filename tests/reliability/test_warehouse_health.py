"""A truncated or deleted warehouse file is reported, not called fresh (issue 14, item 6, warehouse part).

Before: `wse status` read only the Dagster instance's records and printed "0 stale, 0 missing"
over a truncated warehouse file.
"""
import os

import pytest

from tests.conftest import write_config
from wse_platform import cli
from wse_platform.warehouse import Warehouse, WarehouseError


def _filled(path):
    wh = Warehouse(path)
    wh.execute("CREATE TABLE IF NOT EXISTS big AS SELECT range AS i, 'row ' || range AS s FROM range(200000)")
    return wh


def _truncate(path, keep=0.4):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(int(size * keep))


@pytest.mark.parametrize("damage", ["truncated", "text"])
def test_unreadable_file_names_file_cause_and_fix(tmp_path, damage):
    path = tmp_path / "wh.duckdb"
    _filled(path)
    if damage == "truncated":
        _truncate(path)
    else:
        path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(WarehouseError) as err:
        Warehouse(path).check_readable()
    msg = str(err.value)
    assert str(path) in msg and "truncated or corrupt" in msg and f"mv {path} {path}.broken" in msg


def test_a_healthy_or_absent_file_passes(tmp_path):
    Warehouse(tmp_path / "absent.duckdb").check_readable()
    _filled(tmp_path / "ok.duckdb").check_readable()


def test_status_refuses_to_call_a_truncated_warehouse_fresh(config_file, tmp_path, capsys):
    from wse_platform.config import load_settings

    path = load_settings(config_file).warehouse
    _filled(path)
    _truncate(path)
    rc = cli.main(["status"])
    out = capsys.readouterr()
    assert rc == 2, out.out + out.err
    assert "stale," not in out.out  # no "0 stale, 0 missing" summary
    assert str(path) in out.err and "fix:" in out.err


def test_deleted_warehouse_under_a_built_instance_is_reported(tmp_path):
    from dagster import DagsterInstance, Definitions, asset, materialize

    from wse_platform.config import load_settings
    from wse_platform.runner import warehouse_problem

    @asset
    def table_x():
        return 1

    instance = DagsterInstance.ephemeral()
    defs = Definitions(assets=[table_x])
    settings = load_settings(write_config(tmp_path))
    assert warehouse_problem(settings, defs, instance) is None  # nothing built, nothing missing
    assert materialize([table_x], instance=instance).success
    msg = warehouse_problem(settings, defs, instance)
    assert msg and str(settings.warehouse) in msg and "does not exist" in msg and "table_x" in msg


def test_deleted_warehouse_is_rebuilt_by_stale(config_file, capsys):
    """(`wse status` on it: test_deleted_warehouse_under_a_built_instance_is_reported.) Also covers
    a long-lived process: the cached Warehouse object re-creates the tables in the new file."""
    from wse_platform.config import load_settings

    path = load_settings(config_file).warehouse
    assert cli.main(["materialize", "--select", "ncp_specs"]) == 0
    path.unlink()
    capsys.readouterr()
    assert cli.main(["materialize", "--select", "ncp_specs", "--stale"]) == 0  # was: "nothing to do"
    assert "rebuilding every selected asset" in capsys.readouterr().err
    assert Warehouse(path).query("SELECT count(*) n FROM ncp_specs")["n"][0] == 100
