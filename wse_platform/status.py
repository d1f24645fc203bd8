"""What is stale or missing, per asset and partition, and why.

Statuses:
- ``missing``: never materialized.
- ``stale``: Dagster's own stale-status resolver (the logic behind the UI's "unsynced": new code
  version, new data version of a dependency such as a config source) says so, or an upstream
  partition is itself stale (propagated here in topological order: the resolver only reacts
  once the upstream has been *re-materialized*), or — Dagster's known limit — one of 100 or
  more upstream partitions was materialized after this one
  (SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD: such edges are not checked by Dagster).
- ``incomplete``: materialized, up to date with what exists, but some upstream partitions are
  missing (e.g. a model was just added). Not stale: nothing it read has changed; it is rebuilt
  after the missing cells by ``wse materialize --stale``.
- ``fresh``: none of the above.

Cost: the resolver is only asked about materialized partitions (one query per asset lists
them); never-materialized partitions are ``missing`` without further queries. The result is
kept in DAGSTER_HOME and the next call recomputes only the partitions whose inputs changed (a new
event, a new definition, partitions added by a new model or architecture), and the partitions that
read them (``compute_status``, ``_dirty_partitions``).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from collections import OrderedDict
from dataclasses import fields
from pathlib import Path

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, Definitions

from wse_platform.dagster_private import (DATA_VERSION_TAG, PARTITION_THRESHOLD, AssetGraph,
                                          BatchedStaleStatusResolver, CachingStaleStatusResolver, StaleStatus, latest_materialization_ids,
                                          latest_observation_ids)
from wse_platform.status_rows import (FRESH, INCOMPLETE, MAX_LISTED, MISSING, STALE,  # noqa: F401 - re-exported
                                      CellStatus, combine, listed)
from wse_platform.versions import CHANGES_META


def _resolver(graph, instance: DagsterInstance) -> CachingStaleStatusResolver:
    from wse_platform.dagster_private import AssetGraphView, TemporalContext, get_current_datetime

    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    return BatchedStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def _label(key: AssetKey, pk: str | None) -> str:
    return key.to_user_string() + (f"[{pk}]" if pk else "")


_listed = listed


def parent_partitions(graph, child: AssetKey, pk: str | None, parent: AssetKey) -> list[str | None]:
    """The partitions of `parent` that partition `pk` of `child` reads (None = unpartitioned)."""
    ppdef = graph.get(parent).partitions_def
    if ppdef is None:
        return [None]
    if pk is None:
        return partition_keys(ppdef)
    if ppdef == graph.get(child).partitions_def:
        return [pk]
    sub = graph.get_parent_partition_keys_for_child(pk, parent, child).partitions_subset
    return list(sub.get_partition_keys())


def _materialized(instance: DagsterInstance, key: AssetKey, partitioned: bool) -> set[str | None]:
    if partitioned:
        return set(instance.get_materialized_partitions(key))
    return {None} if instance.get_latest_materialization_event(key) is not None else set()


def _latest_storage_id(instance: DagsterInstance, key: AssetKey, pk: str | None) -> int | None:
    res = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[pk] if pk else None), limit=1)
    return res.records[0].storage_id if res.records else None


def _updated_after(instance: DagsterInstance, key: AssetKey, storage_id: int,
                   pks: list[str | None]) -> list[str]:
    """Partitions of `key` (among `pks`) materialized after `storage_id`."""
    wanted = set(pks)
    res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, after_storage_id=storage_id),
                                          limit=10_000)
    return sorted({r.partition_key for r in res.records if r.partition_key in wanted})


def _resolver_causes(resolver: CachingStaleStatusResolver, key: AssetKey, pk: str | None,
                     instance: DagsterInstance | None = None, own: list | None = None) -> list[str]:
    """The resolver's cause lines; `own` gets [sort key, line] of those a config edit leaves as they
    are: all but a config asset's new data version (which `status_replay` computes again)."""
    out = []
    for c in resolver.get_stale_causes(key, pk):
        where = _label(c.dependency.asset_key, c.dependency.partition_key) if c.dependency else "code"
        changed = recorded_changes(instance, c.dependency.asset_key, c.dependency.partition_key) \
            if instance is not None and c.dependency else []
        out.append(_cause(f"{where}: {c.reason}", changed))
        if own is not None and not (c.dependency and c.category.value == "DATA"
                                    and is_config(resolver.asset_graph, c.dependency.asset_key)):
            own.append([c.sort_key, out[-1]])
    return out


