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

The 100-Endings rubric turned off (`endings.rubric: null`) removes its assets too, but the tables that
read its scores drop the edge (`DROPPED`: no stub): for a built partition whose provenance names the
removed asset, Dagster's resolver says `X: removed dependency on X` (sort key: the partition, then X
unpartitioned), which the same "sw" facts give (`stub_causes`).

A switch turned on to a graph no kept check had (`switch_on`: the NCP ablation, a judge panel or the
rubric turned on for the first time): the assets its `if` builds (`ADDED`: their parents and partition
family, as the builders define them; `tests/orchestration/test_status_switch_on.py` compares the graph
with the definitions') replace their stubs or are added to the saved graph, `missing` in every
partition, when none of them was ever materialized (the full check saves each switchable asset's newest
materialization, "ever"). A table that read a stub, or gains the edge (`GAINED`: the rubric's readers),
then reads a partitioned asset none of whose partitions exists: Dagster's resolver says, per partition
(fewer than 100), `X[pk]: has a new dependency on X` where the table's provenance does not name X
(sort key: the table's partition, then X's), and nothing where it does (no record of X after the one
named); its stub's causes go; its new sources (the added asset's) name the edits recorded on them
since it was built, which the full check saves for such tables ("more").

Not replayed (the full check): an added asset materialized before (its rows need the resolver; a switch
turned off and back on with no run between is replayed by `restore`), a partitioned asset reading a
removed or an added one (not in the project's graphs).
"""
from __future__ import annotations

import copy
from typing import Any

from wse_platform.status_rows import MISSING

# the assets each switch's `if` builds: assets/wse/judging.py, assets/ncp/episodes.py + ncp/tables.py
SWITCHED = {"wse.consistency_judges": ["wse_consistency_verdicts", "wse_consistency_steps", "wse_trajectory_consistency"],
            "wse.richness_judges": ["wse_richness_verdicts"],
            "ncp.ablation": ["ncp_ablation_episodes", "ncp_ablation_turns", "ncp_auditor_ablation"],
            "endings.rubric": ["endings_rubric_scores", "endings_rubric_contrasts", "endings_rubric_criteria"]}
# the switches whose readers drop the edge when it is off (assets/endings/reports.py, tables.py): no stub
DROPPED = {"endings.rubric"}
# what a switch turned on adds (`switch_on`): per asset, [its partition family (`status_reshape.families`)
# or None, its parents, whether `llm_calls` lists it]; and the family that must have partitions for the
# switch to add anything (`parts.ncp`, `parts.endings`, `parts.wse` in the builders' `if`)
_JUDGE = ["wse_episode_seeds", "wse_judge_config", "wse_trajectories", "wse_trajectory_steps"]
ADDED = {"ncp.ablation": ("ncp", {"ncp_ablation_episodes": [None, ["ncp_specs"], True],
                                  "ncp_ablation_turns": [None, ["ncp_specs"], True],
                                  "ncp_auditor_ablation": [None, ["ncp_ablation_episodes"], False]}),
         "endings.rubric": ("endings", {
             "endings_rubric_scores": ["endings", ["endings_rubric_config", "endings_stories"], True],
             "endings_rubric_contrasts": [None, ["endings_rubric_scores", "endings_story_tension"], False],
             "endings_rubric_criteria": [None, ["endings_rubric_scores", "endings_story_tension"], False]}),
         "wse.consistency_judges": ("wse", {
             "wse_consistency_verdicts": ["wse", _JUDGE, True],
             "wse_consistency_steps": ["wse", ["wse_consistency_verdicts", "wse_trajectories"], False],
             "wse_trajectory_consistency": ["wse", ["wse_consistency_verdicts", "wse_trajectories"], False]}),
         "wse.richness_judges": ("wse", {"wse_richness_verdicts": ["wse", _JUDGE, True]})}
# the edges the switch adds to assets that exist without it (the rubric's readers)
GAINED = {"endings.rubric": {"endings_corpus_summary": ["endings_rubric_scores"],
                             "endings_pipeline_effect": ["endings_rubric_scores"]}}
LLM_CALLS = "llm_calls"  # lists every LLM asset as a parent (`assets/core.with_llm_calls_lineage`)
STUB = [False, True, False, None, None, []]  # the signature of a switched-off asset some table still names
SKIP_THRESHOLD = 100  # Dagster's SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD (`status.PARTITION_THRESHOLD`)
DEFAULT_VERSION = "INITIAL"  # Dagster's DEFAULT_DATA_VERSION: an external asset never materialized
NEW_VERSION = "has a new dependency data version"


def switchable() -> set[str]:
    return {a for names in SWITCHED.values() for a in names}


def _switched(old: dict, new: dict, *, on: bool, replayed) -> list[str] | None:
    """The switches that changed between two `status_replay.shape`s that differ in switches only, if
    every one of them went the way `on` says and is in `replayed`; else None."""
    if [old.get(k) for k in ("cells", "extraction", "endings", "cron")] != \
            [new.get(k) for k in ("cells", "extraction", "endings", "cron")]:
        return None
    changed = []
    for name, was in old["switches"].items():
        if was == new["switches"].get(name):
            continue
        if bool(was) == on or name not in replayed:
            return None
        changed.append(name)
    return changed or None


def turned_on(old: dict, new: dict) -> list[str] | None:
    """The switches turned on between two `status_replay.shape`s that differ in switches only, or
    None when any switch was turned off."""
    return _switched(old, new, on=True, replayed=ADDED)


def turned_off(old: dict, new: dict) -> list[str] | None:
    """The switches turned off between two `status_replay.shape`s that differ in switches only, or
    None when any switch was turned on or one is not replayed."""
    return _switched(old, new, on=False, replayed=SWITCHED)


def graph_without(graph: dict[str, list], removed: set[str], dropped: set[str] = frozenset()) -> dict[str, list] | None:
    """The `status._signatures` (parsed) of the graph once `removed` assets are no longer defined:
    a remaining asset keeps them as parents (a stub: external, unpartitioned, no parents, listed if
    some asset still names it), but `llm_calls` and the readers of `dropped` ones drop them. None if a
    removed one is not there."""
    if not removed <= set(graph):
        return None
    out = {}
    for name, sig in graph.items():
        if name in removed:
            continue
        sig = copy.deepcopy(sig)
        if name == LLM_CALLS:
            sig[5] = [p for p in sig[5] if p not in removed]
        sig[5] = [p for p in sig[5] if p not in dropped]
        out[name] = sig
    for name in sorted(removed):
        if any(name in sig[5] for sig in out.values()):
            out[name] = list(STUB)
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
    dropped = {a for s in switches if s in DROPPED for a in SWITCHED[s]}
    graph = graph_without(facts["graph"], removed, dropped)
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
            a["stubs"] = [p for p in stubs if p not in dropped]
            a["dropped"] = [p for p in stubs if p in dropped]
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


def graph_with(graph: dict[str, list], switches: list[str], fams: dict[str, list[str]]) -> dict[str, list] | None:
    """The `status._signatures` (parsed, code versions None: not known without the definitions) of the
    graph once `switches` are turned on (`ADDED`, `GAINED`; `fams`: the partition families of the
    settings), or None when an added asset is already in it or a parent is not."""
    out = copy.deepcopy(graph)
    llm = []
    for switch in switches:
        family, added = ADDED[switch]
        if not fams.get(family):
            continue  # the builder's `if` adds nothing without those partitions
        for name, (fam, parents, calls) in added.items():
            if name in out and out[name] != STUB:
                return None  # (a stub, which the tables that name it read while it is off, becomes the asset)
            out[name] = [True, False, False, None, list(fams[fam]) if fam else None, sorted(parents)]
            if calls:
                llm.append(name)
        for name, parents in GAINED.get(switch, {}).items():
            if name in out:
                out[name][5] = sorted(set(out[name][5]) | set(parents))
    if llm:
        if LLM_CALLS not in out:
            return None
        out[LLM_CALLS][5] = sorted(set(out[LLM_CALLS][5]) | set(llm))
    if any(p not in out for sig in out.values() for p in sig[5]):
        return None
    return dict(sorted(out.items()))


def switch_on(facts: dict, switches: list[str], fams: dict[str, list[str]]) -> dict | None:
    """The facts of the graph with `switches` turned on for the first time (see above), or None when
    the full check must say: an added asset materialized before, read by an asset the check had, or
    changing an asset's sources."""
    if "graph" not in facts or "ever" not in facts:
        return None
    graph = graph_with(facts["graph"], switches, fams)
    if graph is None:
        return None
    names = {n for switch in switches for n in ADDED[switch][1]}
    added = [n for n in graph if n not in facts["graph"] or (n in names and facts["graph"][n] == STUB)]
    if any(facts["ever"].get(n, 1) for n in added):
        return None  # materialized before (or not known): what the resolver says of it is not in the facts
    out = copy.deepcopy(facts)
    redo = list(facts.get("redo", []))
    for a in out["assets"]:
        now = sources(graph, a["name"])
        if now != a["sources"]:  # a stub (never materialized: no edits) is no longer a source, the added
            extra = [s for s in now if s not in a["sources"]]  # asset's sources are new ones
            for label, fact in out["built"].items():
                if label.split("[", 1)[0] != a["name"]:
                    continue
                if extra and "more" not in fact:
                    return None  # their edits since it was built are not in the facts
                fact["edits"] = {s: e for s, e in {**fact.get("edits", {}), **fact.get("more", {})}.items() if s in now}
            a["sources"], a["same"] = now, [s for s in a["same"] if s in now and graph[s][4] == graph[a["name"]][4]]
            redo.append(a["name"])
        new = [p for p in graph[a["name"]][5] if p in added]
        if not new:
            continue
        if a["partitioned"]:
            return None  # not in the project's graphs
        if any("sw" not in fact for label, fact in out["built"].items() if label.split("[", 1)[0] == a["name"]):
            return None  # whether its provenance names them was not saved
        # a table reading an added asset (a judge's verdicts, which it read as a stub while off): the
        # resolver's causes about the stub go, its "new dependency" causes per partition come (`stub_causes`)
        a["parents"] = sorted(a["parents"] + [[p, "mat", {"None": list(graph[p][4] or [None])}] for p in new],
                              key=lambda p: p[0])
        a["new_deps"] = {p: list(graph[p][4] or [None]) for p in new}
        redo.append(a["name"])
        for label, fact in out["built"].items():
            if label.split("[", 1)[0] == a["name"]:
                fact["own"] = [c for c in fact.get("own", []) if c[1].split(":", 1)[0].split("[", 1)[0] not in new]
    out["redo"] = redo
    for name in added:
        sig = graph[name]
        pks = sig[4] if sig[4] is not None else [None]
        parents = []
        for p in sig[5]:
            pp = graph[p][4]
            kind = "mat" if graph[p][0] else "config" if p in facts["config"] else None
            if kind is None:
                continue
            mapping = {str(pk): [None] if pp is None else [pk] if sig[4] is not None else list(pp) for pk in pks}
            parents.append([p, kind, mapping])
        srcs = sources(graph, name)
        out["assets"].append({"name": name, "pks": pks, "parents": parents, "sources": srcs, "external": [],
                              "partitioned": sig[4] is not None,
                              "same": [s for s in srcs if graph[s][4] == sig[4]]})
        out["rows"] += [[name, pk, MISSING, []] for pk in pks]
    order = {name: i for i, name in enumerate(toposorted(graph))}
    out["assets"].sort(key=lambda a: order[a["name"]])
    out["graph"] = graph
    return out


def gather_ever(instance) -> dict[str, int]:
    """"ever": per switchable asset, the storage id of its newest materialization of any partition, 0
    for none (one query; also those not in the graph)."""
    from dagster import AssetKey

    names = sorted(switchable())
    found = {r.asset_entry.asset_key.to_user_string(): r.asset_entry.last_materialization_storage_id or 0
             for r in instance.get_asset_records([AssetKey(n) for n in names])}
    return {n: found.get(n, 0) for n in names}


def stub_causes(asset: dict, fact: dict, latest: dict) -> list[tuple[str, str]]:
    """(sort key, line) of the resolver's causes about the stubs `asset` reads (see above)."""
    out = []
    for name, ppks in asset.get("new_deps", {}).items():  # an asset never materialized, turned on
        read = fact.get("sw", {}).get(name)
        if read is None or read[0] is not None or len(ppks) >= SKIP_THRESHOLD:
            continue  # no provenance, or it names the stub (no newer record of any partition): no cause
        me = read[1].split("/", 1)[0]
        for ppk in ppks:
            dep = f"AssetKeyPartitionKey(asset_key=AssetKey({[name]!r}), partition_key={ppk!r})"
            out.append((f"{me}/{dep}", f"{name}[{ppk}]: has a new dependency on {name}" if ppk is not None
                        else f"{name}: has a new dependency on {name}"))
    for name in asset.get("dropped", []):  # an edge the definitions no longer have
        read = fact.get("sw", {}).get(name)
        if read is not None and read[0] is not None:  # the provenance names it
            out.append((read[1], f"{name}: removed dependency on {name}"
                        + (f" ({'; '.join((latest.get(name) or [None, []])[1])})"
                           if (latest.get(name) or [None, []])[1] else "")))
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


def gained_by(name: str) -> list[str]:
    """The switchable assets a switch turned on gives `name` as parents (`GAINED`)."""
    return sorted({p for gains in GAINED.values() for p in gains.get(name, [])})


def gather_stub_facts(graph, instance, key, pk, rec, provenance_of) -> dict[str, Any]:
    """"sw" of the built partition `key[pk]` (`rec`: its newest materialization): per switchable
    parent (and one a switch turned on would give it, `GAINED`), [the version its provenance read
    (None: not named), the resolver's sort key]; {} without provenance."""
    from dagster import AssetKey

    from wse_platform.dagster_private import AssetKeyPartitionKey

    prov = provenance_of(rec.event_log_entry) if rec is not None else None
    if prov is None:
        return {}
    out = {}
    for p in sorted({*graph.get(key).parent_keys, *(AssetKey(n) for n in gained_by(key.to_user_string()))},
                    key=lambda k: k.to_user_string()):
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
