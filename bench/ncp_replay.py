"""NCP-Bench re-audit throughput at cache-hit speed, and where the time goes.

Replays synthetic stored transcripts (real released specs, deterministic player/narrator
texts) through `wse_platform.ncp.reaudit.reaudit` twice with the same cache directory:
the first (cold) pass fills the response cache, the second (warm) pass is answered from it.
For each pass it reports turns audited per second, LLM requests per second, and the split
of wall time into backend time, client time outside the backend (cache, validation,
accounting) and domain time outside the client (prompt rendering, ledger, bookkeeping).

    python bench/ncp_replay.py                      # scripted auditor backend (default)
    python bench/ncp_replay.py --specs 20 --turns 50
    python bench/ncp_replay.py --backend embedded --specs 1 --turns 3   # SmolLM2 on llama.cpp (slow cold pass)
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wse_platform.config import load_settings, settings_from_dict  # noqa: E402
from wse_platform.llm import LLMClient, ScriptedBackend  # noqa: E402
from wse_platform.llm.backends import Backend  # noqa: E402
from wse_platform.ncp.episode import (ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK,  # noqa: E402
                                      ROLE_FACT_UPDATE, ROLE_NODE_UPDATE, AuditorSetup)
from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows  # noqa: E402
from wse_platform.ncp.spec import load_specs  # noqa: E402


class TimedBackend(Backend):
    """Wraps a backend and accumulates the wall time spent inside `generate`."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self.calls = 0

    def cache_namespace(self) -> str:
        return self.inner.cache_namespace()

    def generate(self, calls, on_result=None):
        t0 = time.perf_counter()
        try:
            return self.inner.generate(calls, on_result=on_result)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += len(calls)


