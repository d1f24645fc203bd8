"""Precursor audit (paper Table 3, lower half; §6.3, App. C): where did the content of a
trajectory's first agreed contradiction first appear upstream of the narrative?

For each trajectory with an observed first contradiction at step T, every inconsistent vote's
`conflicting_claim` is matched lexically against the components' recorded outputs at steps ≤ T:
the player intent (the chosen option), the Character Agent intents, the World Model beats, and
the World Memory views (the memory state written after steps < T, i.e. what steps ≤ T could
read). Matching is conservative: a component matches when at least MIN_SHARED content tokens and
at least MIN_SHARE of the claim's tokens occur in its text at one step. A vote's origin is the
best-scoring matching component (`none` without a match, `not_localized` without a claim); the
trajectory's origin is the plurality over its votes (`plurality_tie` when tied). `persisted`:
the origin component carried the matching content at more than one step. These are possible
precursors, not causes. As the paper counts them (App. C): `ca_precursor` (a strong Character-Agent
match in any vote), `ca_through_world_model` (that claim also in the World Model's plan at that
step or later) and `world_model_only` (a World Model match, no Character-Agent match), per
trajectory and as row_kind = trace_summary counts.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import polars as pl

from wse_platform.wse.tables.frame import TRAJ, TableParams
from wse_platform.wse.tables.schema import _rows

COMPONENTS = ("player_intent", "character_agent", "world_model", "memory")
ORIGINS = (*COMPONENTS, "none", "not_localized", "plurality_tie")
MIN_SHARED, MIN_SHARE = 3, 0.5
_STOP = frozenset("that this with from have were been they them their there what when which while would could "
                  "should about into over under after before again also just only very more most some than then "
                  "your yours will shall does done being".split())
_CJK = re.compile(r"[\u3400-\u9fff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")


def content_tokens(text: str | None) -> set[str]:
    """Lower-cased words of ≥ 4 letters (minus a few function words) and CJK character bigrams."""
    if not text:
        return set()
    t = text.casefold()
    words = {w for w in re.findall(r"[^\W\d_]{4,}", t) if not _CJK.search(w) and w not in _STOP}
    bigrams = {run[i:i + 2] for run in _CJK_RUN.findall(t) for i in range(len(run) - 1)}
    return words | bigrams


def match_score(claim: set[str], text: str | None) -> float:
    """Share of the claim's tokens found in `text`, 0 unless at least MIN_SHARED are shared."""
    if not claim:
        return 0.0
    shared = len(claim & content_tokens(text))
    return shared / len(claim) if shared >= MIN_SHARED else 0.0


def _texts(row: dict[str, Any]) -> dict[str, str]:
    def flat(js: str | None) -> str:
        if not js or "\\u" not in js:      # keys and values tokenise the same inside JSON text
            return js or ""
        try:                               # \uXXXX escapes (e.g. CJK) must become characters
            return json.dumps(json.loads(js), ensure_ascii=False)
        except ValueError:
            return js
    return {"player_intent": row.get("player_option") or "", "character_agent": flat(row.get("intents_json")),
            "world_model": flat(row.get("plan_json")), "memory": flat(row.get("memory_state_json"))}


def step_tokens(steps: list[dict[str, Any]]) -> list[tuple[int, dict[str, set[str]]]]:
    """Content tokens of every component's text at every step (computed once per trajectory)."""
    return [(s["step"], {c: content_tokens(t) for c, t in _texts(s).items()}) for s in steps]


def vote_hits(claim: str | None, tokens_by_step: list[tuple[int, dict[str, set[str]]]], t: int
              ) -> dict[str, list[tuple[int, float]]] | None:
    """Per component, the (step, score) of every strong match of one claim (None: no claim)."""
    claim_tokens = content_tokens(claim)
    if not claim_tokens:
        return None
    hits: dict[str, list[tuple[int, float]]] = {c: [] for c in COMPONENTS}
    for step, toks in tokens_by_step:
        for comp in COMPONENTS:
            if step > t or (comp == "memory" and step >= t):
                continue
            shared = len(claim_tokens & toks[comp])
            score = shared / len(claim_tokens) if shared >= MIN_SHARED else 0.0
            if score >= MIN_SHARE:
                hits[comp].append((step, score))
    return hits


def trace_flags(all_hits: list[dict[str, list[tuple[int, float]]] | None]) -> dict[str, bool]:
    """Table 3 lower half / App. C as the paper counts trajectories: a strong Character-Agent
    precursor (any vote), one that persists through the World Model (the same claim also matches
    the World Model's plan at that step or later), and a World-Model-only precursor (a World Model
    match and no Character-Agent match in any vote)."""
    hs = [h for h in all_hits if h is not None]
    ca = any(h["character_agent"] for h in hs)
    through = any(w >= c for h in hs for c, _ in h["character_agent"] for w, _ in h["world_model"])
    wm = any(h["world_model"] for h in hs)
    return {"ca_precursor": ca, "ca_through_world_model": through, "world_model_only": wm and not ca}


