"""100-Endings throughput: endings + verdicts per second through the platform vs the raw
backend on the same requests, and the prompt share a prefix cache could reuse.

1. raw: the forecast requests (one n=K call per position) and then the judge requests
   (one per predicted ending) straight to the backend's `generate`;
2. platform: the same requests through `LLMClient` (cache lookup/write, validation,
   accounting), building the `endings_predictions` / `endings_verdicts` rows and writing
   the call records to a temp warehouse. Same seeds, so both do the same model work.
   Overhead is reported end to end (platform / raw - 1, sensitive to machine load) and
   inside the platform run (its wall time minus the backend's own latency, over that
   latency), which isolates what the platform adds. Target: <= 2 %.
3. prefix reuse: for every included story of the shipped corpus, every kept position
   (stride 1): tokens of position i's forecast prompt (chat-templated, forecaster's
   tokenizer) shared with position i-1's prompt, over all prompt tokens.

    python bench/endings_throughput.py [--positions 2] [--k 2] [--max-tokens 150] [--repeats 1]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wse_platform.config import DATA_DIR, load_settings  # noqa: E402
from wse_platform.endings.corpus import load_corpus  # noqa: E402
from wse_platform.endings.forecast import (SplitStory, common_prefix_len, forecast_request,  # noqa: E402
                                           prediction_rows, prefix_reuse_share, story_positions)
from wse_platform.endings.judge import judge_config_id, judge_request, verdict_row  # noqa: E402
from wse_platform.endings.tokens import _llama_vocab, find_gguf, token_counter  # noqa: E402
from wse_platform.llm import LLMClient  # noqa: E402
from wse_platform.llm.accounting import write_call_records  # noqa: E402
from wse_platform.llm.backends import BackendCall, attempt_seed  # noqa: E402
from wse_platform.warehouse import Warehouse  # noqa: E402


def backend_calls(client: LLMClient, reqs) -> list[BackendCall]:
    """The exact first-attempt backend calls the client makes for `reqs`."""
    out = []
    for r in reqs:
        s = client._prepare(r)
        out.append(BackendCall(model_id=s.model.model_id, messages=r.messages, sampling=s.sampling, n=r.n,
                               seed=attempt_seed(s.sampling.seed, s.request_key, 1), json_schema=s.schema,
                               choices=r.choices, role=r.role, attempt=1))
    return out


def pick(seq: list, n: int) -> list:
    """n items spread evenly over seq."""
    if n >= len(seq):
        return list(seq)
    return [seq[round(i * (len(seq) - 1) / max(1, n - 1))] for i in range(n)]


def chatml(messages: list[dict[str, str]]) -> str:
    """The ChatML layout SmolLM2 / Qwen use (exact template tokens barely move the share)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


def prefix_reuse(settings, stories: list[SplitStory]) -> dict:
    model = settings.model(settings.endings.forecaster)
    if model.backend != "embedded":
        raise SystemExit("prefix-reuse figure needs the embedded forecaster's tokenizer (token ids)")
    vocab = _llama_vocab(str(find_gguf(model)))
    count = token_counter(settings, settings.endings.forecaster)
    per_story, all_lens, all_shared = {}, [], []
    for st in stories:
        positions = story_positions(st, count, stride=1)
        ids_prev, lens, shared = None, [], []
        for p in positions:
            req = forecast_request(st, p.sentence_index, p.position, settings.endings.forecaster, 1,
                                   settings.endings.forecast_sampling)
            ids = vocab.tokenize(chatml(req.messages).encode("utf-8"), add_bos=False, special=True)
            lens.append(len(ids))
            shared.append(common_prefix_len(ids_prev, ids) if ids_prev is not None else 0)
            ids_prev = ids
        per_story[st.story_id] = {"positions": len(positions), "prompt_tokens": sum(lens),
                                  "reuse_share": round(prefix_reuse_share(lens, shared), 4)}
        all_lens += lens
        all_shared += shared
    return {"per_story": per_story, "overall_reuse_share": round(prefix_reuse_share(all_lens, all_shared), 4),
            "prompt_tokens": sum(all_lens), "reusable_tokens": sum(all_shared)}


def run_raw(backend, f_calls, j_calls) -> tuple[float, list, list]:
    t0 = time.perf_counter()
    f = backend.generate(f_calls)
    j = backend.generate(j_calls)
    return time.perf_counter() - t0, f, j