class TimedClient:
    """Wraps the client and accumulates the wall time spent inside `complete_many`."""

    def __init__(self, client: LLMClient):
        self.client = client
        self.seconds = 0.0
        self.requests = 0

    def complete_many(self, reqs):
        t0 = time.perf_counter()
        try:
            return self.client.complete_many(reqs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.requests += len(reqs)


_SCENE = re.compile(r"Scene (\d+)\.")


def _commitment_ids(call) -> list[str]:
    """The ids the commitment-status schema requires (one status per commitment of the spec)."""
    items = (call.json_schema or {}).get("$defs", {}).get("CommitmentStatus", {})
    ids = items.get("properties", {}).get("commitment_id", {}).get("enum")
    if ids is not None:
        return list(ids)
    return sorted(set(re.findall(r"\bc_\d+\b", "\n".join(m["content"] for m in call.messages))),
                  key=lambda c: int(c[2:]))


def scripted_auditor(call) -> list[str]:
    """Valid, deterministic auditor outputs in the current schemas (`wse_platform/ncp/schemas.py`):
    one new fact per turn, no conflicts (so the double-check is never asked), the current node
    advances on every 4th turn, every commitment stays PENDING."""
    prompt = "\n".join(m["content"] for m in call.messages)
    turn = max((int(n) for n in _SCENE.findall(prompt)), default=0)
    advance = turn > 0 and turn % 4 == 0
    no_conflict = {"fact_conflict_count": 0, "commitment_conflict_count": 0, "player_input_conflict_count": 0,
                   "total_conflict_count": 0, "conflicts": []}
    out = {
        ROLE_FACT_UPDATE: {"add_facts": [f"Clue {turn} was found in the story."], "negate_facts": [],
                           "reason": "the narration states the clue directly"},
        ROLE_CONFLICT_CHECK: no_conflict,
        ROLE_DOUBLE_CHECK: {**no_conflict, "confirmed": False, "review_reason": "no conflict stands"},
        ROLE_NODE_UPDATE: {"trigger": {"occurred": advance, "reason": "the stage turns"},
                           "delta": {"occurred": advance, "reason": "the change is shown"}},
        ROLE_COMMITMENT_STATUS: {"statuses": [{"commitment_id": c, "status": "PENDING",
                                               "reason": "not yet shown (f_0, s_0)"} for c in _commitment_ids(call)]},
    }[call.role]
    return [json.dumps(out)] * call.n


def synthetic_rows(spec_ids: list[str], n_turns: int) -> list[dict]:
    rows = []
    for sid in spec_ids:
        rows.append({"model": "bench", "arch": "baseline+adversarial", "spec_id": sid, "turn": 0,
                     "player_input": None, "narrator_text": "Scene 0. You stand at the start of the story."})
        for t in range(1, n_turns + 1):
            rows.append({"model": "bench", "arch": "baseline+adversarial", "spec_id": sid, "turn": t,
                         "player_input": f"I try approach number {t} and look for a way forward.",
                         "narrator_text": f"Scene {t}. The world answers your attempt {t} with a new detail."})
    return rows


def one_pass(settings, backend: TimedBackend, model: str, specs, transcripts, auditor, t_max) -> dict:
    client = TimedClient(LLMClient(settings, backends={model: backend}, progress=False))
    t0 = time.perf_counter()
    res = reaudit(client, specs, transcripts, auditor, t_max=t_max, sampling=settings.ncp.sampling)
    wall = time.perf_counter() - t0
    turns = sum(len([r for r in run.turn_rows if r["turn"] > 0]) for run in res.runs)
    records = client.client.call_records()
    hits = sum(r["cache_hit"] for r in records)
    return {
        "turns_audited": turns, "requests": client.requests, "call_attempts": len(records),
        "cache_hit_share": hits / len(records) if records else 0.0, "backend_calls": backend.calls,
        "wall_s": wall, "backend_s": backend.seconds, "client_s": client.seconds,
        "turns_per_s": turns / wall if wall else float("inf"), "requests_per_s": client.requests / wall if wall else 0,
        "share_outside_backend": 1 - backend.seconds / wall if wall else 0.0,
        "share_client_outside_backend": (client.seconds - backend.seconds) / wall if wall else 0.0,
        "share_domain": (wall - client.seconds) / wall if wall else 0.0,
        "terminations": sorted({run.termination for run in res.runs}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=int, default=20, help="number of released specs (evaluation order)")
    ap.add_argument("--turns", type=int, default=50, help="stored turns per transcript")
    ap.add_argument("--backend", choices=["scripted", "embedded"], default="scripted")
    ap.add_argument("--cache-dir", default=None, help="response cache (default: a fresh temp dir)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)

    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="ncp_replay_cache_")
    all_specs, problems = load_specs()
    chosen = all_specs[: args.specs]
    specs = {s.spec_id: s for s in chosen}
    transcripts = transcripts_from_rows(synthetic_rows(list(specs), args.turns))
    if args.backend == "scripted":
        settings = settings_from_dict({"cache_dir": cache_dir})
        model = "bench-auditor"
        make = lambda: TimedBackend(ScriptedBackend(scripted_auditor, namespace="bench-ncp-replay"))  # noqa: E731
    else:
        settings = load_settings(overrides={"cache_dir": cache_dir, "ncp": {
            "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 256}}})
        model = "smollm2"
        from wse_platform.llm.backends import make_backend
        inner = make_backend(model, settings.model(model), settings)
        make = lambda: TimedBackend(inner)  # noqa: E731
    auditor = AuditorSetup(model, "v1")
    cold = one_pass(settings, make(), model, specs, transcripts, auditor, args.turns)
    warm = one_pass(settings, make(), model, specs, transcripts, auditor, args.turns)

    print(f"NCP re-audit replay: {len(specs)} specs x {args.turns} stored turns, backend={args.backend}, "
          f"cache={cache_dir}")
    cols = ["turns_audited", "requests", "cache_hit_share", "backend_calls", "wall_s", "backend_s", "turns_per_s",
            "requests_per_s", "share_outside_backend", "share_client_outside_backend", "share_domain"]
    print(f"{'':32s}{'cold (fill cache)':>20s}{'warm (cache hits)':>20s}")
    for c in cols:
        fmt = (lambda v: f"{v:20.3f}") if isinstance(cold[c], float) else (lambda v: f"{v:20d}")
        print(f"{c:32s}{fmt(cold[c])}{fmt(warm[c])}")
    print(f"terminations: cold {cold['terminations']} warm {warm['terminations']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cold": cold, "warm": warm, "specs": len(specs), "turns": args.turns,
                                               "backend": args.backend}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
