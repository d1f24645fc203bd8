"""Every partition definition of the project, built once from the config and imported everywhere.

- WSE-bench cells: model × architecture (dimensions ``arch`` and ``model``; Dagster orders
  multi-partition keys alphabetically, so a key reads ``B2+WMEM|smollm2``).
- NCP-Bench cells: narrator model × narrator/player architecture (same two dimensions).
- NCP spec extraction: one partition per extraction model.
- 100-Endings sets: ``gen:<model>:<pipeline>`` for generated sets and ``human:<corpus>`` for
  human corpora in one static list, so impossible combinations never show as missing.
Adding a model to the config adds exactly its cells.
"""
from __future__ import annotations

from dataclasses import dataclass

from dagster import MultiPartitionKey, MultiPartitionsDefinition, StaticPartitionsDefinition

from wse_platform.config import Settings

MODEL_DIM = "model"
ARCH_DIM = "arch"


def _cells(models: list[str], archs: list[str]) -> MultiPartitionsDefinition | None:
    if not models or not archs:
        return None
    return MultiPartitionsDefinition({
        MODEL_DIM: StaticPartitionsDefinition(list(dict.fromkeys(models))),
        ARCH_DIM: StaticPartitionsDefinition(list(dict.fromkeys(archs))),
    })


def endings_set_keys(settings: Settings) -> list[str]:
    gen = [f"gen:{m}:{p}" for m in settings.endings.generators for p in settings.endings.pipelines]
    human = [f"human:{c.name}" for c in settings.endings.corpora]
    return human + gen


@dataclass(frozen=True)
class BenchmarkPartitions:
    wse: MultiPartitionsDefinition | None
    ncp: MultiPartitionsDefinition | None
    ncp_extraction: StaticPartitionsDefinition | None
    endings: StaticPartitionsDefinition | None


def build_partitions(settings: Settings) -> BenchmarkPartitions:
    ext = list(dict.fromkeys(settings.ncp.extraction_models))
    sets = endings_set_keys(settings)
    return BenchmarkPartitions(
        wse=_cells(settings.wse.models, settings.wse.architectures),
        ncp=_cells(settings.ncp.narrators, settings.ncp.architectures),
        ncp_extraction=StaticPartitionsDefinition(ext) if ext else None,
        endings=StaticPartitionsDefinition(sets) if sets else None,
    )


def cell_of(partition_key: str | MultiPartitionKey) -> tuple[str, str]:
    """(model, arch) of a model × architecture partition key."""
    if isinstance(partition_key, MultiPartitionKey):
        dims = partition_key.keys_by_dimension
        return dims[MODEL_DIM], dims[ARCH_DIM]
    arch, model = str(partition_key).split("|", 1)  # alphabetical dimension order: arch|model
    return model, arch


def cell_key(model: str, arch: str) -> MultiPartitionKey:
    return MultiPartitionKey({MODEL_DIM: model, ARCH_DIM: arch})


def parse_endings_set(key: str) -> dict[str, str | None]:
    """``gen:<model>:<pipeline>`` or ``human:<corpus>`` → its parts."""
    kind, _, rest = key.partition(":")
    if kind == "gen":
        model, _, pipeline = rest.rpartition(":")
        return {"kind": "gen", "model": model, "pipeline": pipeline, "corpus": None}
    if kind == "human":
        return {"kind": "human", "model": None, "pipeline": None, "corpus": rest}
    raise ValueError(f"not a 100-Endings set key: {key!r}")
