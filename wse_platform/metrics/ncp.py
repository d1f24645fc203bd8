"""NCP-Bench metrics: Table 1 summary, survival, auditor sensitivity, genre table.

Input frames have the `ncp_episodes` columns (one row per episode: model, arch, spec_id,
auditor_id, turns, termination, conflict_kinds, trajectory_progress,
commitments_satisfied_share). `turns` is the reference's turn count: the turns played,
the conflict turn included (the opening is not a turn).

Headline survival is the reference's (`metrics.py` of NLP2CT/NCP-Bench): survival at t = share of
the episodes whose turn count is >= t, so an episode that ends by SUCCESS leaves the curve as one
that ends by CONFLICT does (`survival`, `survival_at_20`; Figure 4 and model_scorecard use it).
Kaplan–Meier (as lifelines computes it; CONFLICT the event, the other endings right-censored at their last turn)
is kept as a secondary, clearly named estimate (`km_survival`, `ci_lower`/`ci_upper`,
`km_survival_at_20`). Episodes without a result (ncp_failed_episodes) are in no denominator.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

CELL = ["model", "arch", "auditor_id"]
SURVIVAL_HORIZON = 20  # the paper's "survival at turn 20"
CONFLICT_KIND_COLUMNS = {"fact": "pct_fact_conflict", "commitment": "pct_commitment_conflict",
                         "player_input": "pct_player_input_conflict"}


# ---- Kaplan–Meier ------------------------------------------------------------------------------

def kaplan_meier(durations: Sequence[float], events: Sequence[bool], times: Sequence[int],
                 alpha: float = 0.05) -> list[dict[str, Any]]:
    """S(t), its (1-alpha) CI (lifelines' exponential Greenwood) and the number at risk at each t.

    At-risk at t counts episodes whose duration is >= t (still observed when turn t is played).
    Computed here with numpy as lifelines' `KaplanMeierFitter` computes it (timeline 0 and every
    duration; S = 1 or 0 give the CI (1, 1) or (0, 0)): importing lifelines (pandas, scipy) cost
    ~1.6 s of CPU in every process that built an NCP table (issue 24); `tests/ncp/test_metrics.py`
    compares both on random sets."""
    d = np.asarray(durations, dtype=float)
    e = np.asarray(events, dtype=bool)
    if d.size == 0:
        return [{"turn": int(t), "survival": None, "ci_lower": None, "ci_upper": None, "at_risk": 0}
                for t in times]
    timeline = np.unique(np.concatenate([[0.0], d]))
    at_risk = (d[None, :] >= timeline[:, None]).sum(axis=1).astype(float)
    deaths = ((d[None, :] == timeline[:, None]) & e[None, :]).sum(axis=1).astype(float)
    sf = np.cumprod(1.0 - deaths / at_risk)
    left = at_risk - deaths
    with np.errstate(divide="ignore", invalid="ignore"):
        cum = np.cumsum(np.where(left > 0, deaths / (at_risk * left), 0.0))
        v = np.log(sf)
        z = NormalDist().inv_cdf(1 - alpha / 2)
        lower = np.exp(-np.exp(np.log(-v) - z * np.sqrt(cum) / v))
        upper = np.exp(-np.exp(np.log(-v) + z * np.sqrt(cum) / v))
    for bound in (lower, upper):
        bound[sf == 1.0] = 1.0
        bound[sf == 0.0] = 0.0
    out = []
    for t in times:
        k = int(np.searchsorted(timeline, t, side="right")) - 1
        if k < 0:  # before the first time in the timeline: S = 1
            s, lo, hi = 1.0, 1.0, 1.0
        else:
            s, lo, hi = float(sf[k]), float(lower[k]), float(upper[k])
        out.append({"turn": int(t), "survival": s, "ci_lower": _nan_none(lo), "ci_upper": _nan_none(hi),
                    "at_risk": int((d >= t).sum())})
    return out


def _nan_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def n_active(turns: Sequence[int], t: int) -> int:
    """Episodes still active at turn t, with the reference implementation's `>= t` convention: an
    episode that played t turns (including one whose conflict came at turn t) counts at t."""
    return sum(1 for d in turns if d >= t)


def raw_share_active(turns: Sequence[int], t: int) -> float:
    """n_active / n (the raw survival curve of the paper's Figure 4); NaN without episodes."""
    return n_active(turns, t) / len(turns) if len(turns) else float("nan")


def share_surviving_at(episodes: pl.DataFrame, t: int = SURVIVAL_HORIZON) -> float | None:
    """The headline (the reference's survival at t): share of episodes with turn count >= t; None without episodes."""
    return None if episodes.is_empty() else raw_share_active(episodes["turns"].to_list(), t)


def survival_at(episodes: pl.DataFrame, t: int = SURVIVAL_HORIZON) -> float | None:
    """Secondary: KM S(t); None when it is not estimable: no episode observed through turn t and the curve
    has not already reached 0 (e.g. demo runs censored at T_max < t)."""
    if episodes.is_empty():
        return None
    s = kaplan_meier(episodes["turns"].to_list(), (episodes["termination"] == "CONFLICT").to_list(), [t])[0]
    if int(episodes["turns"].max()) < t and s["survival"] != 0.0:
        return None
    return s["survival"]


def survival_table(episodes: pl.DataFrame, t_max: int | None = None) -> pl.DataFrame:
    """One row per cell × auditor × turn 0..t_max: the headline survival (share with turn count >= t,
    also `raw_share_active`), and the Kaplan–Meier estimate with its CI and at-risk count."""
    rows = []
    for key, g in _groups(episodes):
        horizon = t_max if t_max is not None else int(g["turns"].max())
        times = list(range(0, horizon + 1))
        km = kaplan_meier(g["turns"].to_list(), (g["termination"] == "CONFLICT").to_list(), times)
        turns = g["turns"].to_list()
        for k in km:
            share = raw_share_active(turns, k["turn"])
            rows.append({**key, **k, "survival": share, "km_survival": k["survival"],
                         "n_active": n_active(turns, k["turn"]), "raw_share_active": share, "n_episodes": g.height})
    schema = {"model": pl.Utf8, "arch": pl.Utf8, "auditor_id": pl.Utf8, "turn": pl.Int64, "survival": pl.Float64,
              "ci_lower": pl.Float64, "ci_upper": pl.Float64, "at_risk": pl.Int64, "n_active": pl.Int64,
              "raw_share_active": pl.Float64, "n_episodes": pl.Int64, "km_survival": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


# ---- Table 1 -----------------------------------------------------------------------------------

def _groups(df: pl.DataFrame, by: list[str] = CELL) -> list[tuple[dict[str, Any], pl.DataFrame]]:
    if df.is_empty():
        return []
    out = []
    for key, g in df.group_by(by, maintain_order=True):
        out.append((dict(zip(by, key)), g))
    return sorted(out, key=lambda kg: tuple(str(kg[0][c]) for c in by))


def _kinds(row_kinds: Any) -> list[str]:
    return list(row_kinds) if row_kinds is not None else []


def cell_metrics(g: pl.DataFrame) -> dict[str, Any]:
    """Table-1 metrics of one group of episodes (percentages in 0..100)."""
    n = g.height
    term = g["termination"].to_list()
    kinds = [_kinds(k) for k in g["conflict_kinds"].to_list()]
    out: dict[str, Any] = {
        "n_episodes": n,
        "avg_turns": float(g["turns"].mean()),
        "trajectory_pct": 100.0 * float(g["trajectory_progress"].mean()),
        "satisfied_pct": 100.0 * float(g["commitments_satisfied_share"].mean()),
    }
    for kind, col in CONFLICT_KIND_COLUMNS.items():
        out[col] = 100.0 * sum(1 for t, ks in zip(term, kinds) if t == "CONFLICT" and kind in ks) / n
    for t in ("CONFLICT", "SUCCESS", "SURVIVAL", "INVALID", "CENSORED"):
        out[f"pct_{t.lower()}"] = 100.0 * term.count(t) / n
        out[f"n_{t.lower()}"] = term.count(t)
    out["survival_at_20"] = share_surviving_at(g, SURVIVAL_HORIZON)
    out["km_survival_at_20"] = survival_at(g, SURVIVAL_HORIZON)
    out["n_active_at_20"] = n_active(g["turns"].to_list(), SURVIVAL_HORIZON)
    out["share_active_at_20"] = raw_share_active(g["turns"].to_list(), SURVIVAL_HORIZON)
    out.update(_word_stats(g))
    return out


def _word_stats(g: pl.DataFrame) -> dict[str, float | None]:
    """Words per response (the paper's length limits are prompt instructions, reported here)."""
    out: dict[str, float | None] = {}
    for who in ("narrator", "player"):
        count_col = "narrator_responses" if who == "narrator" else "player_inputs"
        if count_col not in g.columns:
            out[f"{who}_words_mean"] = out[f"{who}_over_limit_pct"] = None
            continue
        sub = g.filter(pl.col(count_col).is_not_null() & (pl.col(count_col) > 0))
        n = int(sub[count_col].sum()) if sub.height else 0
        words = (sub[f"{who}_words_mean"] * sub[count_col]).sum() if n else None
        out[f"{who}_words_mean"] = float(words) / n if n else None
        out[f"{who}_over_limit_pct"] = 100.0 * float(sub[f"{who}_over_limit"].sum()) / n if n else None
    return out


def summary_table(episodes: pl.DataFrame) -> pl.DataFrame:
    """Paper Table 1: one row per model × arch × auditor. An episode with several confirmed
    conflict kinds counts in each of their columns."""
    rows = [{**key, **cell_metrics(g)} for key, g in _groups(episodes)]
    return pl.DataFrame(rows, schema=_SUMMARY_SCHEMA)


_METRIC_SCHEMA = {"n_episodes": pl.Int64, "avg_turns": pl.Float64, "trajectory_pct": pl.Float64,
                  "satisfied_pct": pl.Float64, "pct_fact_conflict": pl.Float64, "pct_commitment_conflict": pl.Float64,
                  "pct_player_input_conflict": pl.Float64, "pct_conflict": pl.Float64, "pct_success": pl.Float64,
                  "pct_survival": pl.Float64, "pct_invalid": pl.Float64, "pct_censored": pl.Float64,
                  "n_conflict": pl.Int64, "n_success": pl.Int64, "n_survival": pl.Int64, "n_invalid": pl.Int64,
                  "n_censored": pl.Int64, "survival_at_20": pl.Float64, "n_active_at_20": pl.Int64,
                  "share_active_at_20": pl.Float64, "narrator_words_mean": pl.Float64,
                  "narrator_over_limit_pct": pl.Float64, "player_words_mean": pl.Float64,
                  "player_over_limit_pct": pl.Float64, "km_survival_at_20": pl.Float64}
_SUMMARY_SCHEMA = {"model": pl.Utf8, "arch": pl.Utf8, "auditor_id": pl.Utf8, **_METRIC_SCHEMA}


# ---- Table 2: auditor sensitivity ---------------------------------------------------------------

CORRELATED_METRICS = ("turns", "trajectory_progress", "commitments_satisfied_share")


def correlations(a: Sequence[float], b: Sequence[float]) -> dict[str, float | None]:
    """Pearson r and Spearman rho with two-sided p-values (None when undefined: n < 3 or constant)."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"pearson_r": None, "pearson_p": None, "spearman_rho": None, "spearman_p": None}
    pr = stats.pearsonr(x, y)
    sr = stats.spearmanr(x, y)
    return {"pearson_r": float(pr.statistic), "pearson_p": float(pr.pvalue),
            "spearman_rho": float(sr.statistic), "spearman_p": float(sr.pvalue)}


def pair_correlations(episodes: pl.DataFrame, env: list[str]) -> list[dict[str, Any]]:
    """For each auditor pair and metric: Pearson and Spearman correlations of the per-episode values,
    episodes matched on `env` (the same environment judged by the two auditors)."""
    rows: list[dict[str, Any]] = []
    auditors = sorted(set(episodes["auditor_id"].to_list())) if not episodes.is_empty() else []
    for i, a in enumerate(auditors):
        for b in auditors[i + 1:]:
            ea = episodes.filter(pl.col("auditor_id") == a)
            eb = episodes.filter(pl.col("auditor_id") == b)
            joined = ea.join(eb, on=env, suffix="_b").sort(env)
            for metric in CORRELATED_METRICS:
                c = correlations(joined[metric].to_list(), joined[f"{metric}_b"].to_list())
                rows.append({"row_type": "correlation", "auditor_id": a, "auditor_b": b, "metric": metric,
                             "n_environments": joined.height, **c})
    return rows


def auditor_sensitivity(episodes: pl.DataFrame) -> pl.DataFrame:
    """Re-audit analysis (the second, cheaper counterpart of Table 2): stored transcripts replayed
    by several auditor configurations. The paper's Table 2 itself is `auditor_ablation_table`.

    Rows `row_type = "auditor"`: Table-1 metrics per auditor (over all cells). Rows
    `row_type = "correlation"`: for each auditor pair and metric, Pearson and Spearman
    correlations across environments — episodes matched on (model, arch, spec_id), so
    each environment compares the same stored transcript judged by the two auditors.
    """
    rows: list[dict[str, Any]] = []
    for key, g in _groups(episodes, ["auditor_id"]):
        rows.append({"row_type": "auditor", "auditor_id": key["auditor_id"], **cell_metrics(g)})
    rows += pair_correlations(episodes, ["model", "arch", "spec_id"])
    schema = {"row_type": pl.Utf8, "auditor_id": pl.Utf8, **_METRIC_SCHEMA, "auditor_b": pl.Utf8,
              "metric": pl.Utf8, "n_environments": pl.Int64, "pearson_r": pl.Float64, "pearson_p": pl.Float64,
              "spearman_rho": pl.Float64, "spearman_p": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


ABLATION_SCHEMA = {"row_type": pl.Utf8, "auditor_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8,
                   "n_episodes": pl.Int64,
                   "avg_turns": pl.Float64, "trajectory_pct": pl.Float64, "satisfied_pct": pl.Float64,
                   "pct_fact_conflict": pl.Float64, "pct_commitment_conflict": pl.Float64,
                   "pct_player_input_conflict": pl.Float64, "n_succ": pl.Int64, "n_success": pl.Int64,
                   "n_survival": pl.Int64, "n_conflict": pl.Int64, "n_invalid": pl.Int64,
                   "survival_at_20": pl.Float64, "n_active_at_20": pl.Int64, "share_active_at_20": pl.Float64,
                   "km_survival_at_20": pl.Float64, "auditor_b": pl.Utf8, "metric": pl.Utf8,
                   "n_environments": pl.Int64, "pearson_r": pl.Float64, "pearson_p": pl.Float64,
                   "spearman_rho": pl.Float64, "spearman_p": pl.Float64}


def auditor_ablation_table(episodes: pl.DataFrame) -> pl.DataFrame:
    """Paper Table 2 as run: one row per in-loop auditor of the live ablation cell (never pooled
    over cells; `row_type` 'auditor'). `n_succ` is the paper's Succ.: runs that reached T_max or
    satisfied every achievement commitment (`n_survival` + `n_success`). Rows `row_type`
    'correlation': the paper's pairwise Pearson / Spearman correlations between auditors, per
    metric (turns, trajectory progress, satisfied share), episodes of the same cell matched on spec."""
    rows: list[dict[str, Any]] = []
    for key, g in _groups(episodes, ["auditor_id", "model", "arch"]):
        m = cell_metrics(g)
        rows.append({"row_type": "auditor", **key, **{k: m[k] for k in ABLATION_SCHEMA if k in m},
                     "n_succ": m["n_success"] + m["n_survival"]})
    for key, g in _groups(episodes, ["model", "arch"]):
        rows += [{**r, **key} for r in pair_correlations(g, ["spec_id"])]
    return pl.DataFrame(rows, schema=ABLATION_SCHEMA)


# ---- Table 5: the human narrator baseline --------------------------------------------------------

HUMAN_MODEL = "human"  # `wse ncp play --as narrator` writes its episodes with this model name
STATUS = {"SUCCESS": "SUCCESS", "SURVIVAL": "SURVIVED", "CONFLICT": "FAILURE"}
TABLE5_SCHEMA = {"spec_id": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "auditor_id": pl.Utf8, "session": pl.Utf8,
                 "turns": pl.Int64, "nodes_completed": pl.Int64, "nodes_total": pl.Int64,
                 "commitments_satisfied": pl.Int64, "commitments_total": pl.Int64, "traj": pl.Utf8, "sati": pl.Utf8,
                 "status": pl.Utf8, "failure_mode": pl.Utf8}


def failure_mode(kinds: Sequence[str]) -> str | None:
    """"Fact conflict", "Commitment + fact conflict", ... (the paper's wording of the confirmed kinds)."""
    order = ["commitment", "fact", "player_input"]
    names = [k.replace("_", "-") for k in order if k in kinds]
    return (" + ".join(names) + " conflict").capitalize() if names else None


def human_baseline_table(episodes: pl.DataFrame) -> pl.DataFrame:
    """Paper Table 5: on every spec a human narrated (`wse ncp play --as narrator`), each model's
    episode on that spec and each human session: turns, nodes reached / total, commitments
    satisfied / total, SUCCESS / SURVIVED / FAILURE and the failure mode."""
    if episodes.is_empty():
        return pl.DataFrame([], schema=TABLE5_SCHEMA)
    human_specs = set(episodes.filter(pl.col("model") == HUMAN_MODEL)["spec_id"].to_list())
    rows = []
    for r in episodes.filter(pl.col("spec_id").is_in(sorted(human_specs))).iter_rows(named=True):
        human = r["model"] == HUMAN_MODEL
        rows.append({"spec_id": r["spec_id"], "model": r["model"], "arch": r["arch"], "auditor_id": r["auditor_id"],
                     "session": (r.get("generation_version") or "").removeprefix("ncp-play:") if human else None,
                     "turns": r["turns"], "nodes_completed": r["nodes_completed"], "nodes_total": r["nodes_total"],
                     "commitments_satisfied": r["commitments_satisfied"], "commitments_total": r["commitments_total"],
                     "traj": f"{r['nodes_completed']}/{r['nodes_total']}",
                     "sati": f"{r['commitments_satisfied']}/{r['commitments_total']}",
                     "status": STATUS.get(r["termination"], r["termination"]),
                     "failure_mode": failure_mode(_kinds(r["conflict_kinds"])) if r["termination"] == "CONFLICT"
                     else None})
    rows.sort(key=lambda x: (x["spec_id"], x["model"] == HUMAN_MODEL, x["model"], x["arch"], x["session"] or ""))
    return pl.DataFrame(rows, schema=TABLE5_SCHEMA)


# ---- Table 7: genres -----------------------------------------------------------------------------

def genre_table(episodes: pl.DataFrame, primary_genre: Mapping[str, str]) -> pl.DataFrame:
    """Trajectory % and satisfied % per primary genre × model (kept per arch and auditor too,
    so conditions are never mixed). `primary_genre` maps spec_id → the spec's first genre."""
    schema = {"primary_genre": pl.Utf8, "model": pl.Utf8, "arch": pl.Utf8, "auditor_id": pl.Utf8,
              "n_episodes": pl.Int64, "trajectory_pct": pl.Float64, "satisfied_pct": pl.Float64}
    if episodes.is_empty():
        return pl.DataFrame([], schema=schema)
    unknown = sorted(set(episodes["spec_id"].to_list()) - set(primary_genre))
    if unknown:
        raise ValueError(f"ncp_episodes: spec_id(s) {unknown} have no known primary genre (not in the loaded specs)")
    df = episodes.with_columns(pl.col("spec_id").replace_strict(dict(primary_genre)).alias("primary_genre"))
    out = (df.group_by(["primary_genre", "model", "arch", "auditor_id"])
             .agg(pl.len().alias("n_episodes"),
                  (100.0 * pl.col("trajectory_progress").mean()).alias("trajectory_pct"),
                  (100.0 * pl.col("commitments_satisfied_share").mean()).alias("satisfied_pct"))
             .sort(["primary_genre", "model", "arch", "auditor_id"]))
    return out.select(list(schema)).cast(schema)
