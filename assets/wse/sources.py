"""WSE-bench source assets: the nine InitialWorlds and the 42 EpisodeSeeds (unpartitioned).

Thin: parsing and seed selection live in `wse_platform.wse.{worlds,seeds}`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import json

import polars as pl
from dagster import MetadataValue, asset

from assets.helpers import write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import WarehouseResource
from wse_platform.config import Settings
from wse_platform.wse.seeds import build_episode_seeds
from wse_platform.wse.world import EpisodeSeed, InitialWorld
from wse_platform.wse.worlds import load_initial_worlds

GROUP = "wse_bench"
WORLD_CODE = ("wse_platform/wse/world.py", "wse_platform/wse/worlds.py", "wse_platform/wse/tei.py",
              "wse_platform/wse/smallville.py", "wse_platform/wse/bianjing.py")
SEED_CODE = ("wse_platform/wse/world.py", "wse_platform/wse/seeds.py")
PAPER_N_SEEDS = 42

WORLD_SCHEMA = {"world_id": pl.Utf8, "title": pl.Utf8, "source_family": pl.Utf8, "language": pl.Utf8,
                "n_characters": pl.Int32, "world_order": pl.Int32, "world_json": pl.Utf8}
SEED_SCHEMA = {"seed_id": pl.Utf8, "world_id": pl.Utf8, "source_family": pl.Utf8, "language": pl.Utf8,
               "player_id": pl.Utf8, "seed_order": pl.Int32, "seed_json": pl.Utf8}


def initial_world_rows(worlds: list[InitialWorld]) -> pl.DataFrame:
    return pl.DataFrame([{
        "world_id": w.world_id, "title": w.title, "source_family": w.source_family, "language": w.language,
        "n_characters": len(w.characters), "world_order": i, "world_json": w.model_dump_json(),
    } for i, w in enumerate(worlds)], schema=WORLD_SCHEMA)


def episode_seed_rows(seeds: list[EpisodeSeed]) -> pl.DataFrame:
    return pl.DataFrame([{
        "seed_id": s.seed_id, "world_id": s.world_id, "source_family": s.source_family, "language": s.language,
        "player_id": s.player_id, "seed_order": i, "seed_json": s.model_dump_json(),
    } for i, s in enumerate(seeds)], schema=SEED_SCHEMA)


def stored_worlds(wh) -> list[InitialWorld]:
    df = wh.query("SELECT world_id, world_json FROM wse_initial_worlds ORDER BY world_order")
    if not df.height:
        raise ValueError("wse_initial_worlds is empty: materialize it first")
    return [InitialWorld.model_validate_json(j) for j in df["world_json"]]


def stored_seeds(wh) -> list[EpisodeSeed]:
    """Every stored seed, in the seed table's fixed order."""
    df = wh.query("SELECT seed_id, seed_json FROM wse_episode_seeds ORDER BY seed_order")
    if not df.height:
        raise ValueError("wse_episode_seeds is empty: materialize it first")
    return parse_seed_rows(df)


_PARSED: dict[tuple[str, ...], list[EpisodeSeed]] = {}   # stored seed JSON -> the seeds (frozen models)


def parse_seed_rows(df: pl.DataFrame) -> list[EpisodeSeed]:
    """The seeds of (seed_id, seed_json) rows, validated once per process for the same JSON (a cell's
    generation and judging steps each read all 42: ~4 ms of CPU each time, issue 24); a new list of
    the same frozen seed objects each call."""
    key = tuple(df["seed_json"].to_list())
    hit = _PARSED.get(key)
    if hit is None:
        hit = []
        for sid, blob in df.select("seed_id", "seed_json").iter_rows():
            try:
                hit.append(EpisodeSeed.model_validate_json(blob))
            except ValueError as err:
                raise ValueError(f"wse_episode_seeds: seed {sid}: seed_json does not validate: {err}") from None
        if len(_PARSED) >= 4:
            _PARSED.clear()
        _PARSED[key] = hit
    return list(hit)


def _counts(df: pl.DataFrame, col: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in df.group_by(col).len().sort(col).iter_rows()}


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    @asset(
        name="wse_initial_worlds",
        deps=["wse_dracor_plays", "wse_smallville_personas", "wse_bianjing_world"],  # assets/source_files.py
        group_name=GROUP,
        kinds={"duckdb"},
        code_version=code_version(*WORLD_CODE),
        description="One row per WSE-bench InitialWorld (9: seven DraCor plays frozen at their snapshot "
                    "point, the 25 Smallville personas, our own Bianjing-1100 world): title, source family, "
                    "language, cast size and the full world as JSON (characters, relationships, facts, time).",
    )
    def wse_initial_worlds(warehouse: WarehouseResource):
        df = initial_world_rows(load_initial_worlds())
        return write_table(warehouse.get(), "wse_initial_worlds", df,
                           extra_metadata={"by_family": MetadataValue.json(_counts(df, "source_family"))})

    @asset(
        name="wse_episode_seeds",
        deps=["wse_initial_worlds"],
        group_name=GROUP,
        kinds={"duckdb"},
        code_version=code_version(*SEED_CODE),
        description="One row per EpisodeSeed (42 = 14 ITP + 14 Smallville + 14 DraCor, 2 per play), in a "
                    "fixed family-interleaved order (`seed_order`): cast of 1 player + 4 NPCs, opening, three "
                    "initial actions and the choice schedule shared by every model and architecture. "
                    "Generation uses the family-balanced first `wse.n_seeds` of them.",
    )
    def wse_episode_seeds(warehouse: WarehouseResource):
        wh = warehouse.get()
        seeds = build_episode_seeds(stored_worlds(wh), n=PAPER_N_SEEDS)
        df = episode_seed_rows(seeds)
        return write_table(wh, "wse_episode_seeds", df, extra_metadata={
            "by_family": MetadataValue.json(_counts(df, "source_family")),
            "by_world": MetadataValue.json(_counts(df, "world_id")),
            "first_opening": MetadataValue.md(json.dumps(seeds[0].opening, ensure_ascii=False)[:500]),
        })

    return [wse_initial_worlds, wse_episode_seeds]
