"""A judge panel turned off (`wse.consistency_judges` / `wse.richness_judges` set to null, e.g.
`--edit wse.richness_judge=null`) or the NCP ablation turned off, replayed without Dagster (issue 21:
the first `wse status` after any edit ≤ 2 s).

Such a switch (`status_replay.graph_switches`) removes the assets its `if` builds (`SWITCHED`); the
tables that still name one as a dependency (the WSE tables' `FRAME_DEPS`) then read it as an
unpartitioned external asset with no parents (Dagster's stub for a dependency nobody defines), and
`llm_calls` no longer lists it. Dagster's resolver compares, for each built partition of such a
table, the version its provenance names for that input with the "current" version of the stub: the
data version of the newest materialization of any of its partitions (`DEFAULT`: none); when they
differ: `X: has a new dependency data version`, when the provenance does not name it: `X: has a new
dependency on X`. The last full check saved what this needs (`status_replay.gather`): the whole
graph (`_signatures`), per built table partition the version its provenance read of each switchable
parent and the cause's sort key ("sw"), and per switchable asset its newest version and what it
recorded as changed ("latest"). `switch_off` turns those facts into the facts of the new graph: the
removed assets' rows are gone, the tables reading them are replayed with the stub's cause, the rows
are in the new graph's topological order (Dagster's: levels, by name), each asset's sources follow
the new graph. `tests/orchestration/test_status_switch.py` checks the graph transform against the
definitions built with each switch turned off, and the replayed report against the full check.

Back on (and cells added back): a full check whose graph differs from the previous one's keeps that
check's facts ("before", `keep_before`) when nothing but config versions was recorded between the two
(every other asset's newest materialization and observation the same, the switched-off assets'
included) and the same code (`status_report.quick_key` without events), with the config records
added since. Settings of that shape again are replayed on those
facts with the config versions recorded now and those records named as edits (`restore`). One such
step back is kept: two graph changes in a row, then back to neither graph, or a run in between,
means the full check.

Not replayed (the full check): a switch turned on to a graph no kept check had (the assets it adds,
their partitions and place in the graph come from the definitions), the 100-Endings rubric turned off
(the tables drop the edge: Dagster's "removed dependency" cause, not saved), a partitioned asset
reading a removed one.
"""
from __future__ import annotations

import copy
from typing import Any

# the assets each switch's `if` builds: assets/wse/judging.py, assets/ncp/episodes.py + ncp/tables.py
SWITCHED = {"wse.consistency_judges": ["wse_consistency_verdicts", "wse_consistency_steps", "wse_trajectory_consistency"],
            "wse.richness_judges": ["wse_richness_verdicts"],
            "ncp.ablation": ["ncp_ablation_episodes", "ncp_ablation_turns", "ncp_auditor_ablation"]}
LLM_CALLS = "llm_calls"  # lists every LLM asset as a parent (`assets/core.with_llm_calls_lineage`)
DEFAULT_VERSION = "INITIAL"  # Dagster's DEFAULT_DATA_VERSION: an external asset never materialized
NEW_VERSION = "has a new dependency data version"


def switchable() -> set[str]:
    return {a for names in SWITCHED.values() for a in names}


def turned_off(old: dict, new: dict) -> list[str] | None:
    """The switches turned off between two `status_replay.shape`s that differ in switches only, or
    None when any switch was turned on or one is not replayed."""
    if [old.get(k) for k in ("cells", "extraction", "endings", "cron")] != \
            [new.get(k) for k in ("cells", "extraction", "endings", "cron")]:
        return None
    off = []
    for name, was in old["switches"].items():
        now = new["switches"].get(name)
        if was == now:
            continue
        if not was or name not in SWITCHED:
            return None
        off.append(name)
    return off or None


def graph_without(graph: dict[str, list], removed: set[str]) -> dict[str, list] | None:
    """The `status._signatures` (parsed) of the graph once `removed` assets are no longer defined:
    a remaining asset keeps them as parents (a stub: external, unpartitioned, no parents, listed if
    some asset still names it), `llm_calls` drops them. None if a removed one is not there."""
    if not removed <= set(graph):
        return None
    out = {}
    for name, sig in graph.items():
        if name in removed:
            continue
        sig = copy.deepcopy(sig)
        if name == LLM_CALLS:
            sig[5] = [p for p in sig[5] if p not in removed]
        out[name] = sig
    for name in sorted(removed):
        if any(name in sig[5] for sig in out.values()):
            out[name] = [False, True, False, None, None, []]
    return dict(sorted(out.items()))


