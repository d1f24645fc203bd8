"""`wse materialize --parallel`: the cells with the most planned requests start first (issue 24 item 5).

The plan orders cells by partition key (B1 … B3+WMEM+WMOD): the heaviest architectures started
last, together, and the fleet idled through their long tail with few conversations in flight.
"""
from __future__ import annotations

from dagster import AssetKey

from wse_platform.config import settings_from_dict
from wse_platform.parallel_runs import largest_first
from wse_platform.runner import RunPlanStep


def test_cells_with_more_planned_requests_start_first(tmp_path):
    s = settings_from_dict({"models": {"m": {"backend": "litellm", "model_id": "openai/m"}},
                            "warehouse_path": str(tmp_path / "wh.duckdb"), "cache_dir": str(tmp_path / "c"),
                            "wse": {"models": ["m"], "architectures": ["B1", "B2", "B3+WMEM+WMOD"],
                                    "n_seeds": 3, "horizon": 2}})
    keys = [AssetKey("wse_trajectories")]
    steps = [RunPlanStep(keys, None), RunPlanStep(keys, "B1|m"), RunPlanStep(keys, "B2|m"),
             RunPlanStep(keys, "B3+WMEM+WMOD|m"), RunPlanStep(keys, None)]
    assert largest_first(s, steps) == [3, 2, 1, 0, 4]   # unplanned steps keep their order (their deps gate them)
