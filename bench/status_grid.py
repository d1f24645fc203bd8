"""A warehouse with the paper's cell counts for `bench/status_speed.py` (issue 24 item 3): 144 WSE-bench
cells (12 models × 12 architectures) and 300 NCP-Bench cells (100 narrators × 3 architectures),
every asset partition materialized, in minutes and without a model.

The config is the shipped `wse.yaml` with those models (litellm entries pointing at a closed port:
never called) and its own output folder. The Dagster instance is the one `wse` uses
(`runner.get_instance`), the config assets are recorded by `runner.observe_sources` as `wse status`
records them, and every materializable asset of the real definitions is then materialized by a
stand-in with the same key, partitions, parents (and partition mappings) and code version that
writes nothing to the warehouse: one Dagster run per asset over all its partitions. Dagster itself
writes the materializations with their data versions and provenance, so the event log holds what
`wse status` reads after a real run: the same records per partition, not the table contents.
The warehouse gets the platform's tables, empty (`Warehouse.ensure_schema`): `wse status` reads it
only to check that it exists and for its LLM-calls block. `--schema-only FOLDER` adds them to a grid
built before.

    python bench/status_grid.py /tmp/status-grid        # then:
    python bench/status_speed.py --config /tmp/status-grid/wse.yaml --edit wse.horizon=3 --runs 3
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wse_platform.config import NCP_ARCHITECTURES, WSE_ARCHITECTURES  # noqa: E402

WSE_MODELS = [f"m{i:02d}" for i in range(1, 13)]
NARRATORS = [f"n{i:03d}" for i in range(1, 101)]


def write_config(folder: Path) -> Path:
    raw = yaml.safe_load((ROOT / "wse.yaml").read_text(encoding="utf-8"))
    for name in WSE_MODELS + NARRATORS:
        raw["models"][name] = {"backend": "litellm", "model_id": f"hosted_vllm/{name}",
                               "api_base": "http://127.0.0.1:9/v1"}
    raw.update(warehouse_path=str(folder / "warehouse.duckdb"), cache_dir=str(folder / "cache"),
               artifacts_dir=str(folder / "artifacts"))
    raw["wse"].update(models=WSE_MODELS, model_groups={"grid": WSE_MODELS})
    raw["wse"].update(architectures=list(WSE_ARCHITECTURES))  # all 12 (the quick profile keeps B1 only)
    raw["ncp"].update(narrators=NARRATORS, architectures=list(NCP_ARCHITECTURES))  # all 3
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wse.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def stand_in(graph, key):
    """A no-op asset with `key`'s partitions, parents (and their partition mappings) and code version."""
    from dagster import AssetDep, BackfillPolicy, MaterializeResult, asset

    node = graph.get(key)
    deps = [AssetDep(p, partition_mapping=graph.get_partition_mapping(key, p)) for p in node.parent_keys]

    @asset(key=key, deps=deps, partitions_def=node.partitions_def, code_version=node.code_version,
           backfill_policy=BackfillPolicy.single_run() if node.partitions_def else None)
    def _stand_in():
        return MaterializeResult()

    return _stand_in


def build(folder: Path) -> Path:
    from dagster import AssetSpec, materialize
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from wse_platform.config import load_settings
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import QUIET_RUN_CONFIG, get_instance, observe_sources
    from wse_platform.warehouse import Warehouse

    cfg = write_config(folder)
    settings = load_settings(str(cfg))
    instance = get_instance(settings)
    Warehouse(settings.warehouse).ensure_schema()  # the tables, empty (the platform's DDL)
    defs = build_definitions(str(cfg))
    graph = defs.resolve_asset_graph()
    observe_sources(defs, instance)
    keys = [k for k in graph.toposorted_asset_keys if graph.get(k).is_materializable]
    outside = [AssetSpec(k) for k in graph.toposorted_asset_keys if not graph.get(k).is_materializable]
    t0 = time.perf_counter()
    for i, key in enumerate(keys):
        node = graph.get(key)
        pks = list(node.partitions_def.get_partition_keys()) if node.partitions_def else []
        tags = {ASSET_PARTITION_RANGE_START_TAG: pks[0], ASSET_PARTITION_RANGE_END_TAG: pks[-1]} if pks else {}
        others = [stand_in(graph, k) for k in keys if k != key]
        result = materialize([stand_in(graph, key), *others, *outside], instance=instance, tags=tags,
                             run_config=QUIET_RUN_CONFIG, selection=[key])
        assert result.success, key
        print(f"{i + 1}/{len(keys)} {key.to_user_string()}: {len(pks) or 1} partition(s) "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"built {folder}: {sum(1 for _ in keys)} assets; config {cfg}")
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--schema-only", action="store_true")
    args = ap.parse_args()
    if args.schema_only:
        from wse_platform.config import load_settings
        from wse_platform.warehouse import Warehouse
        Warehouse(load_settings(str(args.folder / "wse.yaml")).warehouse).ensure_schema()
        return
    if os.environ.get("DAGSTER_HOME"):
        sys.exit("unset DAGSTER_HOME: the grid gets its own Dagster home inside the folder")
    os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
    build(args.folder.resolve())


if __name__ == "__main__":
    main()
