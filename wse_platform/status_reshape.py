"""A model, an architecture, a narrator, an extraction model or a 100-Endings set added or removed,
replayed without Dagster (issue 21: the first `wse status` after any edit ≤ 2 s).

Such an edit changes the graph only in its partition keys: each partitioned asset's keys are one of
four lists the config gives (`assets/partitions.py`: WSE cells, NCP cells, extraction models,
100-Endings sets; "adding a model to the config adds exactly its cells"). The last full check saved,
per asset, its keys and which partitions of its parents each partition reads, and which partitions
of each asset were ever materialized (`status_replay.gather`). `reshape` turns those facts into the
facts of the edited config's graph, when it can tell exactly:
- every partitioned asset's saved keys are one of the four lists, computed here for the saved
  settings in the same order as Dagster lists them (a check of the rule below, per call);
- each edge is the same partitions, a partitioned asset read whole by an unpartitioned one, or an
  unpartitioned parent (the only mappings the project uses);
- the rest of the settings has the same shape (`status_replay.shape`: the same graph switches);
- a new partition was never materialized (one built before, e.g. a model removed and added back, is
  replayed on the facts kept from before it was removed, `status_switch.restore`, or else asked
  about by the full check), and no table reading a changed asset has an edge Dagster does not
  check (≥ 100 upstream partitions) that named one of its partitions.
Then a new partition is `missing`, a removed one is gone, what existed keeps its facts, and an
asset reading every partition of a changed one is replayed (`status_replay._row`) with the resolver
causes about removed partitions dropped. `tests/orchestration/test_status_reshape.py` compares the
result with the full check's.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from wse_platform.config import Settings
from wse_platform.status_rows import MISSING


def _cells(models: list[str], archs: list[str]) -> list[str]:
    """Dagster's order of a model × architecture partition definition: dimensions by name (`arch`,
    `model`), the product of their keys, `arch|model`."""
    return [f"{a}|{m}" for a in dict.fromkeys(archs) for m in dict.fromkeys(models)]


def endings_sets(settings: Settings) -> list[str]:
    """`assets/partitions.endings_set_keys` (that module imports Dagster)."""
    e = settings.endings
    return [f"human:{c.name}" for c in e.corpora] + [f"gen:{m}:{p}" for m in e.generators for p in e.pipelines]


def families(settings: Settings) -> dict[str, list[str]]:
    """The four partition key lists of `assets/partitions.py` (empty: no such partitions)."""
    return {"wse": _cells(settings.wse.models, settings.wse.architectures),
            "ncp": _cells(settings.ncp.narrators, settings.ncp.architectures),
            "ncp_extraction": list(dict.fromkeys(settings.ncp.extraction_models)),
            "endings": endings_sets(settings)}


def family_of(pks: list, fams: dict[str, list[str]]) -> list[str]:
    """The families whose keys are `pks` (several when two lists happen to be equal)."""
    return [name for name, keys in fams.items() if keys and keys == pks]


def same_but_partitions(old: dict, new: dict) -> bool:
    """The same shape but for the partition lists (the same graph switches and cron)."""
    return [old.get("cron"), old.get("switches")] == [new.get("cron"), new.get("switches")]


def reshape(facts: dict, settings: Settings, new_shape: dict) -> dict | None:
    """The facts of the edited config's graph (see above), or None when it cannot tell exactly."""
    if not same_but_partitions(facts["shape"], new_shape) or "families" not in facts:
        return None
    old_f, new_f = facts["family_keys"], families(settings)
    changed = {f for f in new_f if new_f[f] != old_f.get(f)}
    if not changed:
        return None
    fam = facts["families"]  # asset (and config asset) -> its family, or None (unpartitioned)
    out = copy.deepcopy(facts)
    new_pks: dict[str, list] = {}
    for name, f in fam.items():
        if f is not None and f not in old_f:
            return None
        new_pks[name] = [None] if f is None else new_f[f]
    removed = {name: set(map(str, facts_pks)) - set(map(str, new_pks[name]))
               for name, facts_pks in _saved_pks(facts).items()}
    redo: list[str] = []
    for a in out["assets"]:
        name = a["name"]
        if name not in fam:
            return None
        f = fam[name]
        pks = new_pks[name]
        reads_changed = False
        for p in a["parents"]:
            pname, _, mapping = p
            pf = fam.get(pname, "?")
            if pf == "?":
                return None
            if f in changed or pf in changed:
                if f is None and pf is None:
                    continue
                if f is None:  # a table reading every partition of a changed asset
                    if mapping.get("None") != [None] and sorted(map(str, mapping["None"])) != \
                            sorted(map(str, old_f[pf])):
                        return None
                    p[2] = {"None": list(new_pks[pname])}
                    reads_changed = reads_changed or pf in changed
                elif pf is None:
                    p[2] = {str(pk): [None] for pk in pks}
                elif pf == f:
                    p[2] = {str(pk): [pk] for pk in pks}
                else:
                    return None
        if f in changed:
            a["pks"] = list(pks)
        if reads_changed:
            redo.append(name)
    done = facts.get("done", {})
    rows, by_asset = [], {}
    for row in facts["rows"]:
        by_asset.setdefault(row[0], []).append(row)
    for a in out["assets"]:
        name, f = a["name"], fam[a["name"]]
        have = {r[1]: r for r in by_asset.get(name, [])}
        if f not in changed:
            rows += by_asset.get(name, [])
            continue
        for pk in a["pks"]:
            if pk in have:
                rows.append(have[pk])
            elif pk in done.get(name, []):
                return None  # built before: what the resolver says of it is not in the facts
            else:
                rows.append([name, pk, MISSING, []])
    for name in redo:  # drop the resolver's causes about removed partitions
        for key, fact in out["built"].items():
            if not key.startswith(f"{name}["):
                continue
            if any(parent_removed(line, removed) for lines in fact.get("wide", {}).values() for line in lines):
                return None
            fact["own"] = [c for c in fact.get("own", []) if not parent_removed(c[1], removed)]
    out["rows"] = rows
    out["config"] = {name: [e for e in entries if e[0] in new_pks.get(name, [e[0]])]
                     for name, entries in facts["config"].items()}
    out["redo"] = redo
    return out


def _saved_pks(facts: dict) -> dict[str, list]:
    out = {a["name"]: a["pks"] for a in facts["assets"]}
    out.update({name: [e[0] for e in entries] for name, entries in facts["config"].items()})
    return out


def parent_removed(line: str, removed: dict[str, set[str]]) -> bool:
    """Whether a cause line is about a partition that is no longer there (`asset[pk]: ...`)."""
    head = line.split(":", 1)[0]
    if not head.endswith("]") or "[" not in head:
        return False
    name, pk = head[:-1].split("[", 1)
    return pk in removed.get(name, set())


def saved_families(settings: Settings, graph_pks: dict[str, list]) -> tuple[dict, dict] | None:
    """(family per asset, the family keys) for `status_replay.gather`: None for an unpartitioned
    asset; an asset whose keys are none of the families, or more than one, is left out (a reshape
    then falls back to the full check)."""
    fams = families(settings)
    out: dict[str, str | None] = {}
    for name, pks in graph_pks.items():
        if pks == [None]:
            out[name] = None
            continue
        found = family_of(pks, fams)
        if len(found) == 1:
            out[name] = found[0]
    return out, fams


def encode(value: Any) -> Any:
    return json.loads(json.dumps(value))
