"""Architecture contrasts with hierarchical-bootstrap intervals (paper Tables 1, 8, 9)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from wse_platform.stats import bootstrap as bs
from wse_platform.wse.architecture import parse_architecture
from wse_platform.wse.tables.frame import (
    CONTRASTS,
    TableParams,
    build_panel,
    seed_design,
)
from wse_platform.wse.tables.schema import _finish, _rows


# ---- 2. architecture contrasts --------------------------------------------------------------------
@dataclass(frozen=True)
class ContrastSpec:
    scope: str               # group (Table 1) | model (Table 8) | base_conditional | model_base_conditional (Table 9)
    model_group: str | None
    model: str | None
    base_level: str | None
    contrast: str
    n_models: int
    n_pairs: int


def arch_pairs(archs: Iterable[str], contrast: str, base_level: int | None = None) -> list[tuple[str, str]]:
    """(minuend arch, subtrahend arch) pairs differing only in the contrast's factor."""
    factor, hi, lo = CONTRASTS[contrast]
    available = set(archs)
    pairs = []
    for a in sorted(available):
        pa = parse_architecture(a)
        if getattr(pa, factor) != hi or (base_level is not None and pa.base != base_level):
            continue
        partner = type(pa)(**{**{"base": pa.base, "wmem": pa.wmem, "wmod": pa.wmod}, factor: lo}).key
        if partner in available:
            pairs.append((a, partner))
    return pairs


def contrast_specs(cells: Sequence[tuple[str, str]], params: TableParams
                   ) -> tuple[list[ContrastSpec], np.ndarray]:
    """All contrasts and their (n_cells × k) weight matrix (models equal, pairs equal within a model)."""
    cidx = {c: j for j, c in enumerate(cells)}
    models = sorted({m for m, _ in cells})
    archs_of = {m: [a for mm, a in cells if mm == m] for m in models}
    specs, cols = [], []

    def add(scope, group, model, base, name, members):
        w = np.zeros(len(cells))
        used = {m: arch_pairs(archs_of[m], name, base) for m in members}
        used = {m: p for m, p in used.items() if p}
        if not used:
            return
        for m, pairs in used.items():
            for a, b in pairs:
                w[cidx[(m, a)]] += 1.0 / (len(used) * len(pairs))
                w[cidx[(m, b)]] -= 1.0 / (len(used) * len(pairs))
        specs.append(ContrastSpec(scope, group, model, None if base is None else f"B{base}", name, len(used),
                                  max(len(p) for p in used.values())))
        cols.append(w)

    groups = params.groups(models)
    for group, members in groups.items():
        for name in CONTRASTS:
            add("group", group, None, None, name, members)
    for m in models:
        for name in CONTRASTS:
            add("model", None, m, None, name, [m])
    for group, members in groups.items():
        for base in (1, 2, 3):
            for name in ("WMEM on-off", "WMOD on-off"):
                add("base_conditional", group, None, base, name, members)
    for m in models:   # Table 9: per-model module effects within each base
        for base in (1, 2, 3):
            for name in ("WMEM on-off", "WMOD on-off"):
                add("model_base_conditional", None, m, base, name, [m])
    return specs, (np.column_stack(cols) if cols else np.zeros((len(cells), 0)))


def architecture_contrasts(frame: pl.DataFrame, info: Mapping[str, Any], params: TableParams,
                           loop_reference: bool = False) -> pl.DataFrame:
    """`wse_architecture_contrasts`: Table 1 (scope=group), Table 8 (model), base_conditional (group-level
    WMEM/WMOD within a base) and Table 9 (model_base_conditional: per model within a base)."""
    panel = build_panel(frame, info["horizon"])
    design = seed_design(frame)
    specs, cm = contrast_specs(panel.cells, params)
    if not specs:
        return _rows("wse_architecture_contrasts", [])
    if loop_reference:
        res = bs.bootstrap_contrasts_loop(panel, design, cm, params.bootstrap_draws, params.bootstrap_seed)
    else:
        res = bs.bootstrap_contrasts(panel, design, cm, params.bootstrap_draws, params.bootstrap_seed,
                                     chunk=params.bootstrap_chunk)
    rows = []
    for j, s in enumerate(specs):
        row = {**s.__dict__, "n_seeds": design.n_units, "n_worlds": design.n_clusters}
        for m in bs.METRICS:
            row[f"delta_{m}"] = res.estimate[m][j]
            row[f"delta_{m}_lo"] = res.lower[m][j]
            row[f"delta_{m}_hi"] = res.upper[m][j]
        row["n_draws"] = res.n_draws
        row["n_draws_valid"] = int(min(res.n_valid[m][j] for m in bs.METRICS))
        row["bootstrap_seed"] = res.seed
        row["judge_config_id"] = info["consistency_judge_id"]
        row["richness_judge_config_id"] = info["richness_judge_id"]
        rows.append(row)
    return _finish("wse_architecture_contrasts", _rows("wse_architecture_contrasts", rows))


