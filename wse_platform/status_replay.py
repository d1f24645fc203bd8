"""`wse status` right after a config edit, without Dagster (issue 21: ≤ 2 s; importing Dagster alone
takes ~1.7 s on a 2-core machine).

A full `wse status` (`cli._full_status`) saves, next to its report, the facts its answer was made
of (`FACTS_FILE` in DAGSTER_HOME): every row; the asset graph as far as a status needs it (order,
partitions, parents and which partitions of them each partition reads, sources); every config
asset partition's recorded version and inputs; for each built partition, whether its provenance
names its config parents and the edits recorded on its sources since it was built. They are
saved under the state key of everything but the settings (code, installed Dagster, `WSE_*`
variables, files the settings name, the instance's event index, the warehouse file: see
`status_report.quick_key`), and only when that state did not change while they were gathered.

The next `wse status` replays a config edit on them when all of this holds, and otherwise
computes in full:
- the state key is the same (no run, observation, code or file change since);
- the settings have the same `shape` as the saved ones: the same partitions and the same
  `graph_switches` (a judge panel, the NCP ablation, the 100-Endings rubric set or not); texts,
  numbers, judge panels' sizes and any other setting turned None, empty or zero or back may change
  (e.g. `wse.horizon: 2 → 3`, a prompt version, a model's revision, a judge's `count`, a sampling
  value set or unset). Such an edit never adds or removes an asset or a partition
  (`test_status_replay` builds the definitions of the shipped config with every number, text and
  judge panel changed and every other setting turned on or off, and compares the graphs), so the
  saved graph holds; or they differ in partition lists only (a model, an architecture... added or
  removed): the saved graph is reshaped to the edited config's, see `status_reshape.py`;
  or a graph switch was turned off (a judge panel, the NCP ablation, the rubric): the saved graph without
  the switched assets, see `status_switch.py`; or the settings are back to the shape of the full check
  before the last graph-changing one (a switch back on, cells added back), with nothing but config
  versions recorded between the two checks: replayed on that check's facts (`status_switch.restore`);
  or a switch was turned on whose assets were never materialized: the saved graph with them added, all
  `missing` (`status_switch.switch_on`).
The replay computes each config partition's fingerprint (`versions.CONFIG_FINGERPRINTS`) and
does what the full check would do after recording the changed ones: for every built partition
downstream of a changed one, the cause lines Dagster's resolver gives (its saved causes that are
not about a config asset, plus an unpartitioned config parent whose version differs from the one
the provenance names, in the resolver's order) and `status._external_dep_changes` gives
(partitioned config: the version the provenance's record names against the newest), each naming
the change as `versions.describe_changes` records it; staleness then propagates downstream with
the same rule (`status_rows.combine`) and the cause lines name the edits since each partition was
built. Partitions already stale are replayed the same way (their own causes are in the facts).
It does not record the new config versions: the next full check, `wse materialize` or the UI's
`config_observer` sensor does, and the full check then prints the same report
(`tests/orchestration/test_status_replay.py` compares them).
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from wse_platform import status_report
from wse_platform.config import Settings
from wse_platform.status_rows import (MISSING, STALE, CellStatus, combine, merge_edits, report_lines,
                                      with_edits)
from wse_platform.versions import CONFIG_FINGERPRINTS, describe_changes, memoized, with_inputs

FACTS_FILE = "wse_status_facts.json"  # in DAGSTER_HOME
_FORMAT = 6  # 2: stale partitions' own causes, config edges per partition, the graph shape; 3: partition families;
# 4: the shape's switches instead of a skeleton of every setting; 5: the whole graph and the switchable
# assets' edges (`status_switch`); 6: "ever", the rubric's assets switchable
RESOLVER_REASON = "has a new dependency data version"  # Dagster's words for a changed unpartitioned config
REPLAYED = "the config edit replayed on the full check of"


def _settings_blob(settings: Settings) -> Any:
    return json.loads(settings.model_dump_json())


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def numbers_only(old: Any, new: Any) -> bool:
    """True when `new` differs from `old` only in numbers (same keys, same list lengths)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(numbers_only(old[k], new[k]) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(numbers_only(a, b) for a, b in zip(old, new))
    if _is_number(old) and _is_number(new):
        return bool(old) == bool(new)  # 0 is falsy: code may read it as "off"
    return type(old) is type(new) and old == new


def graph_switches(settings: Settings) -> dict[str, bool]:
    """The settings whose being set or not adds or removes assets: the `if`s of the asset builders
    (`assets/wse/judging.py` a judge panel, `assets/ncp/episodes.py` and `ncp/tables.py` the
    ablation, `assets/endings/rubric.py` and `endings/tables.py` the rubric). Any other setting
    turned None, empty, zero or back changes config versions only (`test_status_replay`
    `test_the_same_shape_means_the_same_graph` turns every other setting of the shipped config on
    or off at once and compares the graphs; and each switch here changes the graph).

    An asset switched off stays in the instance, and the tables that list it as a dependency then
    read it as an unpartitioned external asset, which Dagster's resolver compares with their
    provenance (after `wse.richness_judge: null` on the demo every WSE table gets
    `wse_richness_verdicts: has a new dependency data version`): `status_switch` replays that from
    the edges the facts save; the rubric's readers drop the edge instead (`removed dependency on`). A
    switch turned on is replayed back to the graph of the full check kept from before it was turned off
    (`status_switch.restore`), or, to a graph no kept check had, when none of the assets it adds was
    ever materialized (`status_switch.switch_on`); else it is checked in full."""
    return {"wse.consistency_judges": settings.wse.consistency_judge is not None,
            "wse.richness_judges": settings.wse.richness_judge is not None,
            "ncp.ablation": settings.ncp.ablation is not None,
            "endings.rubric": settings.endings.rubric is not None}


def shape(settings: Settings) -> Any:
    """What of the settings the asset graph depends on (assets, partitions, parents, code versions):
    the partition keys (`assets/partitions.py`, the same lists) and the `graph_switches` — never a
    text, a number, a list's length or any other setting turned None, empty or zero (a sampling
    value, a budget, a prompt folder, a model's endpoint...), which change config versions only.
    Two settings of the same shape have the same graph (`test_status_replay` changes every text,
    number and judge list and turns every other setting on or off in the shipped config, and
    compares the graphs); files a setting names are in the state key (`status_report.quick_key`)."""
    from wse_platform.status_reshape import endings_sets
    cells = [[list(dict.fromkeys(settings.wse.models)), list(dict.fromkeys(settings.wse.architectures))],
             [list(dict.fromkeys(settings.ncp.narrators)), list(dict.fromkeys(settings.ncp.architectures))]]
    sets = endings_sets(settings)
    return {"cells": cells, "extraction": list(dict.fromkeys(settings.ncp.extraction_models)), "endings": sets,
            "cron": settings.rejudge_cron,  # not the graph, but the definitions reject a bad one
            "switches": graph_switches(settings)}


def same_shape(facts: dict, settings: Settings) -> bool:
    return facts.get("shape") == json.loads(json.dumps(shape(settings)))


# ---------------------------------------------------------------------------------------------
# Saving (by the full check, which has the Dagster objects)


def gather(graph, instance, settings: Settings, rows: list[CellStatus]) -> dict | None:
    """The facts described above, or None when a config partition has no recorded version."""
    from assets.versioning import _inputs, _latest_records
    from wse_platform.dagster_private import extract_data_provenance_from_entry
    from wse_platform.status import is_config, parent_partitions, record_data_version
    from wse_platform.status_edits import EditLog, record_changes
    from wse_platform.status_switch import (gained_by, gather_ever, gather_latest, gather_stub_facts, switchable,
                                            toposorted)

    from wse_platform.status import _signatures, event_marks

    keys = list(graph.toposorted_asset_keys)
    # what the last full check gathered, reused where nothing it was read from changed (`stamp`)
    prev = _load(settings) or {}
    marks = event_marks(graph, instance)
    prev_marks = prev.get("marks") or {}
    config: dict[str, Any] = {}
    for key in keys:
        name, node = key.to_user_string(), graph.get(key)
        if not is_config(graph, key):
            continue
        pks = list(node.partitions_def.get_partition_keys()) if node.partitions_def else [None]
        old = (prev.get("config") or {}).get(name)
        if old is not None and prev_marks.get(name) == marks[name] and [e[0] for e in old] == pks:
            config[name] = old  # no new version of any partition since
            continue
        records = _latest_records(instance, key, node.partitions_def is not None)
        if any(pk not in records for pk in pks):
            return None
        config[name] = [[pk, record_data_version(records[pk]), _inputs(records[pk]),
                         record_changes(records[pk])] for pk in pks]
    by_asset: dict[str, list[CellStatus]] = {}
    for r in rows:
        by_asset.setdefault(r.asset, []).append(r)
    edits, assets, built = EditLog(graph, instance), [], {}
    below = _below_switches(graph)
    config_records = _ConfigRecords(instance)
    for key in keys:
        node, name = graph.get(key), key.to_user_string()
        if not node.is_materializable:
            continue
        pdef = node.partitions_def
        pks = list(pdef.get_partition_keys()) if pdef else [None]
        parents = []
        by_name = sorted(node.parent_keys, key=lambda k: k.to_user_string())
        for p in by_name:
            pnode, pname = graph.get(p), p.to_user_string()
            if pnode.is_materializable:
                kind = "mat"
            elif pname in config:
                kind = "config"
            else:
                continue  # other sources and llm_calls: a config edit does not change them
            parents.append([pname, kind, {str(pk): parent_partitions(graph, key, pk, p) for pk in pks}])
        # the partitioned external parents `status._status_of` checks itself, in its order
        external = [p.to_user_string() for p in by_name if graph.get(p).is_external
                    and not graph.get(p).is_observable and graph.get(p).partitions_def]
        sources = [s.to_user_string() for s in edits.sources_of(key)]
        assets.append({"name": name, "pks": pks, "parents": parents, "sources": sources, "external": external,
                       "partitioned": pdef is not None,
                       "same": [s for s in sources if graph.get(_asset_key(s)).partitions_def == pdef]})
        config_parents = [p for p in parents if p[1] == "config"]
        latest = None
        for row in by_asset.get(name, []):
            if row.status == MISSING or not sources:
                continue
            # what this fact is read from: the partition's newest materialization, its sources' newest
            # events (their edits, the config records around its provenance) and its config edges
            stamp = json.loads(json.dumps([edits.built_at(key, row.partition), [[s, marks[s]] for s in sources],
                                           [[p[0], p[2][str(row.partition)]] for p in config_parents],
                                           assets[-1]["same"]]))
            label = f"{name}[{row.partition}]"
            old = (prev.get("built") or {}).get(label)
            # a table reading a switched-off asset's stub: the edits of the sources it does not have (a
            # switch turned on gives it the sources of the added asset, `status_switch.switch_on`)
            gains = pdef is None and (bool(gained_by(name)) or any(
                p.to_user_string() in switchable() and graph.get(p).is_external for p in node.parent_keys))
            more = {"more": edits.since_built_by_source(key, row.partition, edits.other_sources(key))} \
                if pdef is None and (gains or name in below) else {}
            if old is not None and old.get("stamp") == stamp:
                built[label] = {"edits": old["edits"], **(row.facts or {}),
                                **{k: old[k] for k in ("uv", "pv", "sw") if k in old}, **more, "stamp": stamp}
                continue
            fact: dict[str, Any] = {"edits": edits.since_built_by_source(key, row.partition), **(row.facts or {})}
            if config_parents:
                if latest is None:
                    latest = _latest_records(instance, key, pdef is not None)
                fact.update(_config_edges(key, row.partition, latest.get(row.partition), config_parents,
                                          config_records, extract_data_provenance_from_entry))
            if pdef is None and (gains or any(p.to_user_string() in switchable() for p in node.parent_keys)):
                if latest is None:
                    latest = _latest_records(instance, key, False)
                fact["sw"] = gather_stub_facts(graph, instance, key, None, latest.get(None),
                                               extract_data_provenance_from_entry)
            built[label] = {**fact, **more, "stamp": stamp}
    from wse_platform.status_reshape import saved_families
    fams, family_keys = saved_families(settings, {**{a["name"]: a["pks"] for a in assets},
                                                  **{n: [e[0] for e in entries] for n, entries in config.items()}})
    done = {a["name"]: sorted(instance.get_materialized_partitions(_asset_key(a["name"])))
            for a in assets if a["partitioned"]}  # ever built, also partitions no longer in the graph
    whole = {name: json.loads(sig) for name, sig in _signatures(graph).items()}
    code = status_report.quick_key(settings, with_settings=False, with_events=False)
    switch_facts = {"graph": whole, "latest": gather_latest(graph, instance), "ever": gather_ever(instance)} \
        if toposorted(whole) == [k.to_user_string() for k in keys] else {}  # else a switch is checked in full
    out = {"format": _FORMAT, "settings": _settings_blob(settings), "shape": shape(settings), "config": config,
           **switch_facts,
           "assets": assets, "built": built, "rows": [[r.asset, r.partition, r.status, r.causes] for r in rows],
           "families": fams, "family_keys": family_keys, "done": done, "marks": marks, "code": code}
    from wse_platform.status_switch import keep_before  # a switch just turned off: for turning it back on
    before = keep_before(prev, json.loads(json.dumps(out)), instance) if switch_facts else None
    if before is None and prev.get("before") and prev["before"]["shape"] != out["shape"] \
            and prev.get("marks") == marks and prev.get("code") == code:  # checked again with nothing recorded since: still holds
        before = prev["before"]
    return {**out, "before": before} if before else out


def _below_switches(graph) -> set[str]:
    """The assets whose sources a switch turned on can change (`status_switch.switch_on`): those with
    `llm_calls`, a switched-off asset's stub or an asset that gains an edge (`GAINED`) among their
    ancestors, or gaining one themselves."""
    from wse_platform.status_switch import GAINED, LLM_CALLS, switchable

    roots = {LLM_CALLS, *switchable(), *(n for gains in GAINED.values() for n in gains)}
    out: set[str] = set()
    for key in graph.toposorted_asset_keys:  # parents first
        name = key.to_user_string()
        if name in roots or any(p.to_user_string() in out for p in graph.get(key).parent_keys if graph.has(p)):
            out.add(name)
    return out


class _ConfigRecords:
    """The materializations of a config asset, read once (one query per asset instead of two per
    partition and built partition), answering as `instance.get_latest_data_version_record(key,
    is_source=False, partition_key=pk, before_cursor=..., after_cursor=...)` does."""

    def __init__(self, instance):
        self.instance, self._by_key = instance, {}

    def latest(self, key, pk: str | None, before: int | None = None, after: int | None = None):
        from dagster import AssetRecordsFilter

        if key not in self._by_key:
            found: dict[str | None, list] = {}
            every, cursor = [], None
            while True:  # at most 10,000 records per query
                res = self.instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=10_000,
                                                           cursor=cursor)
                every += res.records
                if not res.has_more:
                    break
                cursor = res.cursor
            for r in sorted(every, key=lambda r: -r.storage_id):
                found.setdefault(r.partition_key, []).append(r)
            self._by_key[key] = found
        return next((r for r in self._by_key[key].get(pk, [])
                     if (before is None or r.storage_id < before) and (after is None or r.storage_id > after)), None)


