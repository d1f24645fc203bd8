"""Inter-judge agreement of a consistency panel (`wse_judge_agreement`).

Subjects are judged (trajectory, step) pairs on which every panel member gave a valid
verdict (consistent / inconsistent / uncertain); steps with a missing member are left
out (they have no verdict to agree on) and counted. Rows: one `panel` row per judge
configuration (and per model group) with Fleiss' κ and the unanimous share, one
`pairwise` row per pair of members with the raw agreement and Cohen's κ.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl

from wse_platform.wse.tables.frame import TRAJ, TableParams, require_columns
from wse_platform.wse.tables.schema import _rows

VERDICTS = ("consistent", "inconsistent", "uncertain")


def fleiss_kappa(counts: np.ndarray) -> float | None:
    """Fleiss' κ of an (n_subjects × n_categories) matrix of rater counts (same raters per subject).

    κ = (P̄ − P̄_e) / (1 − P̄_e) with P_i = (Σ_j n_ij² − n) / (n(n − 1)) and P̄_e = Σ_j p_j².
    None when undefined (no subject, fewer than 2 raters, or every rating in one category)."""
    counts = np.asarray(counts, float)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return None
    n = counts.sum(axis=1)
    if (n != n[0]).any() or n[0] < 2:
        raise ValueError("fleiss_kappa: every subject needs the same number (>= 2) of ratings")
    n = n[0]
    p_i = ((counts ** 2).sum(axis=1) - n) / (n * (n - 1))
    p_j = counts.sum(axis=0) / counts.sum()
    pe = float((p_j ** 2).sum())
    if pe >= 1.0 - 1e-12:
        return None
    return float((p_i.mean() - pe) / (1.0 - pe))


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Cohen's κ of two raters' labels on the same subjects (None when chance agreement is 1)."""
    if len(a) != len(b):
        raise ValueError("cohen_kappa: the two raters must label the same subjects")
    if not a:
        return None
    cats = sorted(set(a) | set(b))
    aa, bb = np.array(a, object), np.array(b, object)
    po = float((aa == bb).mean())
    pe = float(sum((aa == c).mean() * (bb == c).mean() for c in cats))
    return None if pe >= 1.0 - 1e-12 else (po - pe) / (1.0 - pe)


def _panel_rows(v: pl.DataFrame, judge_id: str, group: str | None) -> list[dict[str, Any]]:
    members = sorted(v["judge_member"].unique().to_list())
    wide = v.pivot(on="judge_member", index=TRAJ + ["step"], values="verdict", aggregate_function="first")
    wide = wide.with_columns([pl.lit(None, pl.String).alias(m) for m in members if m not in wide.columns])
    complete = wide.filter(pl.all_horizontal(pl.col(m).is_not_null() for m in members))
    n_incomplete = wide.height - complete.height
    mat = complete.select(members).to_numpy() if complete.height else np.zeros((0, len(members)), object)
    counts = np.stack([(mat == c).sum(axis=1) for c in VERDICTS], axis=1) if len(mat) else np.zeros((0, 3))
    base = {"judge_config_id": judge_id, "model_group": group, "n_members": len(members),
            "n_steps": complete.height, "n_steps_incomplete": n_incomplete}
    unanimous = float((counts.max(axis=1) == len(members)).mean()) * 100 if len(mat) else None
    rows = [{**base, "kind": "panel", "fleiss_kappa": fleiss_kappa(counts) if len(members) >= 2 else None,
             "unanimous_pct": unanimous,
             **{f"{c}_pct": 100.0 * counts[:, i].sum() / counts.sum() if len(mat) else None
                for i, c in enumerate(VERDICTS)}}]
    for a, b in combinations(members, 2):
        la, lb = list(mat[:, members.index(a)]), list(mat[:, members.index(b)])
        rows.append({**base, "kind": "pairwise", "member_a": a, "member_b": b,
                     "agreement_pct": 100.0 * float(np.mean(np.array(la) == np.array(lb))) if la else None,
                     "cohen_kappa": cohen_kappa(la, lb)})
    return rows


def judge_agreement(verdicts: pl.DataFrame, params: TableParams,
                    judge_ids: Mapping[str, str | None] | None = None) -> pl.DataFrame:
    """`wse_judge_agreement` from `wse_consistency_verdicts` rows (every judge configuration present,
    or only `judge_ids`' values); model_group NULL = all models, else one row set per model group."""
    require_columns(verdicts, "wse_consistency_verdicts",
                    ["judge_config_id", *TRAJ, "step", "judge_index", "judge_member", "verdict"])
    v = verdicts.with_columns(
        judge_member=pl.coalesce(pl.col("judge_member"), pl.col("judge_index").cast(pl.String)))
    return _rows("wse_judge_agreement", rows_per_panel(v, params, list((judge_ids or {}).values()), _panel_rows))


def rows_per_panel(v: pl.DataFrame, params: TableParams, judge_ids: Sequence[str | None],
                   panel_rows: Callable[[pl.DataFrame, str, str | None], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`panel_rows` of every wanted judge configuration (all present ones when none is named), pooled over
    models and then per model group: the one loop both agreement tables share."""
    wanted = [j for j in judge_ids if j]
    present = set(v["judge_config_id"].drop_nulls().to_list())
    rows: list[dict[str, Any]] = []
    for jid in sorted(present & set(wanted) if wanted else present):
        mine = v.filter(pl.col("judge_config_id") == jid)
        rows += panel_rows(mine, jid, None)
        if params.model_groups:
            for group, models in params.groups(mine["model"].unique().to_list()).items():
                sub = mine.filter(pl.col("model").is_in(models))
                if sub.height:
                    rows += panel_rows(sub, jid, group)
    return rows
