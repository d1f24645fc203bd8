"""The NCP source run loads and validates the spec files once: `ncp_specs` and its check `ncp_specs_valid`
read the same load (`assets.ncp.specs._load_all`) while the files are unchanged (issue 24: the source run
is what the cells' first requests wait for; each load of the 100 released specs is ~0.4 s of CPU)."""
import pytest
import yaml
from dagster import materialize

import assets.ncp.specs as specs_module
import wse_platform.ncp.spec as spec_module
from assets.partitions import build_partitions
from resources import WarehouseResource
from tests.conftest import copy_ncp_specs, ncp_first_specs, write_config
from wse_platform.config import load_settings
from wse_platform.ncp.spec import load_specs
from wse_platform.warehouse import Warehouse

FIRST = ncp_first_specs()

@pytest.fixture
def dataset(tmp_path, monkeypatch):
    root = tmp_path / "dataset"
    copy_ncp_specs(root)
    monkeypatch.setattr(specs_module, "NCP_DATASET_DIR", root)
    monkeypatch.setattr(specs_module, "_LOADED", {}, raising=False)
    loads: list[str] = []
    original = spec_module.load_spec_file
    monkeypatch.setattr(spec_module, "load_spec_file", lambda path: loads.append(str(path)) or original(path))
    return root, loads


def _source_run(tmp_path):
    cfg = write_config(tmp_path, ncp={"n_specs": 1})
    settings = load_settings(cfg)
    defs = specs_module.build(settings, build_partitions(settings))
    chosen = [d for d in defs if "ncp_specs" in {k.to_user_string() for k in getattr(d, "keys", ())}]
    chosen += [d for d in defs if "ncp_specs_valid" in {k.name for k in getattr(d, "check_keys", ())}]
    result = materialize(chosen, resources={"warehouse": WarehouseResource(config_path=str(cfg))})
    return result, settings


def test_the_asset_and_its_check_read_one_load_of_the_files(dataset, tmp_path, config_file):
    root, loads = dataset
    result, settings = _source_run(tmp_path)
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "ncp_specs_valid" and check.passed
    assert check.metadata["n_loaded"].value == len(FIRST)
    assert sorted(loads) == sorted(str(root / "specs" / f"{s}.yaml") for s in FIRST)   # once each, not twice
    rows = Warehouse(settings.warehouse).query("SELECT spec_id FROM ncp_specs ORDER BY eval_order")["spec_id"]
    assert list(rows) == FIRST


def test_a_changed_file_is_loaded_again(dataset, tmp_path, config_file):
    root, loads = dataset
    first = specs_module._load_all()
    assert specs_module._load_all() is first and len(loads) == len(FIRST)
    bad = root / "specs" / f"{FIRST[0]}.yaml"
    raw = yaml.safe_load(bad.read_text())
    raw["commitments"][0]["type"] = "sometimes"
    bad.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    specs, problems = specs_module._load_all()
    assert len(loads) == 2 * len(FIRST)
    assert (len(specs), [p.record_id for p in problems]) == (len(FIRST) - 1, ["c_0"])
    fresh = load_specs(root, include_warnings=True)
    assert [s.meta.id for s in specs] == [s.meta.id for s in fresh[0]] and problems == fresh[1]


def test_the_stored_specs_are_validated_once_per_process(tmp_path, monkeypatch):
    """A cell's run reads `ncp_specs` for its episodes and again for its re-audit (~1 ms of CPU per spec
    each, the re-audit's after the cell's last answer): the second read reuses the validated specs (the
    same frozen objects, origin included); a changed row is validated again."""
    import polars as pl

    from wse_platform.ncp.spec import NarrativeSpec
    from wse_platform.ncp.stats import spec_rows

    monkeypatch.setattr(specs_module, "_PARSED", {}, raising=False)
    wh = Warehouse(tmp_path / "wh.duckdb")
    copy_ncp_specs(tmp_path / "d")
    specs, _ = load_specs(tmp_path / "d")
    wh.replace_partition("ncp_specs", spec_rows(specs[:3]), {})
    calls = []
    original = NarrativeSpec.model_validate_json
    monkeypatch.setattr(NarrativeSpec, "model_validate_json",
                        classmethod(lambda cls, s, **kw: calls.append(1) or original(s, **kw)))
    first = specs_module.specs_from_table(wh)
    again = specs_module.specs_from_table(wh, limit=2)
    assert len(calls) == 3 and [a is b for a, b in zip(again, first)] == [True, True]
    assert [(s.spec_id, s.source_file, s.eval_order) for s in again] == \
        [(s.spec_id, s.source_file, s.eval_order) for s in first[:2]]
    rows = spec_rows(specs[:3]).with_columns(pl.col("eval_order") + 10)
    wh.replace_partition("ncp_specs", rows, {})
    moved = specs_module.specs_from_table(wh)
    assert len(calls) == 6 and [s.eval_order for s in moved] == [s.eval_order + 10 for s in first]
