"""A grid of the issue's size for bench/cell_overhead.py --grid: 144 WSE cells and 300 NCP cells.

`grid_config` widens a bench/fleet.py WSE config to 12 models x 12 architectures (WSE) and
100 narrator models x 3 architectures (NCP), every model on the same simulated server.
`record_grid` then records every cell asset partition that was never built as built, with a
runless materialization (`instance.report_runless_asset_event`), so the instance holds what it
holds after a run of the whole grid: the status computation and `in_sync` work over 444 cells.
Only the cells built by the bench hold warehouse rows; the others exist in the instance only
(that is all `in_sync` and `wse status` read). So the reruns select the cells and verdicts, not
the final tables (which would read the rows of every cell).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

WSE_MODELS = 12
NCP_NARRATORS = 100
NCP_ARCHS = ["baseline+adversarial", "baseline+natural", "memory+adversarial"]


def grid_config(cfg: Path, url: str) -> None:
    raw = yaml.safe_load(cfg.read_text())
    base = raw["models"]["fleet"]
    extra = [f"grid-w{i:02d}" for i in range(1, WSE_MODELS)] + [f"grid-n{i:03d}" for i in range(NCP_NARRATORS)]
    for name in extra:
        raw["models"][name] = {**base, "model_id": f"hosted_vllm/{name}", "api_base": url}
    wse_models = ["fleet"] + extra[: WSE_MODELS - 1]
    raw["wse"]["models"] = wse_models
    raw["wse"]["model_groups"] = {"fleet": wse_models}
    raw["ncp"].update({"narrators": extra[WSE_MODELS - 1:], "player_model": "fleet", "extraction_models": [],
                       "auditor": {"model": "fleet-j1", "prompt_version": "v1"}, "reaudit_auditors": [],
                       "t_max": 1, "n_specs": 1, "spec_ids": None, "architectures": NCP_ARCHS})
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))


def record_grid(folder: Path) -> str:
    """Record every never-built partition of the WSE and NCP cell assets as built; returns a summary."""
    os.environ["DAGSTER_HOME"] = str(folder / "dagster_home")
    os.environ["WSE_CONFIG"] = str(folder / "wse.yaml")
    from dagster import AssetMaterialization, DagsterInstance

    from wse_platform.definitions import build_definitions

    defs = build_definitions(str(folder / "wse.yaml"))
    graph = defs.resolve_asset_graph()
    instance = DagsterInstance.get()
    t0, n, cells = time.perf_counter(), 0, {}
    for key in graph.materializable_asset_keys:
        name = key.to_user_string()
        pdef = graph.get(key).partitions_def
        if not name.startswith(("wse_", "ncp_")) or pdef is None or "|" not in (pdef.get_partition_keys() or [""])[0]:
            continue
        done = instance.get_materialized_partitions(key)
        for pk in pdef.get_partition_keys():
            cells.setdefault(name.split("_")[0], set()).add(pk)
            if pk not in done:
                instance.report_runless_asset_event(AssetMaterialization(asset_key=key, partition=pk))
                n += 1
    return (f"grid: {len(cells.get('wse', ()))} WSE cells, {len(cells.get('ncp', ()))} NCP cells; recorded {n} "
            f"cell asset partitions as built in {time.perf_counter() - t0:.0f} s")