def is_config(graph, key: AssetKey) -> bool:
    """A config asset (its version is a fingerprint of the settings, `versions.CONFIG_FINGERPRINTS`)."""
    from wse_platform.versions import CONFIG_FINGERPRINTS
    return key.to_user_string() in CONFIG_FINGERPRINTS and not graph.get(key).is_materializable


def _cause(line: str, changed: list[str]) -> str:
    """A cause line, followed by what the dependency's version says changed, if it says."""
    return line + (f" ({'; '.join(changed)})" if changed else "")


def recorded_changes(instance: DagsterInstance, key: AssetKey, pk: str | None) -> list[str]:
    """What the latest materialization of `key[pk]` says changed (config assets record it, see
    `assets/versioning.py`), so a cause line names the edit, e.g. `ncp-gen › t_max: 1 → 2`."""
    res = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[pk] if pk else None), limit=1)
    mat = res.records[0].asset_materialization if res.records else None
    value = mat.metadata.get(CHANGES_META) if mat is not None else None
    text = getattr(value, "md_str", None)
    return [line[2:] for line in text.splitlines() if line.startswith("- ")] if text else []


STATUS_CACHE = "wse_status_cache.json"  # in DAGSTER_HOME
_CACHE_FORMAT = 6  # 4: per-asset marks, recomputed incrementally; 5: causes name the edits; 6: row facts


_KEPT = 8  # graphs / partitions definitions whose derived values a process keeps (definitions reloaded: new ones)
_by_graph: "OrderedDict[int, tuple[object, dict[str, str]]]" = OrderedDict()
_by_pdef: "OrderedDict[int, tuple[object, list]]" = OrderedDict()


def _kept(memo: OrderedDict, obj, make):
    """`make(obj)`, computed once per object while the object is among the last `_KEPT` asked (the
    object is held, so its id is not reused meanwhile)."""
    hit = memo.get(id(obj))
    if hit is not None and hit[0] is obj:
        memo.move_to_end(id(obj))
        return hit[1]
    value = make(obj)
    memo[id(obj)] = (obj, value)
    while len(memo) > _KEPT:
        memo.popitem(last=False)
    return value


def partition_keys(pdef) -> list[str]:
    """`list(pdef.get_partition_keys())`, computed once per definition for static partitions (a
    multi-partitions definition builds each key object anew on every call: ~1 ms per 144 cells,
    asked per asset by every status computation, e.g. each step hook's `in_sync`). A new list each
    call; dynamic or time-window partitions are asked every time."""
    if not _static(pdef):
        return list(pdef.get_partition_keys())
    return list(_kept(_by_pdef, pdef, lambda d: list(d.get_partition_keys())))


def _static(pdef) -> bool:
    from dagster import MultiPartitionsDefinition, StaticPartitionsDefinition

    if type(pdef) is StaticPartitionsDefinition:
        return True
    return type(pdef) is MultiPartitionsDefinition and all(
        type(d.partitions_def) is StaticPartitionsDefinition for d in pdef.partitions_defs)


def _signatures(graph) -> dict[str, str]:
    """What the definitions say about each asset that a status depends on: kind, code version,
    partitions and parents. Computed once per graph object (the definitions of a process, or of a
    code server until it reloads them; dynamic partitions are read every time)."""
    if not all(_static(graph.get(k).partitions_def) for k in graph.toposorted_asset_keys
               if graph.get(k).partitions_def is not None):
        return _graph_signatures(graph)
    return dict(_kept(_by_graph, graph, _graph_signatures))