def _config_edges(key, pk: str | None, rec, config_parents: list, records: _ConfigRecords, provenance_of) -> dict:
    """What the full check compares on the config edges of the built partition `key[pk]` (`rec`: its
    latest materialization): for an unpartitioned config parent the provenance names, the version
    it read and the sort key of Dagster's cause ("uv"); for a partitioned one, per parent partition,
    the version of the record the provenance's storage id names and whether a newer record exists
    ("pv", as `status._external_dep_changes` reads them)."""
    from wse_platform.dagster_private import AssetKeyPartitionKey
    from wse_platform.status import record_data_version

    prov = provenance_of(rec.event_log_entry) if rec is not None else None
    out: dict[str, Any] = {"uv": {}, "pv": {}}
    if prov is None:
        return out
    for pname, _, mapping in config_parents:
        pkey = _asset_key(pname)
        if pkey not in prov.input_data_versions:
            continue
        ppks = mapping[str(pk)]
        if ppks == [None]:
            dep = AssetKeyPartitionKey(pkey, None)
            out["uv"][pname] = [prov.input_data_versions[pkey].value, f"{AssetKeyPartitionKey(key, pk)}/{dep}"]
            continue
        cursor = prov.input_storage_ids.get(pkey)
        per = {}
        for ppk in ppks:
            new = records.latest(pkey, ppk, after=cursor)
            old = records.latest(pkey, ppk, before=cursor + 1) if cursor else None
            per[str(ppk)] = [record_data_version(old), new is not None]
        out["pv"][pname] = per
    return out


