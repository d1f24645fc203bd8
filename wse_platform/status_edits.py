"""Which edit made a partition stale, named on every asset downstream of it.

A config asset records what changed with each new version (`changed`, see `assets/versioning.py`),
and an observable file source what files changed (`assets/source_files.py`). The cause lines of
`wse status` (and of the `in_sync` check) name those edits where the stale dependency *is* the edited
source; further down, the cause is "an upstream partition is stale" or, once that upstream was rebuilt,
"has a new data version", which does not say why. `EditLog.since_built` answers for any asset
partition: the edits recorded on its sources (config and file assets among its ancestors) after it was
last built — e.g. `wse-gen › horizon: 1 → 2` on a table built from a regenerated cell.

Cost: one query per source asset and one per asset with a stale partition, per status computation.
"""
from __future__ import annotations

import bisect
from typing import Any

from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance

from wse_platform.status_rows import MAX_EDITS, merge_edits, with_edits  # noqa: F401 - re-exported
from wse_platform.versions import CHANGES_META


def record_changes(record) -> list[str]:
    """What a source record says changed (`status.recorded_changes` of its latest record)."""
    event = record.event_log_entry.asset_materialization or record.event_log_entry.asset_observation
    value = event.metadata.get(CHANGES_META) if event is not None else None
    text = getattr(value, "md_str", None)
    return [line[2:] for line in text.splitlines() if line.startswith("- ")] if text else []


class EditLog:
    """Edits recorded on the sources of the assets of one graph (read lazily, once per source)."""

    def __init__(self, graph, instance: DagsterInstance):
        self.graph, self.instance = graph, instance
        self._sources: dict[AssetKey, list[AssetKey]] = {}
        self._records: dict[AssetKey, tuple[int, list]] = {}
        self._built: dict[AssetKey, dict[str | None, int]] = {}
        self._changes: dict[int, list[str]] = {}  # per storage id: a record's metadata is parsed once
        self._same: dict[tuple[AssetKey, AssetKey], bool] = {}  # (source, asset): the same partitions

    def other_sources(self, key: AssetKey) -> list[AssetKey]:
        """The graph's sources that are not `key`'s."""
        mine = set(self.sources_of(key))
        return sorted((k for k in self.graph.toposorted_asset_keys if k not in mine and self._is_source(k)),
                      key=lambda k: k.to_user_string())

    def _is_source(self, key: AssetKey) -> bool:
        node = self.graph.get(key)
        return not node.is_materializable and not node.parent_keys  # config and file assets (not llm_calls)

    def sources_of(self, key: AssetKey) -> list[AssetKey]:
        if key not in self._sources:
            seen, frontier = set(), [key]
            while frontier:
                for p in self.graph.get(frontier.pop()).parent_keys:
                    if p not in seen and self.graph.has(p):
                        seen.add(p)
                        frontier.append(p)
            self._sources[key] = sorted((k for k in seen if self._is_source(k)), key=lambda k: k.to_user_string())
        return self._sources[key]

    def built_at(self, key: AssetKey, pk: str | None) -> int | None:
        """Storage id of the latest materialization of `key[pk]` (one query per asset)."""
        if key not in self._built:
            if self.graph.get(key).partitions_def is None:
                res = self.instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
                self._built[key] = {None: res.records[0].storage_id} if res.records else {}
            else:
                self._built[key] = dict(self.instance.get_latest_storage_id_by_partition(
                    key, DagsterEventType.ASSET_MATERIALIZATION))
        return self._built[key].get(pk)

    def _after(self, source: AssetKey, storage_id: int) -> list[tuple[int, str | None, Any]]:
        """The source's records after `storage_id` as (storage id, partition, record), oldest first
        (fetched once per source, and once more for what is older than the earliest asked so far)."""
        have = self._records.get(source)
        if have is None or storage_id < have[0]:  # the records not fetched yet: after storage_id, up to have[0]
            node = self.graph.get(source)
            flt = AssetRecordsFilter(asset_key=source, after_storage_id=storage_id,
                                     before_storage_id=have[0] + 1 if have is not None else None)
            res = (self.instance.fetch_observations(flt, limit=1000) if node.is_observable
                   else self.instance.fetch_materializations(flt, limit=1000))
            new = [(r.storage_id, r.partition_key, r) for r in res.records]
            newest = sorted([*new, *(have[1] if have is not None else [])], key=lambda e: e[0])
            have = (storage_id, newest[-1000:])  # the newest 1000 after storage_id, as one query would give
            self._records[source] = have
        entries = have[1]
        return entries[bisect.bisect_right(entries, storage_id, key=lambda e: e[0]):]

    def _changes_of(self, record) -> list[str]:
        if record.storage_id not in self._changes:
            self._changes[record.storage_id] = record_changes(record)
        return self._changes[record.storage_id]

    def since_built(self, key: AssetKey, pk: str | None) -> list[str]:
        """The edits recorded on `key`'s sources after `key[pk]` was last built (for a partitioned
        source of the same partitions, on that partition only), oldest first."""
        return merge_edits(rec for records in self.since_built_by_source(key, pk).values() for rec in records)

    def since_built_by_source(self, key: AssetKey, pk: str | None,
                              sources: list[AssetKey] | None = None) -> dict[str, list[list[str]]]:
        """`since_built` before merging: per source (by name, in that order), the edits of each of its
        records, oldest first; sources with no record are left out. `sources`: these instead of
        `key`'s own (`status_replay.gather`: the sources a switch turned on would give it)."""
        built = self.built_at(key, pk)
        if built is None:
            return {}
        pdef = self.graph.get(key).partitions_def
        out: dict[str, list[list[str]]] = {}
        for source in self.sources_of(key) if sources is None else sources:
            if (source, key) not in self._same:
                self._same[(source, key)] = self.graph.get(source).partitions_def == pdef
            same = pk is not None and self._same[(source, key)]
            found = [self._changes_of(record) for _, ppk, record in self._after(source, built)
                     if not (same and ppk != pk)]
            if found:
                out[source.to_user_string()] = found
        return out
