"""The tail of `wse materialize --parallel`: the final tables as several runs side by side.

`runner.plan` puts every ready unpartitioned asset in one run, so the final tables (a benchmark's
~16 tables, their plots and checks) ran one after another in one process after the last cell,
with the other core idle. `split_independent` cuts such a run into `ways` runs over groups of
assets that do not read each other (looking through external tables, as the plan does; the
outputs of a multi-asset that cannot run partially stay together), balanced by their number of
assets; `parallel_runs` starts them together once the cells are done. Each is an ordinary run
(UI, staleness, checks as before); only the grouping differs.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

MIN_KEYS = 4   # a run with fewer assets is not worth a second run's own cost (~1 s of run creation, checks)


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
        bins: list[list] = [[] for _ in range(min(ways, len(groups)))]
        for g in sorted(groups, key=len, reverse=True):   # largest first into the emptiest bin
            min(bins, key=len).extend(g)
        order = {k: i for i, k in enumerate(st.keys)}
        for b in bins:
            out.append(type(st)(sorted(b, key=order.__getitem__), None, dict(st.tags)))
    return out


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