def _graph_signatures(graph) -> dict[str, str]:
    out = {}
    for key in graph.toposorted_asset_keys:
        node = graph.get(key)
        pdef = node.partitions_def
        out[key.to_user_string()] = json.dumps([
            node.is_materializable, node.is_external, node.is_observable, node.code_version,
            partition_keys(pdef) if pdef else None,
            sorted(p.to_user_string() for p in node.parent_keys)])
    return out


_ROW_FIELDS = tuple(f.name for f in fields(CellStatus))


def _row(r: CellStatus) -> dict:
    """`dataclasses.asdict(r)` without its deep copy (the same JSON, ~20x cheaper: the saved result
    holds every partition's row and is written by each computation, e.g. each step hook's `in_sync`)."""
    return {name: getattr(r, name) for name in _ROW_FIELDS}


def event_marks(graph, instance: DagsterInstance) -> dict[str, list[int]]:
    """Per asset, the storage ids of its newest materialization and (for an observable source) its
    newest observation, 0 for none. A new materialization of any partition, a new config version,
    an observation or a wipe changes them. Materializations come from the asset rows (one query for
    all assets, only the storage ids read: `dagster_private.latest_materialization_ids`, not the
    materializations' metadata); observations, which Dagster does not keep there, from one grouped
    query over the event log (`latest_observation_ids`)."""
    keys = list(graph.toposorted_asset_keys)
    marks = {k.to_user_string(): [0, 0] for k in keys}
    for key, storage_id in latest_materialization_ids(instance, keys).items():
        marks[key.to_user_string()][0] = storage_id
    for key, storage_id in latest_observation_ids(instance, [k for k in keys if graph.get(k).is_observable]).items():
        marks[key.to_user_string()][1] = storage_id
    return marks


def _changed_with_descendants(graph, changed: set[AssetKey]) -> set[AssetKey]:
    out: set[AssetKey] = set()
    frontier = list(changed)
    while frontier:
        key = frontier.pop()
        if key in out:
            continue
        out.add(key)
        frontier.extend(c for c in graph.get(key).child_keys if graph.has(c))
    return out


# The result this process saved last, with the file's identity right after it was written: the next
# computation in the process (a run's next step hook, its `sync_checks`) reads it from here instead of
# parsing the file again (~1 MB for the 444-cell grid) while no other process has replaced the file.
# Any saved result is a consistent snapshot (rows and the marks they were computed at), so reading it
# from here gives the rows the file gives.
_saved_here: dict[str, tuple] = {}