def toposorted(graph: dict[str, list]) -> list[str]:
    """Dagster's `toposorted_asset_keys`: levels (a node after all its parents), each by name."""
    parents = {name: set(sig[5]) for name, sig in graph.items()}
    for deps in list(parents.values()):
        for p in deps:
            parents.setdefault(p, set())
    out: list[str] = []
    done: set[str] = set()
    while len(done) < len(parents):
        level = sorted(n for n, deps in parents.items() if n not in done and deps <= done)
        if not level:
            raise ValueError("a cycle")
        out += level
        done |= set(level)
    return out


def sources(graph: dict[str, list], name: str) -> list[str]:
    """`status_edits.EditLog.sources_of`: the ancestors that are not materializable and have no parents."""
    seen, frontier = set(), [name]
    while frontier:
        for p in graph[frontier.pop()][5]:
            if p not in seen and p in graph:
                seen.add(p)
                frontier.append(p)
    return sorted(k for k in seen if not graph[k][0] and not graph[k][5])


def switch_off(facts: dict, switches: list[str]) -> dict | None:
    """The facts of the graph with `switches` turned off (see above), or None if it cannot tell."""
    if "graph" not in facts or "latest" not in facts:
        return None
    removed = {a for s in switches for a in SWITCHED[s]}
    graph = graph_without(facts["graph"], removed)
    if graph is None or any(n not in graph for n in facts["config"]):
        return None
    out = copy.deepcopy(facts)
    assets, redo = [], list(facts.get("redo", []))
    for a in out["assets"]:
        if a["name"] in removed:
            continue
        stubs = [p[0] for p in a["parents"] if p[0] in removed]
        if stubs:
            if a["partitioned"]:
                return None  # Dagster compares each partition with the stub: not saved
            a["parents"] = [p for p in a["parents"] if p[0] not in removed]
            a["stubs"] = stubs
            redo.append(a["name"])
        now = sources(graph, a["name"])
        if now != a["sources"]:  # the edits named on its stale causes change: replayed
            redo.append(a["name"])
        a["sources"], a["same"] = now, [s for s in a["same"] if s in now]
        assets.append(a)
    order = {name: i for i, name in enumerate(toposorted(graph))}
    out["assets"] = sorted(assets, key=lambda a: order[a["name"]])
    out["rows"] = [r for r in facts["rows"] if r[0] not in removed]
    out["built"] = {}
    for label, fact in facts["built"].items():
        name = label.split("[", 1)[0]
        if name in removed:
            continue
        fact = copy.deepcopy(fact)
        # the resolver's causes about a removed asset's partitions (an edge that is now the stub's)
        fact["own"] = [c for c in fact.get("own", []) if c[1].split(":", 1)[0].split("[", 1)[0] not in removed]
        fact["wide"] = {p: lines for p, lines in fact.get("wide", {}).items() if p not in removed}
        out["built"][label] = fact
    out["graph"], out["redo"] = graph, redo
    return out


def stub_causes(asset: dict, fact: dict, latest: dict) -> list[tuple[str, str]]:
    """(sort key, line) of the resolver's causes about the stubs `asset` reads (see above)."""
    out = []
    for name in asset.get("stubs", []):
        read = fact.get("sw", {}).get(name)
        if read is None:  # no provenance: an external dependency gives no cause
            continue
        version, sort_key = read
        current, changes = latest.get(name) or [None, []]
        if version is None:
            out.append((sort_key, f"{name}: has a new dependency on {name}"))
        elif version != (current or DEFAULT_VERSION):
            out.append((sort_key, f"{name}: {NEW_VERSION}" + (f" ({'; '.join(changes)})" if changes else "")))
    return out


def gather_stub_facts(graph, instance, key, pk, rec, provenance_of) -> dict[str, Any]:
    """"sw" of the built partition `key[pk]` (`rec`: its newest materialization): per switchable
    parent, [the version its provenance read (None: not named), the resolver's sort key]; {} without
    provenance."""
    from wse_platform.dagster_private import AssetKeyPartitionKey

    prov = provenance_of(rec.event_log_entry) if rec is not None else None
    if prov is None:
        return {}
    out = {}
    for p in graph.get(key).parent_keys:
        name = p.to_user_string()
        if name in switchable():
            read = prov.input_data_versions.get(p)
            out[name] = [read.value if read is not None else None,
                         f"{AssetKeyPartitionKey(key, pk)}/{AssetKeyPartitionKey(p, None)}"]
    return out


