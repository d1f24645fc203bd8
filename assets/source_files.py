"""The input files as observable source assets: the lineage starts at the files, not at the first table.

One observable source asset per group of files (`wse_platform.source_files.FILE_SOURCES`: the DraCor
TEI plays, the Smallville personas, the Bianjing world, the NCP spec files with their synopses; the
100-Endings corpora and ideas are `endings_story_sources`). Its data version is the content hash of
its files, so editing a play makes `wse_initial_worlds` stale for Dagster's resolver, `wse status`
and the automation, and with it the seeds and every cell built from them.

Recorded cheaply, like the config assets (`assets/versioning.py`): whoever records config versions
(`wse status` / `wse materialize` at start, the `config_observer` sensor every 30 s) hashes the
files (~5 MB, a few ms) and records a runless *observation* only when the version changed, with the
per-file digests and what changed (`changed`: `dracor/shakedracor/hamlet.xml: edited`), which the
cause lines of `wse status` and the `in_sync` check quote. The UI's "Observe" runs the same hash.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from dagster import (AssetKey, AssetObservation, AssetSpec, DataVersion, MetadataValue, ObserveResult,
                     multi_observable_source_asset)

from assets.helpers import OWNERS
from assets.partitions import BenchmarkPartitions
from wse_platform.config import Settings
from wse_platform.dagster_private import DATA_VERSION_TAG
from wse_platform.source_files import (FILE_SOURCES, FileSource, content_version, describe_file_changes,
                                       file_digests)
from wse_platform.versions import CHANGES_META

FILE_SOURCE_TAG = "wse/file_source"   # recorded by `file_events`, not by an observation run
FILES_META = "files"                  # observation metadata: relative path -> digest
GROUPS = {"wse": "wse_sources", "ncp": "ncp_sources"}
OWNER = {"wse": OWNERS["wse_bench"], "ncp": OWNERS["ncp_bench"]}
BY_KEY = {s.key: s for s in FILE_SOURCES}


def _spec(src: FileSource) -> AssetSpec:
    return AssetSpec(src.key, group_name=GROUPS[src.benchmark], kinds=set(src.kinds), owners=[OWNER[src.benchmark]],
                     tags={FILE_SOURCE_TAG: "true", "benchmark": GROUPS[src.benchmark], "layer": "source"},
                     description=src.description + " Data version = content hash of the files: an edit marks "
                                 "what is built from them stale.")


def _observe(src: FileSource):
    @multi_observable_source_asset(specs=[_spec(src)], name=f"observe_{src.key}")
    def observe_files():
        digests = file_digests(src)
        return ObserveResult(asset_key=src.key, data_version=DataVersion(content_version(digests)),
                             metadata={"n_files": len(digests), FILES_META: MetadataValue.json(digests)})
    return observe_files


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    wanted = {"wse": parts.wse is not None, "ncp": parts.ncp is not None}
    return [_observe(src) for src in FILE_SOURCES if wanted[src.benchmark]]


def file_source_keys(objs) -> list[str]:
    return [s.key.to_user_string() for s in file_source_specs(objs)]


def file_source_specs(objs) -> list[AssetSpec]:
    from dagster import AssetsDefinition

    return [s for o in objs if isinstance(o, AssetsDefinition) for s in o.specs
            if s.tags.get(FILE_SOURCE_TAG) == "true"]


def _last(instance, key: AssetKey, partition: str | None = None):
    from dagster import AssetRecordsFilter

    flt = AssetRecordsFilter(asset_key=key, asset_partitions=[partition]) if partition else key
    res = instance.fetch_observations(flt, limit=1)
    return res.records[0].asset_observation if res.records else None


def _partitioned_versions(spec: AssetSpec) -> dict[str, str]:
    """The current version of each partition of a partitioned file source (the 100-Endings story
    sets: the files each set is built from, `assets/endings/stories.py`)."""
    from assets.endings.stories import source_version
    from resources.settings import settings_for

    path = getattr(spec.metadata.get("config_file"), "path", None)
    s = settings_for(str(path) if path else None)
    return {pk: source_version(s, pk) for pk in spec.partitions_def.get_partition_keys()}


def file_events(instance, key: str, spec: AssetSpec | None = None) -> list[AssetObservation]:
    """Runless observations of a file source whose files changed since the last one (else none);
    for a partitioned source (`spec` given), one per changed partition."""
    if key not in BY_KEY:
        if spec is None or spec.partitions_def is None:
            return []
        out = []
        for pk, version in _partitioned_versions(spec).items():
            last = _last(instance, AssetKey(key), pk)
            if last is None or (last.tags or {}).get(DATA_VERSION_TAG) != version:
                out.append(AssetObservation(asset_key=key, partition=pk, tags={DATA_VERSION_TAG: version}))
        return out
    src = BY_KEY[key]
    digests = file_digests(src)
    version = content_version(digests)
    last = _last(instance, AssetKey(key))
    if last is not None and (last.tags or {}).get(DATA_VERSION_TAG) == version:
        return []
    before = getattr(last.metadata.get(FILES_META), "data", None) if last is not None else None
    changes = describe_file_changes(before if isinstance(before, dict) else None, digests)
    return [AssetObservation(asset_key=key, tags={DATA_VERSION_TAG: version},
                             metadata={"n_files": len(digests), FILES_META: MetadataValue.json(digests),
                                       CHANGES_META: MetadataValue.md("\n".join(f"- {c}" for c in changes))})]