def _file_identity(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def _remember_saved(path: Path, data: dict) -> None:
    identity = _file_identity(path)
    if identity is not None:
        _saved_here["last"] = (identity, data)


def _load_cache(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    last = _saved_here.get("last")
    if last is not None and last[0] == _file_identity(path):
        data = last[1]  # new containers: the caller changes the marks it gets (`_saved_pending`)
        return {**data, "signatures": dict(data["signatures"]), "marks": dict(data["marks"]),
                "pending": dict(data["pending"]), "rows": [CellStatus(**r) for r in data["rows"]]}
    with contextlib.suppress(Exception):  # unreadable, foreign or old cache: recompute in full
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") == _CACHE_FORMAT and isinstance(data.get("rows"), list):
            data["rows"] = [CellStatus(**r) for r in data["rows"]]
            return data
    return None


def asset_graph(defs: Definitions | AssetGraph) -> AssetGraph:
    """The asset graph of `defs` (the CLI holds Definitions; a sensor or a check op, the graph)."""
    return defs.resolve_asset_graph() if isinstance(defs, Definitions) else defs


def compute_status(defs: Definitions | AssetGraph, instance: DagsterInstance, only_problems: bool = True,
                   use_cache: bool = True, refresh: bool = False, marks: dict | None = None,
                   assets: Iterable[AssetKey] | None = None,
                   resolver: CachingStaleStatusResolver | None = None) -> list[CellStatus]:
    """Status of every materializable asset partition, in topological order.

    The stale resolver costs about one event-log query per dependency edge and partition, so the
    result is kept in DAGSTER_HOME with each asset's definition signature and event marks (see
    above). The next call recomputes only the assets whose signature or marks changed, and their
    descendants — a partition's status reads nothing but its own and its ancestors' records and
    definitions — and reuses the saved rows of every other asset. After a config edit, only that
    config's descendants are asked again; with no change, none. `refresh` recomputes every asset
    (and saves the result); `use_cache=False` neither reads nor writes the saved result. `marks`:
    `event_marks(graph, instance)` if the caller has just read them. `assets`: only the rows of these
    assets are wanted (a run's `in_sync` check): dirty assets that are neither these nor their
    ancestors are not recomputed (`_only_for`) and are left out of the result. `resolver`: Dagster's
    stale-status resolver to ask (it caches what it read: the caller vouches that none of it changed
    since, `assets/sync.py` `RunResolver`); None = a new one."""
    graph = asset_graph(defs)
    cache = Path(instance.root_directory) / STATUS_CACHE if use_cache and instance.root_directory else None
    signatures = _signatures(graph)
    if marks is None:  # before computing: an event recorded meanwhile is seen next time
        marks = event_marks(graph, instance)
    saved = None if refresh else _load_cache(cache)
    dirty: set[AssetKey] | None = None
    reuse: dict[str, list[CellStatus]] = {}
    only: dict[AssetKey, set[str | None]] = {}
    old_marks, pending = {}, {}
    if saved is not None:
        old_sig, old_marks = saved.get("signatures", {}), saved.get("marks", {})
        pending = _saved_pending(saved, old_marks)
        changed = {k for k in graph.toposorted_asset_keys
                   if signatures[k.to_user_string()] != old_sig.get(k.to_user_string())
                   or marks[k.to_user_string()] != old_marks.get(k.to_user_string())}
        dirty = _changed_with_descendants(graph, changed | {k for k in graph.toposorted_asset_keys
                                                            if k.to_user_string() in pending})
        for row in saved["rows"]:
            reuse.setdefault(row.asset, []).append(row)
    neutral: set[AssetKey] = set()
    if saved is not None:
        only = _with_pending(graph, _dirty_partitions(graph, instance, changed, dirty, old_sig, signatures,
                                                      old_marks, marks, neutral), pending)
        def redo() -> dict:  # without `neutral`
            return _with_pending(graph, _dirty_partitions(graph, instance, changed, dirty, old_sig, signatures,
                                                          old_marks, marks), pending)
    dirty, left, saved_rows, saved_marks = _only_for(graph, assets, dirty, reuse, marks)
    try:
        rows = _compute_status(graph, instance, dirty=dirty, reuse=reuse, only=only, left=left, same=neutral,
                               resolver=resolver)
    except _NotNeutral:  # a rebuilt asset's status changed: what reads it is recomputed after all
        only = redo()
        rows = _compute_status(graph, instance, dirty=dirty, reuse=reuse, only=only, left=left, resolver=resolver)
    saved_marks, pending = _left_pending(left, only, old_marks, saved_marks)
    if cache is not None and dirty != set():
        with contextlib.suppress(OSError):
            tmp = cache.with_name(f".{STATUS_CACHE}.{os.getpid()}")
            data = {"format": _CACHE_FORMAT, "signatures": signatures, "marks": saved_marks, "pending": pending,
                    "rows": [_row(r) for r in rows + saved_rows]}
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, cache)
            _remember_saved(cache, {**data, "marks": dict(saved_marks)})
    return [r for r in rows if r.status != FRESH or not only_problems]


def _only_for(graph, assets: Iterable[AssetKey] | None, dirty: set[AssetKey] | None,
              reuse: dict[str, list[CellStatus]], marks: dict) -> tuple:
    """(dirty, left, rows to save for `left`, marks to save) when only `assets` are wanted: `left` =
    the dirty assets that are not `assets` nor their ancestors (e.g. the final tables, when a cell
    run checks its cell). They are not computed now; the saved result keeps their old rows with no
    mark, so the next computation recomputes them in full (as it would have been done now)."""
    if assets is None:
        return dirty, set(), [], marks
    needed: set[AssetKey] = set()
    frontier = [k for k in assets if graph.has(k)]
    while frontier:
        key = frontier.pop()
        if key not in needed:
            needed.add(key)
            frontier.extend(p for p in graph.get(key).parent_keys if graph.has(p))
    everything = set(graph.toposorted_asset_keys)
    left = (everything if dirty is None else dirty) - needed
    saved_marks = {**marks, **{k.to_user_string(): None for k in left}}
    return (dirty if dirty is not None else everything) - left, left, \
        [r for k in left for r in reuse.get(k.to_user_string(), [])], saved_marks


def _with_pending(graph, only: dict[AssetKey, set[str | None]],
                  pending: dict[str, list]) -> dict[AssetKey, set[str | None]]:
    """`only` (see `_dirty_partitions`) with the partitions a previous computation left pending
    (`_left_pending`) and those that read them downstream (same rule: the same partitions through
    the same partitioning, the unpartitioned child of a partitioned asset; any other edge, and what
    is below it, recomputed in full)."""
    if not pending:
        return only
    extra: dict[AssetKey, set[str | None]] = {}
    for key in graph.toposorted_asset_keys:
        if key not in only:
            continue
        add = set(pending.get(key.to_user_string()) or ())
        pdef = graph.get(key).partitions_def
        for parent in graph.get(key).parent_keys:
            if parent in extra and extra[parent]:
                ppdef = graph.get(parent).partitions_def
                if ppdef == pdef:
                    add |= extra[parent]
                elif ppdef is not None and pdef is None:
                    add.add(None)
                else:
                    add = None
                    break
            elif parent in extra and extra[parent] is None:
                add = None
                break
        extra[key] = add
        if add is None:
            del only[key]
        else:
            only[key] = only[key] | add
    return only


def _left_pending(left: set[AssetKey], only: dict[AssetKey, set[str | None]], old_marks: dict,
                  marks: dict) -> tuple[dict, dict[str, list]]:
    """(marks to save, pending to save) for the assets a computation left for later (`_only_for`,
    saved with no mark: recomputed in full by the next computation). Where only some partitions
    are to be recomputed, `pending` keeps the marks of the previous result (whose rows are saved
    for them) and those partitions, so the next computation recomputes just those and what reads
    them (`_saved_pending`); a reader that ignores `pending` recomputes the asset in full."""
    pending = {}
    for key in left:
        name = key.to_user_string()
        if key in only and old_marks.get(name):
            pending[name] = [old_marks[name], sorted(only[key], key=lambda p: (p is not None, p or ""))]
    return marks, pending


def _saved_pending(saved: dict, old_marks: dict) -> dict[str, list]:
    """The saved result's pending partitions per asset (`_left_pending`); `old_marks` (the saved
    marks, changed in place) gets the marks their rows were computed with."""
    pending = saved.get("pending") if isinstance(saved.get("pending"), dict) else {}
    for name, (mark, _) in pending.items():
        old_marks[name] = mark
    return {name: parts for name, (_, parts) in pending.items()}


class _NotNeutral(Exception):
    pass


def _same_data_version(instance: DagsterInstance, key: AssetKey, old_id: int, records: list) -> bool:
    """Whether the newest of `records` (materializations of unpartitioned `key` after `old_id`) has
    the data version of the materialization `old_id`."""
    before = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, storage_ids=[old_id]), limit=1)
    newest = max(records, key=lambda r: r.storage_id) if records else None
    old = record_data_version(before.records[0]) if before.records else None
    return old is not None and newest is not None and record_data_version(newest) == old


