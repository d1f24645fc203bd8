"""The tail of `wse materialize --parallel`: the final tables as several runs side by side.

`runner.plan` puts every ready unpartitioned asset in one run, so the final tables (a benchmark's
~16 tables, their plots and checks) ran one after another in one process after the last cell,
with the other core idle. `split_independent` cuts such a run into `ways` runs over groups of
assets that do not read each other (looking through external tables, as the plan does; the
outputs of a multi-asset that cannot run partially stay together), balanced by their cost: each
asset's `RUN_WEIGHT` definition metadata (its relative time in a run, e.g. seconds per step measured
on `bench/fleet.py`'s data; one without it counts as the mean of the others, so unweighted assets
balance by number). `parallel_runs` starts them together once the cells are done, so the command's
time after the last answer is the longest of them (a split by number left WSE's 15 tables at ~2:1).
Each is an ordinary run (UI, staleness, checks as before); only the grouping differs.
`defer_unneeded` does the same at the start: the part of a source run the cells do not read runs
beside them.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

MIN_KEYS = 4   # a run with fewer assets is not worth a second run's own cost (~1 s of run creation, checks)
RUN_WEIGHT = "wse/run_weight"   # definition metadata: an asset's relative time in a run (`_weights`)


def weight_metadata(weights: dict, name: str) -> dict:
    """The definition metadata that gives asset `name` its weight in `weights` (none when it has none: it
    then counts as the mean of the others, `_weights`)."""
    return {RUN_WEIGHT: weights[name]} if name in weights else {}


def default_ways(parallel: int) -> int:
    """Runs the final tables are cut into: the machine's cores, at most `parallel`, at most 4."""
    return max(1, min(parallel, os.cpu_count() or 1, 4))


def split_independent(defs, steps: Sequence, ways: int) -> list:
    """`steps` with each unpartitioned step of at least `MIN_KEYS` assets cut into up to `ways` steps of
    mutually independent assets (see the module doc); partitioned steps unchanged, order kept."""
    if ways <= 1:
        return list(steps)
    out = []
    for st in steps:
        if st.partition_key is not None or len(st.keys) < MIN_KEYS:
            out.append(st)
            continue
        groups = _components(defs, st.keys)
        if len(groups) < 2:
            out.append(st)
            continue
        weight = _weights(defs, st.keys)
        cost = {id(g): sum(weight[k] for k in g) for g in groups}
        bins: list[list] = [[] for _ in range(min(ways, len(groups)))]
        load = [0.0] * len(bins)
        for g in sorted(groups, key=lambda g: cost[id(g)], reverse=True):   # costliest first into the lightest bin
            i = min(range(len(bins)), key=load.__getitem__)
            bins[i].extend(g)
            load[i] += cost[id(g)]
        order = {k: i for i, k in enumerate(st.keys)}
        for b in bins:
            out.append(type(st)(sorted(b, key=order.__getitem__), None, dict(st.tags)))
    return out


def defer_unneeded(defs, steps: Sequence) -> list:
    """`steps` with each unpartitioned run cut in two where some of its assets are needed by the partitioned
    runs after it (the cells) and others are not: the needed ones first, the rest in a run of their own
    right after, which `parallel_runs` then runs beside the cells instead of before them (NCP's source
    run: the cells read `ncp_specs`, not its breakdown and statistics). Multi-assets stay whole."""
    from wse_platform.runner import _parents, materializable

    graph = defs.resolve_asset_graph()
    owners = materializable(defs)
    out = []
    for n, st in enumerate(steps):
        later = [k for s in steps[n + 1:] if s.partition_key is not None for k in s.keys]
        if st.partition_key is not None or len(st.keys) < 2 or not later:
            out.append(st)
            continue
        mine = set(st.keys)
        needed = set().union(*(_parents(graph, k) for k in later)) & mine
        grew = True
        while grew:   # what the needed ones read, and their multi-asset siblings
            before = len(needed)
            for k in list(needed):
                needed |= _parents(graph, k) & mine
                a = owners.get(k)
                if a is not None and not a.can_subset:
                    needed |= set(a.keys) & mine
            grew = len(needed) > before
        rest = [k for k in st.keys if k not in needed]
        if not needed or not rest:
            out.append(st)
            continue
        out.append(type(st)([k for k in st.keys if k in needed], None, dict(st.tags)))
        out.append(type(st)(rest, None, dict(st.tags)))
    return out


def _weights(defs, keys: Sequence) -> dict:
    """Each key's `RUN_WEIGHT` (a positive number in its definition metadata); a key without one counts as
    the mean of those given among `keys` (1 when none is given: a balance by number)."""
    from wse_platform.runner import materializable

    owners = materializable(defs)
    given = {}
    for k in keys:
        a = owners.get(k)
        value = a.specs_by_key[k].metadata.get(RUN_WEIGHT) if a is not None and k in a.specs_by_key else None
        value = getattr(value, "value", value)   # a MetadataValue or a plain number
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            given[k] = float(value)
    default = sum(given.values()) / len(given) if given else 1.0
    return {k: given.get(k, default) for k in keys}


def _components(defs, keys: Sequence) -> list[list]:
    """The keys in groups connected by a dependency among them or by one non-subsettable multi-asset."""
    from wse_platform.runner import _parents, materializable

    graph = defs.resolve_asset_graph()
    chosen = set(keys)
    root = {k: k for k in keys}

    def find(k):
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    def join(a, b):
        root[find(a)] = find(b)

    owners = materializable(defs)
    for k in keys:
        for p in _parents(graph, k) & chosen:
            join(k, p)
        a = owners.get(k)
        if a is not None and not a.can_subset:
            for sibling in set(a.keys) & chosen:
                join(k, sibling)
    groups: dict = {}
    for k in keys:
        groups.setdefault(find(k), []).append(k)
    return list(groups.values())
