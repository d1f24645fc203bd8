"""Table 6 of the NCP-Bench paper from the 100 released specs, and the statistics helpers."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import yaml

from wse_platform.ncp.spec import NCP_DATASET_DIR, NarrativeSpec, load_specs
from wse_platform.ncp.stats import describe, spec_breakdown, spec_rows, spec_stats, table6_display

# The paper's Table 6 as printed: total, mean, std, min, max.
PAPER_TABLE6 = {
    "facts": ("1660", "16.60", "4.88", "8", "31"),
    "commitments": ("1222", "12.22", "3.33", "5", "24"),
    "trajectory_nodes": ("1511", "15.11", "4.86", "6", "28"),
}


@pytest.fixture(scope="module")
def released() -> list[NarrativeSpec]:
    specs, problems = load_specs(NCP_DATASET_DIR)
    assert problems == []
    return specs


def printed(row: dict) -> tuple[str, ...]:
    return (str(row["total"]), f"{row['mean']:.2f}", f"{row['std']:.2f}", str(row["min"]), str(row["max"]))


def test_table6_reproduced_to_the_printed_digit(released):
    stats = spec_stats(released)
    assert stats["n_specs"].to_list() == [100, 100, 100]
    assert {r["quantity"]: printed(r) for r in stats.to_dicts()} == PAPER_TABLE6


def test_population_std_would_not_reproduce_table6(released):
    """Documents the choice: only the sample std (ddof = 1) gives the printed digits."""
    pop = {r["quantity"]: f"{r['std']:.2f}" for r in spec_stats(released, ddof=0).to_dicts()}
    assert pop != {q: v[2] for q, v in PAPER_TABLE6.items()}
    assert pop["facts"] == "4.85"


def test_describe_hand_computed():
    d = describe([2, 3, 7])
    # mean 4; squared deviations 4 + 1 + 9 = 14; sample var 14 / 2 = 7, population var 14 / 3.
    assert d == {"n_specs": 3, "total": 12, "mean": 4.0, "std": pytest.approx(math.sqrt(7)), "min": 2, "max": 7}
    assert describe([2, 3, 7], ddof=0)["std"] == pytest.approx(math.sqrt(14 / 3))
    assert describe([2, 3, 7])["std"] == pytest.approx(np.std([2, 3, 7], ddof=1))
    with pytest.raises(ValueError, match="need more than 1"):
        describe([5])


def test_breakdown_matches_an_independent_count_of_the_raw_files(released):
    types, primary = Counter(), Counter()
    for f in sorted((NCP_DATASET_DIR / "specs").glob("*.yaml")):
        raw = yaml.safe_load(f.read_text(encoding="utf-8"))
        types.update(c["type"] for c in raw["commitments"])
        primary[raw["meta"]["genres"][0]] += 1
    b = spec_breakdown(released)
    got_types = {r["category"]: r["n"] for r in b.filter(b["dimension"] == "commitment_type").to_dicts()}
    got_primary = {r["category"]: r["n"] for r in b.filter(b["dimension"] == "primary_genre").to_dicts()}
    assert got_types == dict(types)
    assert got_primary == dict(primary)
    assert sum(got_types.values()) == int(spec_stats(released).filter(
        spec_stats(released)["quantity"] == "commitments")["total"][0])
    shares = b.filter(b["dimension"] == "primary_genre")["share"].sum()
    assert shares == pytest.approx(1.0)
    assert b.filter(b["dimension"] == "genre_any")["n"].sum() == 2 * len(released)


def test_spec_rows(released):
    rows = spec_rows(released)
    assert rows.height == 100
    assert rows["eval_order"].to_list() == list(range(100))
    sw = rows.filter(rows["title"].str.contains("——"))
    assert sw.height > 0 and not sw["display_title"].str.contains("——").any()
    r = rows.filter(rows["spec_id"] == released[0].spec_id).to_dicts()[0]
    assert r["n_invariant"] + r["n_ordering"] + r["n_achievement"] == r["n_commitments"]
    assert NarrativeSpec.model_validate_json(r["spec_json"]).model_dump() == released[0].model_dump()


def test_table6_display_rounds(released):
    disp = table6_display(spec_stats(released))
    assert disp.filter(disp["quantity"] == "facts")["std"][0] == 4.88


def test_assets_write_specs_stats_and_check(tmp_path):
    """`ncp_specs` → `ncp_spec_stats` / `ncp_spec_breakdown` through Dagster, plus the validity check."""
    from dagster import AssetChecksDefinition, materialize

    from assets.ncp.specs import build
    from assets.partitions import build_partitions
    from resources import LLMResource, SettingsResource, WarehouseResource, settings_for
    from wse_platform.warehouse import Warehouse

    cfg = tmp_path / "wse.yaml"
    cfg.write_text(f"warehouse_path: {tmp_path / 'w.duckdb'}\ncache_dir: {tmp_path / 'cache'}\n", encoding="utf-8")
    settings = settings_for(str(cfg))
    objs = build(settings, build_partitions(settings))
    checks = [o for o in objs if isinstance(o, AssetChecksDefinition)]
    assets = [o for o in objs if not isinstance(o, AssetChecksDefinition)]
    resources = {"warehouse": WarehouseResource(config_path=str(cfg)), "llm": LLMResource(config_path=str(cfg)),
                 "settings": SettingsResource(config_path=str(cfg))}
    result = materialize(assets + checks, resources=resources, raise_on_error=True)
    assert result.success
    assert [e.passed for e in result.get_asset_check_evaluations()] == [True]
    wh = Warehouse(tmp_path / "w.duckdb")
    stats = wh.query("SELECT * FROM ncp_spec_stats ORDER BY quantity").to_dicts()
    assert {r["quantity"]: printed(r) for r in stats} == PAPER_TABLE6
    assert wh.query("SELECT count(*) AS n FROM ncp_specs")["n"][0] == 100
    assert wh.query("SELECT sum(n) AS n FROM ncp_spec_breakdown WHERE dimension = 'commitment_type'")["n"][0] == 1222
    figs = tmp_path / ".wse" / "artifacts" / "ncp"  # Figures 3 and 6 attached to the spec assets
    assert (figs / "genre_distribution.png").stat().st_size > 0 and (figs / "spec_count_histograms.png").exists()