TRACES = ("ca_precursor", "ca_through_world_model", "world_model_only")


def vote_origin(claim: str | None, tokens_by_step: list[tuple[int, dict[str, set[str]]]], t: int
                ) -> tuple[str, int | None, bool, float]:
    """(origin, first step it matched, persisted, best score) of one vote's conflicting claim."""
    hits = vote_hits(claim, tokens_by_step, t)
    if hits is None:
        return "not_localized", None, False, 0.0
    scored = {c: max(sc for _, sc in h) for c, h in hits.items() if h}
    if not scored:
        return "none", None, False, 0.0
    best = max(scored.values())
    comp = sorted(c for c, v in scored.items() if v == best)[0]
    return comp, min(st for st, _ in hits[comp]), len(hits[comp]) > 1, best


def precursor_audit(frame: pl.DataFrame, consistency_verdicts: pl.DataFrame, trajectory_steps: pl.DataFrame,
                    info: dict[str, Any], params: TableParams | None = None) -> pl.DataFrame:
    """`wse_precursor_audit`: row_kind=trajectory (one per observed first contradiction) and
    row_kind=summary (origin counts and shares; scope all / group / model)."""
    cj = info["consistency_judge_id"]
    firsts = frame.filter("contradiction_observed").select(TRAJ + ["first_contradiction"])
    votes = consistency_verdicts.filter((pl.col("judge_config_id") == cj) & (pl.col("verdict") == "inconsistent"))
    step_cols = ["step", "player_option", "intents_json", "plan_json", "memory_state_json"]
    steps = trajectory_steps.select(TRAJ + [c for c in step_cols if c in trajectory_steps.columns])
    claims_of: dict[tuple, list[str | None]] = {}
    for r in (votes.join(firsts, left_on=TRAJ + ["step"], right_on=TRAJ + ["first_contradiction"], how="inner")
              .select(TRAJ + ["conflicting_claim"]).iter_rows()):
        claims_of.setdefault(r[:3], []).append(r[3])
    steps_of: dict[tuple, list[dict[str, Any]]] = {}
    for r in (steps.join(firsts, on=TRAJ, how="inner").filter(pl.col("step") <= pl.col("first_contradiction"))
              .sort(TRAJ + ["step"]).iter_rows(named=True)):
        steps_of.setdefault((r["model"], r["arch"], r["seed_id"]), []).append(r)
    rows: list[dict[str, Any]] = []
    for tr in firsts.iter_rows(named=True):
        k = (tr["model"], tr["arch"], tr["seed_id"])
        t = tr["first_contradiction"]
        claims = claims_of.get(k, [])
        mine = step_tokens(steps_of.get(k, [])) if claims else []
        origins = [vote_origin(c, mine, t) for c in claims] or [("not_localized", None, False, 0.0)]
        flags = trace_flags([vote_hits(c, mine, t) for c in claims])
        counts = Counter(o[0] for o in origins).most_common()
        tied = len(counts) > 1 and counts[0][1] == counts[1][1]
        origin = "plurality_tie" if tied else counts[0][0]
        pick = [o for o in origins if o[0] == origin]
        rows.append({"row_kind": "trajectory", "scope": None, "model": tr["model"], "arch": tr["arch"],
                     "seed_id": tr["seed_id"], "first_contradiction": t, "origin": origin,
                     "origin_step": min((o[1] for o in pick if o[1] is not None), default=None),
                     "persisted": any(o[2] for o in pick) if pick else None,
                     "match_score": max((o[3] for o in pick), default=None), "n_votes": len(claims),
                     **flags})
    per = list(rows)
    scopes: list[tuple[str, str | None, str | None, list[dict]]] = [("all", None, None, per)]
    models = sorted({r["model"] for r in per})
    if params is not None and params.model_groups:
        for g, ms in params.groups(models).items():
            scopes.append(("group", g, None, [r for r in per if r["model"] in ms]))
    scopes += [("model", None, m, [r for r in per if r["model"] == m]) for m in models]
    for scope, group, model, sub in scopes:
        if not sub:
            continue
        for origin in ORIGINS:
            hit = [r for r in sub if r["origin"] == origin]
            rows.append({"row_kind": "summary", "scope": scope, "model_group": group, "model": model,
                         "origin": origin, "n": len(hit), "pct": 100.0 * len(hit) / len(sub),
                         "n_persisted": sum(1 for r in hit if r["persisted"]), "n_trajectories": len(sub)})
        for trace in TRACES:   # the paper's counts (not exclusive: a trajectory may have several)
            hit = [r for r in sub if r[trace]]
            rows.append({"row_kind": "trace_summary", "scope": scope, "model_group": group, "model": model,
                         "origin": trace, "n": len(hit), "pct": 100.0 * len(hit) / len(sub),
                         "n_trajectories": len(sub)})
    for r in rows:
        r["judge_config_id"] = cj
    return _rows("wse_precursor_audit", rows)
