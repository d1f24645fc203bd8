"""A WSE judging step reads its cell's trajectories, steps and seeds on one warehouse connection
(issue 24 item 3: each DuckDB open reads the whole catalog; `bench/cell_overhead.py` measures the time)."""
from __future__ import annotations

import polars as pl

from wse_platform.warehouse import Warehouse


def test_cell_trajectories_opens_the_warehouse_once(tmp_path, monkeypatch):
    from assets.wse import judging

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.ensure_schema()
    wh.execute("INSERT INTO wse_trajectories (model, arch, seed_id) VALUES ('m', 'B1', 's1')")
    read_seeds = []
    monkeypatch.setattr(judging, "stored_seeds", lambda w: read_seeds.append(w.query("SELECT 1 AS x")) or [])
    monkeypatch.setattr(judging, "judged_trajectories", lambda steps, trajs, seeds: ["judged"])
    opens = []
    real_open = Warehouse._open
    monkeypatch.setattr(Warehouse, "_open", lambda self, *a, **k: opens.append(a) or real_open(self, *a, **k))
    judged, trajs = judging.cell_trajectories(wh, "m", "B1")
    assert judged == ["judged"] and isinstance(trajs, pl.DataFrame) and trajs["seed_id"].to_list() == ["s1"]
    assert read_seeds  # the seeds were read too, on the same connection
    assert len(opens) == 1, f"{len(opens)} warehouse opens for one cell's trajectories, steps and seeds"