def _asset_key(name: str):  # a Dagster AssetKey from a user string (Dagster imported late)
    from dagster import AssetKey
    return AssetKey.from_user_string(name)


def save(settings: Settings, state: str | None, facts: dict | None) -> None:
    path = settings.dagster_home / FACTS_FILE
    with contextlib.suppress(OSError):
        if state is None or facts is None:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(f".{FACTS_FILE}.{os.getpid()}")
        at = time.strftime("%Y-%m-%d %H:%M:%S")
        tmp.write_text(json.dumps({**facts, "state": state, "at": at}), encoding="utf-8")
        os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Replaying (no Dagster)


def _load(settings: Settings) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((settings.dagster_home / FACTS_FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("format") == _FORMAT:
            return data
    return None


def replay(settings: Settings) -> tuple[list[CellStatus], str] | None:
    """Every row after the config edit and when the full check it starts from ran, or None when
    the conditions above do not hold."""
    facts = _load(settings)
    if facts is None:
        return None
    try:
        rows = _replay(settings, facts)
        return None if rows is None else (rows, str(facts["at"]))
    except Exception:  # a foreign or damaged file, a setting the fingerprints cannot read: the full check says
        return None


def _replay(settings: Settings, facts: dict) -> list[CellStatus] | None:
    if facts["state"] != status_report.quick_key(settings, with_settings=False):
        return None
    if not same_shape(facts, settings):  # a partition list changed (a model added...): see status_reshape
        from wse_platform.status_reshape import encode, reshape
        from wse_platform.status_reshape import families
        from wse_platform.status_switch import restore, switch_off, switch_on, turned_off, turned_on
        new_shape = encode(shape(settings))
        off = turned_off(facts["shape"], new_shape)  # a judge, the ablation or the rubric turned off: status_switch
        on = turned_on(facts["shape"], new_shape)
        if off:
            facts = switch_off(facts, off)
        elif facts.get("before") and facts["before"]["shape"] == new_shape:  # and back on
            facts = restore(facts, new_shape)
        elif on:  # on for the first time
            facts = switch_on(facts, on, families(settings))
        else:
            facts = reshape(facts, settings, new_shape)
        if facts is None:
            return None
    current: dict[tuple[str, str | None], tuple[str | None, list[str]]] = {}  # config partition -> version, changes
    changed: dict[tuple[str, str | None], list[str]] = {}  # config partition -> what changed now
    order: dict[str, list[str | None]] = {}
    with memoized():  # 444 cells read the same prompt and code files
        for name, entries in facts["config"].items():
            fp = CONFIG_FINGERPRINTS[name][2]
            for pk, version, inputs, recorded in entries:
                new_version, new_inputs = with_inputs(fp, settings, pk)
                current[(name, pk)] = (version, list(recorded))
                if new_version != version:
                    changed[(name, pk)] = describe_changes(inputs, new_inputs)
                    current[(name, pk)] = (new_version, changed[(name, pk)])
                    order.setdefault(name, []).append(pk)
    saved: dict[str, list[CellStatus]] = {}
    for asset, pk, status, causes in facts["rows"]:
        saved.setdefault(asset, []).append(CellStatus(asset, pk, status, list(causes)))
    dirty = {name for name, _ in changed} | set(facts.get("redo", []))
    seen: dict[tuple[str, str | None], str] = {}
    out: list[CellStatus] = []
    for a in facts["assets"]:  # topological order: a dirty parent makes the asset dirty
        rows = saved.get(a["name"], [])
        if a["name"] in dirty or any(p[0] in dirty for p in a["parents"]) or any(s in dirty for s in a["sources"]):
            dirty.add(a["name"])
            rows = [_row(a, r, facts["built"], current, changed, order, seen, facts.get("latest", {}))
                    for r in rows]
        for r in rows:
            seen[(r.asset, r.partition)] = r.status
        out += rows
    return out


def _row(asset: dict, row: CellStatus, built: dict, current: dict, changed: dict, order: dict,
         seen: dict, latest: dict) -> CellStatus:
    """The row as the full check would compute it once the changed config versions are recorded."""
    if row.status == MISSING:
        return row
    pk, name = row.partition, asset["name"]
    fact = built.get(f"{name}[{pk}]", {})
    # Dagster's resolver: its own causes (code, rebuilt parents...) and the unpartitioned config
    # parents whose version differs from the one the provenance names, ordered by its sort key
    resolver = [tuple(c) for c in fact.get("own", [])]
    for pname, (read, sort_key) in fact.get("uv", {}).items():
        version, what = current[(pname, None)]
        if version != read:
            line = f"{pname}: {RESOLVER_REASON}"
            resolver.append((sort_key, line + (f" ({'; '.join(what)})" if what else "")))
    from wse_platform.status_switch import stub_causes  # a switched-off asset this one still names
    resolver += stub_causes(asset, fact, latest)
    causes = [line for _, line in sorted(resolver, key=lambda c: c[0])]
    # `status._external_dep_changes`: the partitioned external parents, by name
    for pname in asset.get("external", []):
        if pname not in fact.get("pv", {}):
            causes += fact.get("ext", {}).get(pname, [])
            continue
        for ppk, (read, newer) in fact["pv"][pname].items():
            key = (pname, ppk)
            if not (newer or key in changed):
                continue
            version, what = current[key]
            if version != read:
                causes.append(f"{pname}[{ppk}]: has a new data version" + (f" ({'; '.join(what)})" if what else ""))
    mat = [(p, mapping[str(pk)]) for p, kind, mapping in asset["parents"] if kind == "mat"]
    wide = fact.get("wide", {})
    status, causes = combine(bool(causes), causes, mat, lambda p, ppk: seen.get((p, ppk)),
                             lambda p, ppks: list(wide.get(p, [])))
    if status == STALE:
        records: list[list[str]] = []
        for source in asset["sources"]:
            records += fact.get("edits", {}).get(source, [])
            same = pk is not None and source in asset["same"]
            records += [changed[(source, ppk)] for ppk in order.get(source, []) if not (same and ppk != pk)]
        causes = with_edits(causes, merge_edits(records))
    return CellStatus(name, pk, status, causes)


def report(settings: Settings, only_problems: bool = True) -> tuple[list[str], str] | None:
    """The report lines (as `wse status` prints them, without the LLM-calls block) and when the
    full check they start from ran, or None."""
    found = replay(settings)
    return None if found is None else (report_lines(found[0], only_problems), found[1])


def replay_report(settings: Settings, key: str | None, flags: dict) -> bool:
    """Print the replayed report as the full check prints it, keep it under `key` (the
    `status_report` key of this state); False (nothing printed) when it cannot be replayed."""
    from wse_platform.llm.truncation_report import NOT_READ, truncation_lines

    t0 = time.perf_counter()
    found = report(settings, only_problems=not flags.get("all"))
    if found is None:
        return False
    lines, at = found
    truncation = truncation_lines(settings.warehouse)
    text = "".join(f"{line}\n" for line in lines + truncation)
    print(text, end="")
    print(f"({time.perf_counter() - t0:.1f}s; {REPLAYED} {at}: the new config versions are recorded by the "
          "next `wse materialize` or the UI)")
    if NOT_READ not in truncation and key is not None and key == status_report.quick_key(settings, flags):
        status_report.save_report(settings, key, text)
    return True
