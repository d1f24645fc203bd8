"""Dataset statistics of the NCP-Bench specs (the paper's Table 6) and their breakdowns.

Everything is computed from the loaded specs, never typed in. The paper's printed
standard deviations (facts 4.88, commitments 3.33, nodes 4.86) are the *sample*
standard deviation (n − 1 denominator); the population one gives 4.85 / 3.32 / 4.84.
`tests/ncp/test_stats.py` checks both facts against the 100 released files.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence

import polars as pl

from wse_platform.ncp.spec import COMMITMENT_TYPES, NarrativeSpec

STD_DDOF = 1  # sample standard deviation: reproduces the paper's printed digits
QUANTITIES: dict[str, str] = {  # row name in ncp_spec_stats -> spec list
    "facts": "initial_facts",
    "commitments": "commitments",
    "trajectory_nodes": "trajectory",
}


def describe(values: Sequence[int], ddof: int = STD_DDOF) -> dict[str, float | int]:
    """total, mean, std (with `ddof`), min, max of per-spec counts."""
    n = len(values)
    if n <= ddof:
        raise ValueError(f"need more than {ddof} value(s) for a standard deviation with ddof={ddof}, got {n}")
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - ddof)
    return {"n_specs": n, "total": int(sum(values)), "mean": mean, "std": math.sqrt(var),
            "min": int(min(values)), "max": int(max(values))}


def spec_stats(specs: Sequence[NarrativeSpec], ddof: int = STD_DDOF) -> pl.DataFrame:
    """`ncp_spec_stats`: one row per quantity (facts / commitments / trajectory_nodes)."""
    rows = []
    for quantity, attr in QUANTITIES.items():
        rows.append({"quantity": quantity, **describe([len(getattr(s, attr)) for s in specs], ddof),
                     "std_ddof": ddof})
    return pl.DataFrame(rows, schema={"quantity": pl.Utf8, "n_specs": pl.Int64, "total": pl.Int64,
                                      "mean": pl.Float64, "std": pl.Float64, "min": pl.Int64,
                                      "max": pl.Int64, "std_ddof": pl.Int64})


def table6_display(stats: pl.DataFrame) -> pl.DataFrame:
    """The stats rounded the way the paper prints them (two decimals)."""
    return stats.select("quantity", "total", pl.col("mean").round(2), pl.col("std").round(2), "min", "max")


def spec_breakdown(specs: Sequence[NarrativeSpec]) -> pl.DataFrame:
    """`ncp_spec_breakdown`: commitment types by count, primary-genre and any-genre distributions.

    `share` is the share of commitments (types) or of specs (genres); a spec has two genres, so the
    `genre_any` shares add up to 2.
    """
    types = Counter(c.type for s in specs for c in s.commitments)
    primary = Counter(s.primary_genre for s in specs)
    any_genre = Counter(g for s in specs for g in dict.fromkeys(s.meta.genres))
    n_commitments = sum(types.values())
    rows = [{"dimension": "commitment_type", "category": t, "n": types.get(t, 0),
             "share": types.get(t, 0) / n_commitments if n_commitments else None} for t in COMMITMENT_TYPES]
    for dimension, counter in (("primary_genre", primary), ("genre_any", any_genre)):
        for category, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
            rows.append({"dimension": dimension, "category": category, "n": n,
                         "share": n / len(specs) if specs else None})
    return pl.DataFrame(rows, schema={"dimension": pl.Utf8, "category": pl.Utf8, "n": pl.Int64, "share": pl.Float64})


def spec_rows(specs: Sequence[NarrativeSpec]) -> pl.DataFrame:
    """`ncp_specs`: one row per loaded spec, with the full spec as JSON for downstream assets."""
    rows = []
    for s in specs:
        counts = s.commitment_type_counts()
        rows.append({
            "spec_id": s.spec_id,
            "eval_order": s.eval_order,
            "title": s.meta.title,
            "display_title": s.display_title,
            "genres": list(s.meta.genres),
            "primary_genre": s.primary_genre,
            "player_role": s.meta.player_role,
            "n_facts": len(s.initial_facts),
            "n_negated_facts": sum(f.negated for f in s.initial_facts),
            "n_commitments": len(s.commitments),
            "n_nodes": len(s.trajectory),
            "n_invariant": counts["invariant"],
            "n_ordering": counts["ordering"],
            "n_achievement": counts["achievement"],
            "commitment_links_json": json.dumps(s.commitment_links()),
            "spec_json": s.model_dump_json(),
            "source_file": s.source_file,
        })
    return pl.DataFrame(rows, schema=SPEC_ROW_SCHEMA)


SPEC_ROW_SCHEMA = {
    "spec_id": pl.Utf8, "eval_order": pl.Int64, "title": pl.Utf8, "display_title": pl.Utf8,
    "genres": pl.List(pl.Utf8), "primary_genre": pl.Utf8, "player_role": pl.Utf8,
    "n_facts": pl.Int64, "n_negated_facts": pl.Int64, "n_commitments": pl.Int64, "n_nodes": pl.Int64,
    "n_invariant": pl.Int64, "n_ordering": pl.Int64, "n_achievement": pl.Int64,
    "commitment_links_json": pl.Utf8, "spec_json": pl.Utf8, "source_file": pl.Utf8,
}