def _dirty_partitions(graph, instance: DagsterInstance, changed: set[AssetKey], dirty: set[AssetKey],
                      old_sig: dict, signatures: dict, old_marks: dict, marks: dict,
                      neutral: set[AssetKey] | None = None) -> dict[AssetKey, set[str | None]]:
    """For dirty assets whose only change is new materializations of some partitions (a cell run):
    the partitions to recompute — those materialized since the saved mark and, downstream, the
    partitions that read them. An asset missing here is recomputed in full (its definition
    changed, an observation, a wipe, a partition mapping other than identity / all).
    `neutral` (if given) gets the unpartitioned assets rebuilt with the same data version (e.g.
    `wse_initial_worlds` rebuilt from the same files): what reads them is not recomputed on their
    account — Dagster's resolver compares data versions — provided their own status is unchanged
    (`_compute_status` checks it, `compute_status` recomputes without this if not)."""
    only: dict[AssetKey, set[str | None]] = {}
    reshaped: set[AssetKey] = set()
    for key in graph.toposorted_asset_keys:
        if key not in dirty:
            continue
        name = key.to_user_string()
        node = graph.get(key)
        pdef = node.partitions_def
        parts: set[str | None] = set()
        if key in changed:
            old, new = old_marks.get(name), marks[name]
            if reshaped_only(old_sig.get(name), signatures[name]):
                reshaped.add(key)  # partitions added or removed, nothing else: the new ones are computed
                parts |= set(_partition_list(signatures[name])) - set(_partition_list(old_sig[name]))
            elif signatures[name] != old_sig.get(name):
                continue  # recompute the whole asset
            if (not old or old[1] != new[1] or new[0] < old[0] or (not old[0] and new[0])
                    or not (node.is_materializable or _is_config_source(node))):
                continue  # recompute the whole asset
            if new[0] != old[0]:
                res = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, after_storage_id=old[0]),
                                                      limit=10_000)
                if pdef is None:
                    parts.add(None)
                    if neutral is not None and node.is_materializable and not (set(node.parent_keys) & dirty) \
                            and _same_data_version(instance, key, old[0], res.records):
                        neutral.add(key)
                else:
                    parts |= {r.partition_key for r in res.records}
        whole = False
        for parent in node.parent_keys:
            if parent not in dirty or not graph.has(parent):
                continue
            if parent not in only:
                whole = True  # a parent recomputed in full (or not materializable): all of this asset
                break
            ppdef = graph.get(parent).partitions_def
            if neutral is not None and parent in neutral:
                continue  # rebuilt with the same data version (see above)
            if ppdef is None and pdef is not None:
                if only[parent]:
                    whole = True  # an unpartitioned parent (a config) changed: every partition reads it
                    break
            elif ppdef is not None and pdef is None:
                if only[parent] or parent in reshaped:  # a table reading every partition of it
                    parts.add(None)
            elif ppdef == pdef:
                parts |= only[parent]  # the same partition of it (one more partition: computed above)
            else:
                whole = True
                break
        if not whole:
            only[key] = parts
    return only