def run_platform(settings, backend, f_reqs, j_reqs, preds_for_judge, story_of, k, tmp: Path, tag: str) -> dict:
    s = settings.model_copy(update={"cache_dir": str(tmp / f"cache-{tag}")})
    client = LLMClient(s, run_id=f"bench-{tag}", backends={settings.endings.forecaster: backend}, progress=False)
    wh = Warehouse(tmp / f"wh-{tag}.duckdb")
    wh.ensure_schema()
    jid = judge_config_id(settings)
    t0 = time.perf_counter()
    f_res = client.complete_many(f_reqs)
    pred_rows = [row for r, res in zip(f_reqs, f_res)
                 for row in prediction_rows(r.tags["story_id"], "bench", int(r.tags["position"]), k, res,
                                            r.model)]
    j_res = client.complete_many(j_reqs)
    verdicts = [verdict_row(p, jid, r.model, res, settings.endings.same_model_judge)
                for p, r, res in zip(preds_for_judge, j_reqs, j_res)]
    records = client.drain_call_records()
    write_call_records(wh, records)
    wall = time.perf_counter() - t0
    backend_latency = sum(r["latency_s"] for r in records)
    client.close()
    return {"wall": wall, "backend_latency": backend_latency, "n_endings": len(pred_rows),
            "n_verdicts": sum(v["verdict"] is not None for v in verdicts), "records": len(records),
            "cache_hits": sum(bool(r["cache_hit"]) for r in records)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=2, help="positions of the story to forecast")
    ap.add_argument("--k", type=int, default=2, help="predicted endings per position (one n=K request)")
    ap.add_argument("--max-tokens", type=int, default=None, help="forecast max tokens (default: config, 150)")
    ap.add_argument("--repeats", type=int, default=1, help="raw/platform pairs, order alternating")
    ap.add_argument("--json", type=str, default=None, help="also write the figures to this file")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="wse-endings-bench-"))
    settings = load_settings(overrides={"cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb")})
    e = settings.endings
    sampling = e.forecast_sampling if args.max_tokens is None else e.forecast_sampling.model_copy(
        update={"max_tokens": args.max_tokens})

    corpus = load_corpus(DATA_DIR / "stories" / "public_domain", min_words=e.min_words, max_words=e.max_words)
    stories = [SplitStory.of(s.story_id, s.text) for s in sorted(corpus.included, key=lambda s: s.n_words)]
    reuse = prefix_reuse(settings, stories)

    story = stories[0]  # the shortest included story
    count = token_counter(settings, e.forecaster)
    positions = pick(story_positions(story, count, stride=1), args.positions)
    probe = LLMClient(settings, progress=False)
    backend = probe.backend(e.forecaster)
    if e.judge != e.forecaster:
        raise SystemExit("this bench drives one backend: run it with the demo config (judge = forecaster)")
    f_reqs = [forecast_request(story, p.sentence_index, p.position, e.forecaster, args.k, sampling)
              for p in positions]
    f_calls = backend_calls(probe, f_reqs)
    # A first raw forecast pass loads the model (outside the timings) and gives the predictions
    # from which the judge requests are built; raw and platform runs then use the same requests.
    _, f_raw, _ = run_raw(backend, f_calls, [])
    preds = [{"story_id": story.story_id, "set_key": "bench", "position": p.position, "sample_index": i,
              "prediction": text.strip()} for p, resp in zip(positions, f_raw) for i, text in enumerate(resp.texts)]
    sent = {p.position: p.sentence_index for p in positions}
    j_reqs = [judge_request(story, sent[p["position"]], p["position"], p["sample_index"], p["prediction"] or "-",
                            e.judge, e.judge_sampling) for p in preds]
    j_calls = backend_calls(probe, j_reqs)

    raws, plats = [], []
    for rep in range(args.repeats):
        order = ("raw", "platform") if rep % 2 == 0 else ("platform", "raw")
        for which in order:
            if which == "raw":
                raws.append(run_raw(backend, f_calls, j_calls)[0])
            else:
                plats.append(run_platform(settings, backend, f_reqs, j_reqs, preds, story, args.k, tmp, str(rep)))
    t_raw = statistics.median(raws)
    t_plat = statistics.median(p["wall"] for p in plats)
    inside = statistics.median((p["wall"] - p["backend_latency"]) / p["backend_latency"] for p in plats)
    n_end, n_ver = len(preds), len(j_reqs)
    out = {
        "story": story.story_id, "positions": len(positions), "k": args.k,
        "forecast_max_tokens": sampling.max_tokens, "repeats": args.repeats,
        "endings": n_end, "verdicts": n_ver,
        "raw_seconds": round(t_raw, 3), "platform_seconds": round(t_plat, 3),
        "raw_items_per_s": round((n_end + n_ver) / t_raw, 4),
        "platform_items_per_s": round((n_end + n_ver) / t_plat, 4),
        "overhead_end_to_end": round(t_plat / t_raw - 1, 4),
        "overhead_inside_platform": round(inside, 4),
        "platform_cache_hits": sum(p["cache_hits"] for p in plats),
        "raw_runs_s": [round(t, 3) for t in raws],
        "platform_runs_s": [round(p["wall"], 3) for p in plats],
        "platform_backend_latency_s": [round(p["backend_latency"], 3) for p in plats],
        "prefix_reuse": reuse,
    }
    print(f"story {out['story']}: {len(positions)} positions x K={args.k} -> {n_end} endings + {n_ver} verdicts")
    print(f"raw backend : {t_raw:8.2f} s  {out['raw_items_per_s']:.3f} (endings+verdicts)/s")
    print(f"platform    : {t_plat:8.2f} s  {out['platform_items_per_s']:.3f} (endings+verdicts)/s")
    print(f"runs (s)    : raw {out['raw_runs_s']}  platform {out['platform_runs_s']}  "
          f"(backend latency inside platform runs {out['platform_backend_latency_s']})")
    print(f"overhead    : end-to-end {out['overhead_end_to_end']:+.2%}   inside the platform run "
          f"{out['overhead_inside_platform']:+.3%}   (target <= 2 %)")
    print(f"prefix reuse: {reuse['overall_reuse_share']:.2%} of {reuse['prompt_tokens']} forecast prompt tokens "
          f"(all positions of {len(stories)} stories; within one n=K request a further (K-1)/K of prompt work)")
    for sid, r in reuse["per_story"].items():
        print(f"    {sid}: {r['positions']} positions, {r['prompt_tokens']} tokens, reuse {r['reuse_share']:.2%}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