def gather_latest(graph, instance) -> dict[str, list]:
    """"latest": per switchable asset in the graph, [the data version of its newest materialization
    of any partition, what that record says changed] (what the stub's version will be)."""
    from dagster import AssetKey

    from wse_platform.status import record_data_version
    from wse_platform.status_edits import record_changes

    out = {}
    for name in sorted(switchable()):
        key = AssetKey(name)
        if not graph.has(key):
            continue
        found = instance.get_asset_records([key])
        rec = found[0].asset_entry.last_materialization_record if found else None
        out[name] = [record_data_version(rec), record_changes(rec) if rec is not None else []]
    return out


# ---------------------------------------------------------------------------------------------
# A switch turned back on: the facts of the last full check before it was turned off


def keep_before(prev: dict | None, facts: dict, instance) -> dict | None:
    """What a full check with a switch just turned off (or partitions just removed) keeps of the previous full check (`prev`, the
    switch on) so that turning it back on is replayed (`restore`): its facts, when nothing was
    recorded between the two checks but config versions (every other asset's marks, the removed
    assets' included, are the same), with the config records added since ("since": per config asset,
    [partition, what it says changed], oldest first)."""
    from dagster import AssetKey, AssetRecordsFilter

    from wse_platform.status_edits import record_changes

    if not prev or "graph" not in prev or prev["shape"] == facts["shape"]:
        return None  # kept after a switch turned off or partitions removed (a model, an architecture...)
    if prev.get("code") is None or prev.get("code") != facts.get("code"):
        return None  # the code, Dagster or a file the settings name changed between the two checks
    old_marks, marks = prev.get("marks") or {}, facts.get("marks") or {}
    gone = [n for n in old_marks if n not in marks]
    records = {r.asset_entry.asset_key.to_user_string(): r for r in instance.get_asset_records([AssetKey(n) for n in gone])}
    for name in gone:
        rec = records.get(name)
        if [rec.asset_entry.last_materialization_storage_id or 0 if rec else 0, 0] != [old_marks[name][0], 0] \
                or old_marks[name][1]:
            return None
    since: dict[str, list] = {}
    for name, mark in marks.items():
        if mark == old_marks.get(name):
            continue
        if name not in facts["config"] or name not in old_marks:
            return None  # a run, an observation, an asset added...: checked in full when turned back on
        res = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey(name),
                                                                 after_storage_id=old_marks[name][0]),
                                              limit=1000, ascending=True)
        if res.has_more:
            return None
        since[name] = [[r.partition_key, record_changes(r)] for r in res.records]
    return {**{k: v for k, v in prev.items() if k not in ("before", "state", "at")}, "since": since}


def restore(facts: dict, new_shape: dict) -> dict | None:
    """The facts of the switch-on graph (`keep_before`) brought up to now: the config versions
    recorded since are the current ones (and what reads a config asset with a new record is
    replayed), the edits recorded since are named on the built partitions that have them as
    sources; None if the new settings are not of the kept facts' shape."""
    before = facts.get("before")
    if before is None or before["shape"] != new_shape or set(before["config"]) != set(facts["config"]):
        return None
    out = copy.deepcopy(before)
    since = out.pop("since")
    for name, entries in out["config"].items():  # the versions recorded now; those of partitions the
        now = {e[0]: e for e in facts["config"][name]}  # check since did not have: as recorded before
        if any(pk not in now for pk, _ in since.get(name, [])):
            return None
        out["config"][name] = [now.get(e[0], e) for e in entries]
    assets = {a["name"]: a for a in out["assets"]}
    for label, fact in out["built"].items():
        name, pk = label[:-1].split("[", 1)
        asset = assets.get(name)
        if asset is None:
            return None
        for source, records in since.items():
            if source not in asset["sources"]:
                continue
            same = pk != "None" and source in asset["same"]
            added = [changes for ppk, changes in records if not (same and ppk != pk)]
            if added:
                fact.setdefault("edits", {}).setdefault(source, []).extend(added)
        for per in fact.get("pv", {}).values():
            for entry in per.values():
                entry[1] = True  # a newer record may exist now: compare the version read with the current one
    out["redo"] = list(out.get("redo", [])) + sorted(since)
    return out