def _partition_list(signature: str) -> list | None:
    return json.loads(signature)[4]


def reshaped_only(old: str | None, new: str) -> bool:
    """Whether two `_signatures` of an asset differ in its partition keys only (a model, an
    architecture, a narrator added or removed): the status of each partition that was there before
    reads the same records and definitions as before (its parents' same partitions, its own code
    version), so only the new partitions, and what reads them, are computed."""
    if old is None or old == new:
        return False
    a, b = json.loads(old), json.loads(new)
    return a[:4] == b[:4] and a[5:] == b[5:] and a[4] is not None and b[4] is not None


def _is_config_source(node) -> bool:
    """A config asset (not materializable, no parents, its versions recorded as materializations):
    the partitions with a new version since the saved mark are found like a cell run's."""
    return node.is_external and not node.is_observable and not node.parent_keys


def _compute_status(graph: AssetGraph, instance: DagsterInstance, dirty: set[AssetKey] | None = None,
                    reuse: dict[str, list[CellStatus]] | None = None,
                    only: dict[AssetKey, set[str | None]] | None = None,
                    left: set[AssetKey] = frozenset(), same: set[AssetKey] = frozenset(),
                    resolver: CachingStaleStatusResolver | None = None) -> list[CellStatus]:
    """Every asset's rows; those of an asset outside `dirty` (None = all dirty) come from `reuse`;
    of an asset in `only`, only those partitions are recomputed (the others come from `reuse`);
    assets in `left` are skipped (no rows: see `_only_for`); the recomputed rows of an asset in
    `same` must equal its saved ones, else `_NotNeutral` (see `_dirty_partitions`)."""
    from wse_platform.status_edits import EditLog, with_edits

    resolver, edits = resolver or _resolver(graph, instance), EditLog(graph, instance)
    seen: dict[tuple[AssetKey, str | None], str] = {}
    out: list[CellStatus] = []
    for key in graph.toposorted_asset_keys:
        node = graph.get(key)
        if not node.is_materializable or key in left:
            continue
        kept = (reuse or {}).get(key.to_user_string())
        if dirty is not None and key not in dirty and kept is not None:
            for row in kept:
                seen[(key, row.partition)] = row.status
            out.extend(kept)
            continue
        pdef = node.partitions_def
        pks: list[str | None] = partition_keys(pdef) if pdef else [None]
        part = (only or {}).get(key)
        # a cell run: recompute its partitions (and what reads them), keep the other rows
        partial = part is not None and kept is not None and set(pks) - part <= {r.partition for r in kept}
        old_rows = {r.partition: r for r in kept} if partial else {}
        done = _materialized(instance, key, pdef is not None) if (part or not partial) else set()
        by_name = sorted(node.parent_keys, key=lambda k: k.to_user_string())
        parents = [p for p in by_name if graph.get(p).is_materializable]
        external = [p for p in by_name
                    if graph.get(p).is_external and not graph.get(p).is_observable and graph.get(p).partitions_def]
        for pk in pks:
            if partial and pk not in part:
                row = old_rows[pk]
            elif pk not in done:
                row = CellStatus(key.to_user_string(), pk, MISSING, [])
            else:
                facts: dict = {}
                status, causes = _status_of(graph, resolver, instance, seen, key, pk, parents, external, facts)
                if status == STALE:  # name the edit behind it, however far upstream
                    causes = with_edits(causes, edits.since_built(key, pk))
                row = CellStatus(key.to_user_string(), pk, status, causes, facts or None)
            if key in same and (not partial or row != old_rows.get(pk)):
                raise _NotNeutral(key)
            seen[(key, pk)] = row.status
            out.append(row)
    return out


