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
- the settings differ from the saved ones only in numbers, none of them to or from 0 (e.g.
  `wse.horizon: 2 → 3`): such a number never adds or removes an asset or a partition
  (`test_status_replay` builds the definitions of the shipped config with every number changed and
  compares the graphs), so the saved graph holds;
- no partition downstream of a changed config partition was already stale (what a stale one
  becomes depends on records this file does not keep).
The replay computes each config partition's fingerprint (`versions.CONFIG_FINGERPRINTS`) and
does what the full check would do after recording the changed ones: a built partition that read a
changed config partition gets the cause line Dagster's resolver (unpartitioned config) or
`status._external_dep_changes` (partitioned config) would give, naming the change as
`versions.describe_changes` would record it; staleness then propagates downstream with the same
rule (`status_rows.combine`) and the cause lines name the edits since each partition was built.
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
_FORMAT = 1
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


# ---------------------------------------------------------------------------------------------
# Saving (by the full check, which has the Dagster objects)


def gather(graph, instance, settings: Settings, rows: list[CellStatus]) -> dict | None:
    """The facts described above, or None when a config partition has no recorded version."""
    from assets.versioning import _inputs, _latest_records
    from wse_platform.dagster_private import extract_data_provenance_from_entry
    from wse_platform.status import parent_partitions, record_data_version
    from wse_platform.status_edits import EditLog

    keys = list(graph.toposorted_asset_keys)
    config: dict[str, Any] = {}
    for key in keys:
        name, node = key.to_user_string(), graph.get(key)
        if name not in CONFIG_FINGERPRINTS or node.is_materializable:
            continue
        records = _latest_records(instance, key, node.partitions_def is not None)
        pks = list(node.partitions_def.get_partition_keys()) if node.partitions_def else [None]
        if any(pk not in records for pk in pks):
            return None
        config[name] = [[pk, record_data_version(records[pk]), _inputs(records[pk])] for pk in pks]
    by_asset: dict[str, list[CellStatus]] = {}
    for r in rows:
        by_asset.setdefault(r.asset, []).append(r)
    edits, assets, built = EditLog(graph, instance), [], {}
    for key in keys:
        node, name = graph.get(key), key.to_user_string()
        if not node.is_materializable:
            continue
        pdef = node.partitions_def
        pks = list(pdef.get_partition_keys()) if pdef else [None]
        parents = []
        for p in sorted(node.parent_keys, key=lambda k: k.to_user_string()):
            pnode, pname = graph.get(p), p.to_user_string()
            if pnode.is_materializable:
                kind = "mat"
            elif pname in config:
                kind = "config"
            else:
                continue  # other sources and llm_calls: a config edit does not change them
            parents.append([pname, kind, {str(pk): parent_partitions(graph, key, pk, p) for pk in pks}])
        sources = [s.to_user_string() for s in edits.sources_of(key)]
        assets.append({"name": name, "pks": pks, "parents": parents, "sources": sources,
                       "partitioned": pdef is not None,
                       "same": [s for s in sources if graph.get(_asset_key(s)).partitions_def == pdef]})
        config_parents = [p for p in parents if p[1] == "config"]
        for row in by_asset.get(name, []):
            if row.status == MISSING or not sources:
                continue
            fact: dict[str, Any] = {"edits": edits.since_built_by_source(key, row.partition)}
            if config_parents:
                rec = instance.get_latest_data_version_record(key, is_source=False, partition_key=row.partition)
                prov = extract_data_provenance_from_entry(rec.event_log_entry) if rec is not None else None
                fact["prov"] = sorted(p[0] for p in config_parents
                                      if prov is not None and _asset_key(p[0]) in prov.input_data_versions)
            built[f"{name}[{row.partition}]"] = fact
    return {"format": _FORMAT, "settings": _settings_blob(settings), "config": config, "assets": assets,
            "built": built, "rows": [[r.asset, r.partition, r.status, r.causes] for r in rows]}


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
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):  # a foreign or damaged file
        return None


def _replay(settings: Settings, facts: dict) -> list[CellStatus] | None:
    if facts["state"] != status_report.quick_key(settings, with_settings=False):
        return None
    if not numbers_only(facts["settings"], _settings_blob(settings)):
        return None
    changed: dict[tuple[str, str | None], list[str]] = {}  # config partition -> what changed
    order: dict[str, list[str | None]] = {}
    with memoized():  # 444 cells read the same prompt and code files
        for name, entries in facts["config"].items():
            fp = CONFIG_FINGERPRINTS[name][2]
            for pk, version, inputs in entries:
                new_version, new_inputs = with_inputs(fp, settings, pk)
                if new_version != version:
                    changed[(name, pk)] = describe_changes(inputs, new_inputs)
                    order.setdefault(name, []).append(pk)
    saved: dict[str, list[CellStatus]] = {}
    for asset, pk, status, causes in facts["rows"]:
        saved.setdefault(asset, []).append(CellStatus(asset, pk, status, list(causes)))
    dirty = {name for name, _ in changed}
    for a in facts["assets"]:  # topological order: a dirty parent makes the asset dirty
        if any(p[0] in dirty for p in a["parents"]) or any(s in dirty for s in a["sources"]):
            dirty.add(a["name"])
            if any(r.status == STALE for r in saved.get(a["name"], [])):
                return None  # what an already stale partition becomes needs records not kept here
    seen: dict[tuple[str, str | None], str] = {}
    out: list[CellStatus] = []
    for a in facts["assets"]:
        rows = saved.get(a["name"], [])
        if a["name"] in dirty:
            rows = [_row(a, r, facts["built"], changed, order, seen) for r in rows]
        for r in rows:
            seen[(r.asset, r.partition)] = r.status
        out += rows
    return out


def _row(asset: dict, row: CellStatus, built: dict, changed: dict, order: dict, seen: dict) -> CellStatus:
    if row.status == MISSING:
        return row
    pk, name = row.partition, asset["name"]
    fact = built.get(f"{name}[{pk}]", {})
    prov = set(fact.get("prov", []))
    causes: list[str] = []
    config = [(p, mapping[str(pk)]) for p, kind, mapping in asset["parents"] if kind == "config" and p in prov]
    # Dagster's resolver checks the unpartitioned ones (its causes come first, by dependency);
    # `status._external_dep_changes` the partitioned ones, by parent name
    for pname, ppks in [c for c in config if c[1] == [None]] + [c for c in config if c[1] != [None]]:
        for ppk in ppks:
            if (pname, ppk) not in changed:
                continue
            what = changed[(pname, ppk)]
            line = (f"{pname}[{ppk}]: has a new data version" if ppk is not None
                    else f"{pname}: {RESOLVER_REASON}")
            causes.append(line + (f" ({'; '.join(what)})" if what else ""))
    mat = [(p, mapping[str(pk)]) for p, kind, mapping in asset["parents"] if kind == "mat"]
    status, causes = combine(bool(causes), causes, mat, lambda p, ppk: seen.get((p, ppk)), lambda p, ppks: [])
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
