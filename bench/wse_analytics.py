"""Benchmark: build every WSE-bench final table from synthetic verdicts at paper scale.

Synthesises the upstream tables for 12 models × 12 architectures × 42 EpisodeSeeds
(14 ITP / 14 Smallville / 14 DraCor = 2 per play, 9 worlds) × H = 20 × a panel of 3 judges
(votes with panel members and conflicting claims, generation steps with component texts,
llm_calls, 120 + 36 human labels), then times `build_all_tables` — every final table,
including the 10,000-draw hierarchical bootstraps of the architecture contrasts and of both
source-family computations, the precursor audit, agreement, cost and validation tables —
and the plain per-draw loop bootstrap of the architecture contrasts, and reports the ratio.

    PYTHONPATH=. python bench/wse_analytics.py                  # full run (loop timed on 500 draws)
    PYTHONPATH=. python bench/wse_analytics.py --loop-draws 10000   # time the loop on all draws
    PYTHONPATH=. python bench/wse_analytics.py --check            # also compare loop vs vectorised intervals

The synthetic data only has to be realistic in *shape* (failures, censoring, judge
disagreement, story endings); its numbers mean nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# One BLAS thread: on the shared 2-core machine, BLAS threads oversubscribe the cores and make the
# matrix products of the bootstrap ~2x slower (set OPENBLAS_NUM_THREADS yourself to override).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wse_platform.config import WSE_ARCHITECTURES  # noqa: E402
from wse_platform.stats import bootstrap as bs  # noqa: E402
from wse_platform.wse import tables as T  # noqa: E402
from wse_platform.wse.architecture import parse_architecture  # noqa: E402

CATEGORIES = ("temporal", "world-fact", "character-state", "identity", "relationship", "knowledge", "causal", "other")
DRACOR_PLAYS = ("ibsen-doll", "chekhov-vanya", "chekhov-sisters", "chekhov-orchard", "shakespeare-hamlet",
                "shakespeare-lear", "strindberg-father")
CJ = "wse.consistency_judge:synthetic:v1:x3"
RJ = "wse.richness_judge:synthetic:v1:x3"


def seeds_frame() -> pl.DataFrame:
    rows = [(f"itp-{i:02d}", "itp-bianjing-1100", "itp") for i in range(14)]
    rows += [(f"smallville-{i:02d}", "smallville-n25", "smallville") for i in range(14)]
    rows += [(f"{p}-{i}", p, "dracor") for p in DRACOR_PLAYS for i in range(2)]
    return pl.DataFrame(rows, schema=["seed_id", "world_id", "source_family"], orient="row")


def synthesize(n_models: int = 12, horizon: int = 20, n_judges: int = 3, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Upstream tables with the warehouse columns (vectorised numpy, a few seconds)."""
    rng = np.random.default_rng(seed)
    seeds = seeds_frame()
    models = [f"model-{i:02d}" for i in range(n_models)]
    archs = list(WSE_ARCHITECTURES)
    n_s, n_m, n_a = seeds.height, len(models), len(archs)
    M, A, S = np.meshgrid(np.arange(n_m), np.arange(n_a), np.arange(n_s), indexing="ij")
    M, A, S = M.ravel(), A.ravel(), S.ravel()
    n = M.size
    parsed = [parse_architecture(a) for a in archs]
    base = np.array([p.base for p in parsed])[A]
    wmem = np.array([p.wmem for p in parsed])[A]
    wmod = np.array([p.wmod for p in parsed])[A]
    skill = np.linspace(0.2, 1.0, n_m)[M]
    steps = np.arange(1, horizon + 1)

    # generation: per-step failure hazard of each enabled component, story endings
    comps = ["centralized_ca", "distributed_ca", "world_model", "story_agent", "world_memory_agent"]
    enabled = np.stack([base == 2, base == 3, wmod, np.ones(n, bool), wmem], axis=1)
    hazard = np.array([0.004, 0.008, 0.006, 0.003, 0.01])[None, :] * (1.5 - skill)[:, None] * enabled
    fail_u = rng.random((n, horizon, 5))
    fails = fail_u < hazard[:, None, :]
    any_fail = fails.any(axis=2)
    fail_step = np.where(any_fail.any(axis=1), any_fail.argmax(axis=1) + 1, 0)
    fail_comp = np.where(fail_step > 0, fails[np.arange(n), np.maximum(fail_step - 1, 0)].argmax(axis=1), -1)
    end_u = rng.random((n, horizon)) < 0.01
    end_step = np.where(end_u.any(axis=1), end_u.argmax(axis=1) + 1, 0)
    end_first = (end_step > 0) & ((fail_step == 0) | (end_step < fail_step))
    fail_step = np.where(end_first, 0, fail_step)
    fail_comp = np.where(end_first, -1, fail_comp)
    end_step = np.where(end_first, end_step, 0)
    wmem_fail = fail_comp == 4
    length = np.full(n, horizon)
    length = np.where(fail_step > 0, np.where(wmem_fail, fail_step, fail_step - 1), length)
    length = np.where(end_step > 0, end_step, length)
    lost = np.where(wmem_fail, horizon - fail_step, 0)
    day_adv = rng.binomial(length, 0.15)

    # consistency: per-step true inconsistency, 3 noisy judges, judging stops at the first majority-inconsistent
    p_inc = 0.02 + 0.05 * (1 - skill) + 0.01 * (base == 3) - 0.01 * wmem
    truth = rng.random((n, horizon)) < p_inc[:, None]
    votes = np.where(rng.random((n, horizon, n_judges)) < 0.85, truth[..., None], ~truth[..., None]).astype(int)
    votes = np.where(rng.random((n, horizon, n_judges)) < 0.05, 2, votes)       # 2 = uncertain
    judge_fail = rng.random((n, horizon, n_judges)) < 0.01
    n_inc = ((votes == 1) & ~judge_fail).sum(axis=2)
    n_con = ((votes == 0) & ~judge_fail).sum(axis=2)
    majority = np.where(n_inc >= 2, 1, np.where(n_con >= 2, 0, -1))            # -1: no valid majority
    observed = steps[None, :] <= length[:, None]
    stop = observed & (majority != 0)
    first_stop = np.where(stop.any(axis=1), stop.argmax(axis=1) + 1, 0)
    stop_kind = np.where(first_stop > 0, majority[np.arange(n), np.maximum(first_stop - 1, 0)], 0)
    first_contra = np.where(stop_kind == 1, first_stop, 0)
    censored_at = np.where(stop_kind == -1, first_stop - 1, -1)
    judged_upto = np.where(first_stop > 0, first_stop, length)

    keys = {"model": np.array(models)[M], "arch": np.array(archs)[A], "seed_id": seeds["seed_id"].to_numpy()[S]}
    traj = pl.DataFrame({
        **keys, "world_id": seeds["world_id"].to_numpy()[S], "source_family": seeds["source_family"].to_numpy()[S],
        "horizon": horizon, "length": length,
        "failure_component": [comps[c] if c >= 0 else None for c in fail_comp],
        "failure_step": pl.Series(np.where(fail_step > 0, fail_step, None).tolist(), dtype=pl.Int64),
        "end_kind": [["death", "permanent_incapacity", "closed_story"][i % 3] if e else None
                     for i, e in enumerate(end_step)],
        "end_step": pl.Series(np.where(end_step > 0, end_step, None).tolist(), dtype=pl.Int64),
        "day_advances": day_adv, "lost_steps_wmem": lost, "generation_version": "synthetic",
    })
    tc = pl.DataFrame({
        "judge_config_id": CJ, **keys, "length": length,
        "first_contradiction": pl.Series(np.where(first_contra > 0, first_contra, None).tolist(), dtype=pl.Int64),
        "censored_at": pl.Series(np.where(censored_at >= 0, censored_at, None).tolist(), dtype=pl.Int64),
        "censor_reason": np.where(censored_at >= 0, "no_majority", None),
    })
    # per-step and per-vote rows for judged steps
    ti, si = np.nonzero(steps[None, :] <= judged_upto[:, None])
    cat_votes = rng.integers(0, len(CATEGORIES), size=(n, horizon, n_judges))
    cat_votes = np.where(rng.random((n, horizon, 1)) < 0.6, cat_votes[..., :1], cat_votes)  # judges often agree
    src_votes = rng.integers(0, 4, size=(n, horizon, n_judges))  # initial_world, opening, earlier, current
    src_votes = np.where(rng.random((n, horizon, 1)) < 0.5, src_votes[..., :1], src_votes)
    inc = (votes == 1) & ~judge_fail
    sources = ("initial_world", "opening", "earlier_narrative", "current_narrative")
    cat_major, src_major = [], []
    for t, s in zip(ti, si):
        for votes_of, names, out in ((cat_votes, CATEGORIES, cat_major), (src_votes, sources, src_major)):
            if majority[t, s] != 1:
                out.append(None)
                continue
            vals, cnt = np.unique([votes_of[t, s, j] for j in range(n_judges) if inc[t, s, j]], return_counts=True)
            out.append(names[vals[cnt.argmax()]] if cnt.max() >= 2 else None)
    step_keys = {k: v[ti] for k, v in keys.items()}
    cs = pl.DataFrame({
        "judge_config_id": CJ, **step_keys, "step": si + 1,
        "n_valid_votes": (~judge_fail[ti, si]).sum(axis=1), "n_consistent": n_con[ti, si],
        "n_inconsistent": n_inc[ti, si], "n_uncertain": ((votes[ti, si] == 2) & ~judge_fail[ti, si]).sum(axis=1),
        "majority": np.array(["consistent", "inconsistent", None], dtype=object)[
            np.where(majority[ti, si] == -1, 2, majority[ti, si])],
        "category_majority": cat_major, "prior_source_majority": src_major,
    })
    vt, vs, vj = (np.repeat(ti, n_judges), np.repeat(si, n_judges), np.tile(np.arange(n_judges), ti.size))
    v = votes[vt, vs, vj]
    failed = judge_fail[vt, vs, vj]
    is_inc = (v == 1) & ~failed
    src = src_votes[vt, vs, vj]
    prior_source = np.where(is_inc, np.array(["initial_world", "opening", "narrative", "narrative"])[src], None)
    prior_step = np.where(is_inc & (src == 2), np.maximum(vs, 1), np.where(is_inc & (src == 3), vs + 1, -1))
    # (vs is 0-based: an earlier step is ≤ vs, the current step is vs + 1)
    words = np.array(["letter", "silver", "river", "horse", "garden", "sword", "crown", "promise", "debt", "wedding"])
    claim_words = rng.integers(0, len(words), size=(vt.size, 5))
    claims = [" ".join(words[c]) for c in claim_words]
    cv = pl.DataFrame({
        "judge_config_id": CJ, **{k: val[vt] for k, val in keys.items()}, "step": vs + 1, "judge_index": vj,
        "judge_member": np.array(["0:judge-a", "1:judge-b", "2:judge-c"])[vj],
        "verdict": np.where(failed, None, np.array(["consistent", "inconsistent", "uncertain"])[v]),
        "category": np.where(is_inc, np.array(CATEGORIES)[cat_votes[vt, vs, vj]], None),
        "prior_source": prior_source,
        "prior_step": pl.Series(np.where(prior_step > 0, prior_step, None).tolist(), dtype=pl.Int64),
        "conflicting_claim": pl.Series(np.where(is_inc, np.array(claims, dtype=object), None).tolist(),
                                       dtype=pl.String),
        "failure_json": pl.Series(np.where(failed, json.dumps({"error_kind": "truncated"}), None).tolist(),
                                  dtype=pl.String),
    })
    # richness: 3 judges per trajectory with a narrative
    ri = np.repeat(np.flatnonzero(length >= 1), n_judges)
    rj = np.tile(np.arange(n_judges), (length >= 1).sum())
    units = rng.poisson(np.maximum(length[ri], 1) * (0.5 + 2.5 * skill[ri]))
    ratings = np.clip(np.round(1 + 4 * skill[ri][:, None] + rng.normal(0, 0.8, (ri.size, 3))), 1, 5).astype(int)
    rfail = rng.random(ri.size) < 0.01
    rv = pl.DataFrame({
        "judge_config_id": RJ, **{k: val[ri] for k, val in keys.items()}, "judge_index": rj,
        "units_json": "[]", "n_units_non_repetitive": units, "observed_steps": length[ri],
        "rating_event_diversity": ratings[:, 0], "rating_character_change": ratings[:, 1],
        "rating_world_expansion": ratings[:, 2],
        "failure_json": pl.Series(np.where(rfail, json.dumps({"error_kind": "invalid_output"}), None).tolist(),
                                  dtype=pl.String),
    }).with_columns(pl.when(pl.col("failure_json").is_not_null()).then(None)
                    .otherwise(pl.col(c)).alias(c) for c in ("rating_event_diversity", "rating_character_change",
                                                             "rating_world_expansion", "n_units_non_repetitive"))
    # generation steps (1..L, plus the failed step) with component texts, and one llm_calls row per step
    si2, ki = np.nonzero(steps[None, :] <= np.maximum(length, fail_step)[:, None])
    texts = [" ".join(words[rng.integers(0, len(words), 6)]) for _ in range(64)]
    pick = rng.integers(0, 64, size=(si2.size, 4))
    failed_here = (fail_step[si2] == ki + 1)
    ts = pl.DataFrame({
        **{k: v[si2] for k, v in keys.items()}, "step": ki + 1,
        "player_option": np.array(texts, dtype=object)[pick[:, 0]],
        "intents_json": [json.dumps([{"character_id": "npc", "intent": texts[i]}]) for i in pick[:, 1]],
        "plan_json": [json.dumps({"beats": [{"content": texts[i]}]}) if w else None
                      for i, w in zip(pick[:, 2], wmod[si2])],
        "memory_state_json": [json.dumps({"facts": [texts[i]]}) if w else None for i, w in zip(pick[:, 3], wmem[si2])],
        "new_day": rng.random(si2.size) < 0.15,
        "failure_component": pl.Series(np.where(failed_here, np.array(comps + ["story_agent"])[fail_comp[si2]],
                                                None).tolist(), dtype=pl.String),
        "failure_json": pl.Series(np.where(failed_here, json.dumps({"error_kind": "schema_violation"}),
                                           None).tolist(), dtype=pl.String),
    })
    calls = pl.DataFrame({
        "role": "wse.story_agent", "model": keys["model"][si2],
        "partition_key": np.char.add(np.char.add(keys["arch"][si2].astype(str), "|"), keys["model"][si2].astype(str)),
        "request_key": np.arange(si2.size).astype(str), "attempt": 1,
        "tokens_in": rng.integers(800, 3000, si2.size), "tokens_out": rng.integers(100, 600, si2.size),
        "cost_usd": None, "valid": ~failed_here,
        "error_kind": pl.Series(np.where(failed_here, "truncated", None).tolist(), dtype=pl.String),
        "finish_reason": np.where(failed_here, "length", "stop"),
    })
    # human labels: 120 labelled steps and 36 rated trajectories (App. B.5 sizes)
    lab = cs.filter(pl.col("majority").is_not_null()).sample(120, seed=seed)
    cons_labels = lab.select("model", "arch", "seed_id", "step", label=pl.when(rng.random(120) < 0.85)
                             .then(pl.col("majority")).otherwise(pl.lit("consistent")), weight=pl.lit(1.0))
    rl = traj.filter(pl.col("length") >= 1).sample(36, seed=seed)
    rich_labels = rl.select("model", "arch", "seed_id", n_units_non_repetitive=pl.col("length") * 2,
                            rating_event_diversity=pl.lit(3), rating_character_change=pl.lit(2),
                            rating_world_expansion=pl.lit(3))
    return {"wse_trajectories": traj, "wse_trajectory_consistency": tc, "wse_consistency_steps": cs,
            "wse_consistency_verdicts": cv, "wse_richness_verdicts": rv, "wse_trajectory_steps": ts,
            "llm_calls": calls, "consistency_labels": cons_labels, "richness_labels": rich_labels, "models": models}