def _status_of(graph, resolver, instance, seen, key: AssetKey, pk: str | None,
               parents: list[AssetKey], external: list[AssetKey], facts: dict | None = None) -> tuple[str, list[str]]:
    """`facts` (if given) gets what `status_replay` needs besides the config edges: see `CellStatus.facts`."""
    facts = {} if facts is None else facts
    stale = resolver.get_status(key, pk) == StaleStatus.STALE
    own: list = []
    causes = _resolver_causes(resolver, key, pk, instance, own) if stale else []
    if own:
        facts["own"] = own
    for parent in external:  # partitioned config assets: an edge the resolver does not check
        changed = _external_dep_changes(instance, graph, key, pk, parent)
        stale = stale or bool(changed)
        causes += changed
        if changed and not is_config(graph, parent):
            facts.setdefault("ext", {})[parent.to_user_string()] = changed
    sid: list[int | None] = []
    by_name = {p.to_user_string(): p for p in parents}

    def wide_edge(name: str, ppks: list[str | None]) -> list[str]:
        if len(ppks) < PARTITION_THRESHOLD:
            return []
        if not sid:  # Dagster does not check this edge: compare storage ids
            sid.append(_latest_storage_id(instance, key, pk))
        updated = _updated_after(instance, by_name[name], sid[0], ppks) if sid[0] is not None else []
        lines = [f"{name}: upstream partition(s) {_listed(updated)} updated (checked explicitly: "
                 f"{len(ppks)} ≥ {PARTITION_THRESHOLD} upstream partitions)"] if updated else []
        if lines:
            facts.setdefault("wide", {})[name] = lines
        return lines

    return combine(stale, causes, [(p.to_user_string(), parent_partitions(graph, key, pk, p)) for p in parents],
                   lambda name, ppk: seen.get((by_name[name], ppk)), wide_edge)


