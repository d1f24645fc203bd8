"""Output tokens/s of the embedded model with and without the JSON-schema grammar (not a timed test).

The same prompts (story-agent, plot-plan, consistency-verdict and richness-verdict schemas of
WSE-bench; sampling merged by the platform's own `LLMClient._prepare`) are decoded three
ways, each with the same seed and max_tokens:

- free:  no grammar (the prompt still asks for JSON);
- mask:  llama-cpp-python's grammar over the whole vocabulary for every token (before issue 13);
- check: sample, then check only that token against the grammar (llama.cpp's own method,
         `wse_platform/llm/backends/grammar_sampler.py`; the default now).

The model state is reset before each call, so every call pays the same prompt evaluation;
decode speed = output tokens / (call time − that prompt's evaluation time, measured with a
1-token unconstrained call), in wall time and in process CPU time (steadier when other jobs
share the cores). Also reported: share of constrained tokens re-sampled, and the
share of outputs that validate against the pydantic model.

    python bench/decoding_speed.py [--repeats 2] [--max-tokens 160]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wse_platform.config import load_settings  # noqa: E402
from wse_platform.llm import LLMClient, LLMRequest  # noqa: E402
from wse_platform.llm.backends import BackendCall  # noqa: E402
from wse_platform.llm.validation import schema_of  # noqa: E402
from wse_platform.wse.schemas import (StoryAgentOutput, consistency_verdict_model, plot_plan_model,  # noqa: E402
                                      richness_verdict_model)

STORY = ("Step 1 (day 1). Player: I ask the innkeeper about the missing ferryman.\n"
         "The innkeeper lowers her voice: the ferryman was last seen arguing with the reeve at the "
         "river gate, and nobody has crossed since the storm. Old Hobb claims he saw a lantern on the "
         "far bank at midnight.\n\nStep 2 (day 1). Player: I walk down to the river gate at dusk.")
PROMPTS = [
    (StoryAgentOutput, "Narrate the next step of the story below in about 80 words, then give the player "
                       "three options. Set new_day and ending.\n\n" + STORY),
    (plot_plan_model(("hobb", "reeve")), "Plan the next step as a few beats. Intents: hobb wants to hide "
                                         "the lantern; reeve wants the gate closed.\n\n" + STORY),
    (consistency_verdict_model(2), "Is step 2 consistent with everything established before it? Answer "
                                   "with your verdict and, if not, the prior fact it contradicts.\n\n" + STORY),
    (richness_verdict_model(2), "List the development units of this trajectory and rate it.\n\n" + STORY),
]


def calls(settings, client, max_tokens: int) -> list[tuple[type, BackendCall]]:
    out = []
    for i, (model_cls, text) in enumerate(PROMPTS):
        req = LLMRequest(role="bench.decoding", model="smollm2", output_model=model_cls,
                         sampling={"max_tokens": max_tokens, "seed": 7 + i},
                         messages=[{"role": "system", "content": "You write interactive fiction. Answer in JSON."},
                                   {"role": "user", "content": text}])
        s = client._prepare(req)
        out.append((model_cls, BackendCall(model_id=s.model.model_id, messages=req.messages, sampling=s.sampling,
                                           n=1, seed=7 + i, json_schema=schema_of(model_cls)[0],
                                           role=req.role, attempt=1)))
    return out


def timed(backend, call: BackendCall, mode: str) -> tuple[float, float, int, str]:
    backend.llama().reset()  # no prefix reuse: every mode pays the same prompt evaluation
    backend.grammar_sampling = mode
    if mode == "free":
        call = dataclasses.replace(call, json_schema=None)
    t0, c0 = time.perf_counter(), time.process_time()
    resp = backend._one(call)
    if resp.error:
        raise RuntimeError(resp.error)
    return time.perf_counter() - t0, time.process_time() - c0, resp.tokens_out, resp.texts[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=160)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="wse-bench-"))
    settings = load_settings(overrides={"cache_dir": str(tmp / "cache"), "warehouse_path": str(tmp / "wh.duckdb")})
    client = LLMClient(settings, progress=False)
    backend = client.backend("smollm2")
    todo = calls(settings, client, args.max_tokens)
    one_token = [(m, dataclasses.replace(c, json_schema=None, sampling=c.sampling.model_copy(update={"max_tokens": 1})))
                 for m, c in todo]
    timed(backend, one_token[0][1], "free")  # load the model outside the timings

    totals = {m: {"tokens": 0, "decode_s": 0.0, "decode_cpu": 0.0, "valid": 0, "n": 0}
              for m in ("free", "mask", "check")}
    for _ in range(args.repeats):
        for (model_cls, call), (_, probe) in zip(todo, one_token):
            probes = [timed(backend, probe, "free") for _ in range(2)]
            prompt_s, prompt_cpu = min(p[0] for p in probes), min(p[1] for p in probes)
            for mode in ("free", "mask", "check"):
                dt, cpu, n_out, text = timed(backend, call, mode)
                t = totals[mode]
                t["tokens"] += n_out
                t["decode_s"] += max(dt - prompt_s, 1e-6)
                t["decode_cpu"] += max(cpu - prompt_cpu, 1e-6)
                t["n"] += 1
                try:
                    model_cls.model_validate_json(text)
                    t["valid"] += 1
                except Exception:  # noqa: BLE001 - counting, not handling
                    pass
    backend.grammar_sampling = "check"
    stats = backend.grammar_stats
    speed = {m: t["tokens"] / t["decode_s"] for m, t in totals.items()}
    cpu_speed = {m: t["tokens"] / t["decode_cpu"] for m, t in totals.items()}
    print(f"{len(todo)} prompts × {args.repeats} repeats, max_tokens={args.max_tokens}, "
          f"model {backend.path.name}, n_threads={backend.n_threads}")
    print(f"{'mode':6s} | {'output tokens':>13s} | {'decode s':>8s} | {'tokens/s':>8s} | {'vs free':>7s} | "
          f"{'tokens/CPU-s':>12s} | {'vs free':>7s} | valid JSON")
    for m, t in totals.items():
        print(f"{m:6s} | {t['tokens']:13d} | {t['decode_s']:8.2f} | {speed[m]:8.1f} | "
              f"{speed[m] / speed['free']:7.2f} | {cpu_speed[m]:12.1f} | {cpu_speed[m] / cpu_speed['free']:7.2f} | "
              f"{t['valid']}/{t['n']}")
    checked = stats.get("checked", 0)
    print(f"check mode: {stats.get('resampled', 0)} of {checked} sampled tokens rejected by the grammar and "
          f"re-sampled ({100 * stats.get('resampled', 0) / max(checked, 1):.1f} %), "
          f"{stats.get('full_masks', 0)} of them over the whole vocabulary")
    print(f"median prompt evaluation per call: "
          f"{statistics.median(timed(backend, p, 'free')[0] for _, p in one_token):.2f} s; "
          "CPU-time figures are the steadier ones on a shared machine")


if __name__ == "__main__":
    main()