def params_for(models: list[str], draws: int) -> T.TableParams:
    half = len(models) // 2
    return T.TableParams(
        model_groups={"dense_family": models[:half], "frontier": models[half:]},
        model_params={m: ((2.0 ** (i - 2)) if i < half else None, "dense" if i < half else None)
                      for i, m in enumerate(models)},
        bootstrap_draws=draws, consistency_judge_id=CJ, richness_judge_id=RJ)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--loop-draws", type=int, default=500, help="draws for the per-draw loop timing")
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--check", action="store_true", help="compare loop and vectorised intervals on --loop-draws")
    ap.add_argument("--tables-only", action="store_true", help="skip the loop-vs-vectorised bootstrap timing")
    args = ap.parse_args()

    t0 = time.perf_counter()
    data = synthesize(n_models=args.models)
    t_syn = time.perf_counter() - t0
    up = {k: v for k, v in data.items() if k != "models"}
    print(f"synthesised in {t_syn:.1f}s: " + ", ".join(f"{k}={v.height}" for k, v in up.items()))
    params = params_for(data["models"], args.draws)
    t0 = time.perf_counter()
    import statsmodels.api  # noqa: F401  (the scaling fit's lazy import: a one-off cost, timed apart)
    print(f"one-off import of statsmodels (scaling fits): {time.perf_counter() - t0:.1f}s")

    t0 = time.perf_counter()
    out = T.build_all_tables(up["wse_trajectories"], up["wse_trajectory_consistency"], up["wse_consistency_steps"],
                             up["wse_richness_verdicts"], params, consistency_verdicts=up["wse_consistency_verdicts"],
                             trajectory_steps=up["wse_trajectory_steps"], llm_calls=up["llm_calls"],
                             consistency_labels=up["consistency_labels"], richness_labels=up["richness_labels"])
    t_all = time.perf_counter() - t0
    print(f"all final tables ({args.draws} bootstrap draws): {t_all:.2f}s  "
          + ", ".join(f"{k}={v.height}" for k, v in out.tables.items()))
    empty = [k for k, v in out.tables.items() if v.is_empty()]
    print(f"empty tables: {empty or 'none'}")

    print(f"target ≤ 30 s for all tables: {'met' if t_all <= 30 else 'NOT met'}")
    if args.tables_only:
        return
    frame, info = out.frame, out.info
    panel = T.build_panel(frame, info["horizon"])
    design = T.seed_design(frame)
    _, cm = T.contrast_specs(panel.cells, params)
    t0 = time.perf_counter()
    vec = bs.bootstrap_contrasts(panel, design, cm, args.draws, params.bootstrap_seed)
    t_vec = time.perf_counter() - t0
    t0 = time.perf_counter()
    loop = bs.bootstrap_contrasts_loop(panel, design, cm, args.loop_draws, params.bootstrap_seed)
    t_loop = time.perf_counter() - t0
    per_draw_loop = t_loop / args.loop_draws
    per_draw_vec = t_vec / args.draws
    print(f"contrast bootstrap, vectorised: {t_vec:.2f}s for {args.draws} draws ({1e3 * per_draw_vec:.3f} ms/draw)")
    print(f"contrast bootstrap, per-draw loop: {t_loop:.2f}s for {args.loop_draws} draws "
          f"({1e3 * per_draw_loop:.1f} ms/draw; ≈{per_draw_loop * args.draws:.0f}s for {args.draws})")
    print(f"speed-up vectorised vs loop: {per_draw_loop / per_draw_vec:.0f}x per draw")
    if args.check:
        small = bs.bootstrap_contrasts(panel, design, cm, args.loop_draws, params.bootstrap_seed)
        diff = max(float(np.nanmax(np.abs(small.lower[m] - loop.lower[m]))) for m in bs.METRICS)
        print(f"max |loop − vectorised| interval bound over {args.loop_draws} draws: {diff:.2e}")


if __name__ == "__main__":
    main()