def _external_dep_changes(instance: DagsterInstance, graph, key: AssetKey, pk: str | None,
                          parent: AssetKey) -> list[str]:
    """Cause lines for partitions of a partitioned *external* parent (a config asset) that got a
    new data version after the one `key[pk]` was built from.

    Dagster's resolver reads an external dependency's later versions from observations only;
    config assets record materializations (so the UI shows them as built, with their version),
    so the resolver never sees this edge and it is checked here, the same way: the parent's
    latest record after the storage id the provenance names, compared with the one it read."""
    from wse_platform.dagster_private import extract_data_provenance_from_entry

    rec = instance.get_latest_data_version_record(key, is_source=False, partition_key=pk)
    prov = extract_data_provenance_from_entry(rec.event_log_entry) if rec is not None else None
    if prov is None or parent not in prov.input_data_versions:
        return []
    cursor = prov.input_storage_ids.get(parent)
    out = []
    for ppk in parent_partitions(graph, key, pk, parent):
        new = instance.get_latest_data_version_record(parent, is_source=False, partition_key=ppk, after_cursor=cursor)
        if new is None:
            continue
        old = (instance.get_latest_data_version_record(parent, is_source=False, partition_key=ppk,
                                                       before_cursor=cursor + 1) if cursor else None)
        if record_data_version(old) != record_data_version(new):
            out.append(_cause(f"{_label(parent, ppk)}: has a new data version", recorded_changes(instance, parent, ppk)))
    return out


def record_data_version(record) -> str | None:
    """The data version a materialization record carries (None without a record or a version)."""
    mat = record.asset_materialization if record is not None else None
    return (mat.tags or {}).get(DATA_VERSION_TAG) if mat is not None else None


def with_descendants(defs: Definitions, cells: Iterable[tuple[AssetKey, str | None]],
                     allowed: set[AssetKey] | None = None) -> dict[AssetKey, set[str | None]]:
    """`cells` plus every materializable partition downstream of them (within `allowed`):
    what has to run, in one go, when those cells are rebuilt."""
    graph = defs.resolve_asset_graph()
    out: dict[AssetKey, set[str | None]] = {}
    frontier = list(cells)
    while frontier:
        key, pk = frontier.pop()
        if pk in out.setdefault(key, set()):
            continue
        out[key].add(pk)
        for child in graph.get(key).child_keys:
            cnode = graph.get(child)
            if not cnode.is_materializable and cnode.parent_keys and cnode.partitions_def is None:
                # an external table written by its upstream runs (llm_calls): what reads it follows
                frontier.extend((c, None) for c in cnode.child_keys
                                if graph.get(c).is_materializable and graph.get(c).partitions_def is None
                                and (allowed is None or c in allowed) and None not in out.get(c, set()))
                continue
            if not cnode.is_materializable or (allowed is not None and child not in allowed):
                continue
            cpdef = cnode.partitions_def
            if cpdef is None:
                cpks: list[str | None] = [None]
            elif pk is None:
                cpks = list(cpdef.get_partition_keys())
            elif cpdef == graph.get(key).partitions_def:
                cpks = [pk]
            else:
                cpks = list(graph.get_child_partition_keys_of_parent(pk, key, child))
            frontier.extend((child, c) for c in cpks if c not in out.get(child, set()))
    return out
