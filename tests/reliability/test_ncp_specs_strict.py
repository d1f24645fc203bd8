"""A malformed NCP spec fails `ncp_specs`, naming file and field, unless excluded explicitly (issue 14, item 4).

Before: the bad spec was dropped silently (exit 0, 99 rows) and `ncp.n_specs: 1` moved on to the
next spec in evaluation order without a word.
"""
import pytest
import yaml
from dagster import materialize

import assets.ncp.specs as specs_module
from assets.partitions import build_partitions
from resources import WarehouseResource
from tests.conftest import copy_ncp_specs, ncp_first_specs, write_config
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

FIRST = ncp_first_specs()  # movie48, movie09, ...


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    """A three-spec copy of the released dataset whose first spec has a bad commitment type."""
    root = tmp_path / "dataset"
    copy_ncp_specs(root)
    bad = root / "specs" / f"{FIRST[0]}.yaml"
    raw = yaml.safe_load(bad.read_text())
    raw["commitments"][0]["type"] = "sometimes"
    bad.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    monkeypatch.setattr(specs_module, "NCP_DATASET_DIR", root)
    return root


def _materialize(tmp_path, **ncp):
    cfg = write_config(tmp_path, ncp={"n_specs": 1, **ncp})
    settings = load_settings(cfg)
    asset = next(a for a in specs_module.build(settings, build_partitions(settings))
                 if getattr(a, "key", None) is not None and a.key.to_user_string() == "ncp_specs")
    result = materialize([asset], resources={"warehouse": WarehouseResource(config_path=str(cfg))},
                         raise_on_error=False)
    return result, settings


def _error(result) -> str:
    ev = next(e for e in result.all_events if e.is_step_failure)
    return ev.step_failure_data.error.message


def test_malformed_spec_fails_the_asset_naming_file_record_and_field(dataset, tmp_path, config_file):
    result, settings = _materialize(tmp_path)
    assert not result.success
    msg = _error(result)
    assert f"{FIRST[0]}.yaml" in msg and "c_0" in msg and "type" in msg
    assert "must be one of invariant, ordering, achievement (got 'sometimes')" in msg  # the validator's words
    assert f"ncp.exclude_specs: ['{FIRST[0]}']" in msg  # the way out, spelt out
    assert Warehouse(settings.warehouse).query("SELECT count(*) n FROM ncp_specs")["n"][0] == 0  # nothing written


def test_explicit_exclusion_loads_the_rest_in_their_places(dataset, tmp_path, config_file):
    result, settings = _materialize(tmp_path, exclude_specs=[FIRST[0]])
    assert result.success
    df = Warehouse(settings.warehouse).query("SELECT spec_id, eval_order FROM ncp_specs ORDER BY eval_order")
    assert df["spec_id"].to_list() == FIRST[1:]
    assert df["eval_order"].to_list() == [1, 2]  # positions from index.yaml are kept
    mat = next(e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION")
    assert mat.event_specific_data.materialization.metadata["excluded"].value == [FIRST[0]]


def test_excluding_an_unknown_spec_is_an_error(dataset, tmp_path, config_file):
    result, _ = _materialize(tmp_path, exclude_specs=[FIRST[0], "movie999"])
    assert not result.success
    assert "movie999" in _error(result) and "not in the dataset" in _error(result)


def test_exclusion_changes_the_code_version(tmp_path):
    def version(**ncp):
        s = load_settings(write_config(tmp_path, ncp=ncp))
        a = next(a for a in specs_module.build(s, build_partitions(s)) if getattr(a, "key", None) is not None
                 and a.key.to_user_string() == "ncp_specs")
        return a.code_versions_by_key[a.key]
    assert version() != version(exclude_specs=["movie48"])

