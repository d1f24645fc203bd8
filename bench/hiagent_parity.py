"""Does our HiAgent (reference mode) send what the reference HiAgent sends? (issue 20)

Plays the same episode twice through the platform with one scripted model (no network):
  1. the reference's own `HiAgentNarrator` from a local checkout of NLP2CT/NCP-Bench, run as a
     plug-in narrator method (`ncp.narrator_methods`), its code imported from the checkout;
  2. our `memory` architecture with `ncp.reference` pointing at the same checkout.
The player and the auditors use the checkout's prompts in both runs. The scripted model answers
the narrator's control steps from one fixed list (subgoals, retrieves of known and unknown ids,
narrations long enough to pass the 12k-token budget) and each summary request with a text derived
from the request (longer than 220 characters). Then it compares, turn by turn, the control requests
(in order), the distinct summary requests and the opening request, and prints the first difference. The response cache
is off in both runs (the reference calls its model afresh each time).

    python bench/hiagent_parity.py --reference /path/to/NCP-Bench [--spec movie52] [--turns 18]

Needs the checkout's `src/` and `reference-methods/hiagent/src/` importable (added to sys.path
here) and tiktoken's o200k_base file (litellm's bundled copy is used when TIKTOKEN_CACHE_DIR is unset).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONTROL = ["Subgoal: Settle the scene\nAction: {n}", "Action: {n}", "Action: {n}",
           "Subgoal: Push toward the first change\nAction: {n}", "Action: retrieve(1)", "Action: {n}",
           "Action: {n}", "Subgoal: Raise the stakes\nAction: retrieve(7)", "Action: {n}", "Action: {n}",
           "Subgoal: Reveal a cost\nAction: {n}", "Action: retrieve(s_2, 3)", "Action: {n}"]


def narration(i: int) -> str:
    return " ".join(f"Beat {i}.{k}: the corridor narrows and a lamp gutters beside a locked archive door."
                    for k in range(20))


class Model:
    """The scripted model shared by both runs: control answers by position, summaries from the request."""

    def __init__(self, summary_system: str):
        self.summary_system = summary_system
        self.n_control = self.n_player = 0

    def __call__(self, call) -> list[str]:
        msgs = call.messages
        if call.role.startswith("ncp.player"):
            self.n_player += 1
            return [f"I try bold move number {self.n_player}."]
        kind = self.kind(call)
        if kind == "summary":
            h = hashlib.sha1(msgs[-1]["content"].encode()).hexdigest()[:10]
            return [f"Summary {h}: " + "the narrator kept the scene moving and the player pushed back. " * 5]
        if kind == "control":
            text = CONTROL[self.n_control % len(CONTROL)].format(n=narration(self.n_control))
            self.n_control += 1
            return [text]
        if kind == "opening":
            return [DEFAULTS["ncp.narrator_opening"]]
        return [DEFAULTS[call.role]]

    def kind(self, call) -> str:
        if call.role in ("ncp.memory_hiagent",):
            return "control"
        if call.role == "ncp.memory_summary":
            return "summary"
        if call.role == "ncp.narrator_opening":
            return "opening"
        if call.role in ("ncp.narrator_method",):
            msgs = call.messages
            if len(msgs) == 1:
                return "opening"
            return "summary" if msgs[0]["content"] == self.summary_system else "control"
        return "other"


DEFAULTS: dict[str, str] = {}


def play(ref: str, spec, arch: str, turns: int, method: str | None, workdir: str, model: Model):
    from wse_platform.config import settings_from_dict
    from wse_platform.llm import LLMClient, ScriptedBackend
    from wse_platform.ncp import reference
    from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, run_episodes

    settings = settings_from_dict({"cache_dir": f"{workdir}/cache", "warehouse_path": f"{workdir}/wh.duckdb"})
    backend = ScriptedBackend(model)
    # no response cache: every request reaches the scripted model, as every call of the reference is a fresh
    # one (through the cache, a re-ask identical to its ask would replay the reference's answer forever)
    client = LLMClient(settings, backends={"narr": backend, "player": backend, "aud": backend}, progress=False,
                       use_cache=False)
    seen: list = []

    class Recording:
        def complete_many(self, reqs):
            seen.extend(reqs)
            return client.complete_many(reqs)

    name = arch.partition("+")[0]
    setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse(arch, [name] if method else ()),
                         player_model="player", auditor=AuditorSetup("aud", reference.load(ref).version),
                         t_max=turns, reference=ref, method=method)
    result = run_episodes(Recording(), [spec], setup)
    return result, [r for r in seen if model.kind(r) in ("control", "summary", "opening")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True)
    ap.add_argument("--spec", default=None, help="a released spec id (default: the first)")
    ap.add_argument("--turns", type=int, default=18)
    args = ap.parse_args()
    ref = str(Path(args.reference).resolve())
    sys.path[:0] = [f"{ref}/src", f"{ref}/reference-methods/hiagent/src"]
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        from wse_platform.ncp.tokens import _litellm_tokenizers
        folder = _litellm_tokenizers()
        if folder:
            os.environ["TIKTOKEN_CACHE_DIR"] = folder
    import json

    from tests.ncp._ncp_helpers import released_specs
    from wse_platform.ncp import reference
    specs = released_specs()
    spec = next(s for s in specs if s.spec_id == args.spec) if args.spec else specs[0]
    mod = reference.load(ref).hiagent
    DEFAULTS.update({
        "ncp.narrator_opening": json.dumps({"text": "The archive hall is dark and cold."}),
        "ncp.fact_update": json.dumps({"add_facts": [], "negate_facts": [], "reason": "nothing durable"}),
        "ncp.conflict_check": json.dumps({"fact_conflict_count": 0, "commitment_conflict_count": 0,
                                          "player_input_conflict_count": 0, "total_conflict_count": 0,
                                          "conflicts": []}),
        "ncp.node_update": json.dumps({"trigger": {"occurred": False, "reason": "t"},
                                       "delta": {"occurred": False, "reason": "d"}}),
        "ncp.commitment_status": json.dumps({"statuses": [{"id": c.id, "status": "PENDING", "reason": "r"}
                                                          for c in spec.commitments]}),
    })
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, arch, method in (("reference", "refhi+adversarial", "ncpbench_reference_hiagent:HiAgentNarrator"),
                                    ("ours", "memory+adversarial", None)):
            model = Model(mod.summary_system)
            result, reqs = play(ref, spec, arch, args.turns, method, f"{tmp}/{label}", model)
            failed = result.failed_rows()
            if failed:
                print(f"{label}: episode failed: {failed[0]['role']} {failed[0]['message'][:300]}")
                return 2
            per_turn = defaultdict(lambda: {"control": [], "summary": [], "opening": []})
            for r in reqs:
                per_turn[int(r.tags["turn"])][model.kind(r)].append([dict(m) for m in r.messages])
            out[label] = (result, per_turn)
    (ref_result, ref_turns), (our_result, our_turns) = out["reference"], out["ours"]
    same = True
    n_control = n_summary = 0
    assert ref_turns[0]["opening"] and our_turns[0]["opening"], "no opening request recorded"
    if ref_turns[0]["opening"] != our_turns[0]["opening"]:
        same = False
        print("the opening requests differ")
    for turn in sorted(set(ref_turns) | set(our_turns)):
        a, b = ref_turns[turn], our_turns[turn]
        if a["control"] != b["control"]:
            same = False
            print(f"turn {turn}: control requests differ ({len(a['control'])} reference, {len(b['control'])} ours)")
            for x, y in zip(a["control"], b["control"]):
                if x != y:
                    xs, ys = x[-1]["content"], y[-1]["content"]
                    i = next((k for k in range(min(len(xs), len(ys))) if xs[k] != ys[k]), min(len(xs), len(ys)))
                    print(f"  first difference at character {i}:\n  reference: {xs[max(0, i - 80):i + 120]!r}\n"
                          f"  ours:      {ys[max(0, i - 80):i + 120]!r}")
                    break
            break
        distinct = lambda msgs: sorted({json.dumps(m, sort_keys=True) for m in msgs})  # noqa: E731
        if distinct(a["summary"]) != distinct(b["summary"]):
            same = False
            print(f"turn {turn}: the distinct summary requests differ")
            break
        n_control += len(a["control"])
        n_summary += len(distinct(a["summary"]))
    texts = lambda res: [r["narrator_text"] for r in res.turn_rows()]  # noqa: E731
    if same and texts(ref_result) != texts(our_result):
        same = False
        print("the narrations kept differ")
    print(f"spec {spec.spec_id}, {args.turns} turns: {n_control} control requests, {n_summary} distinct summary "
          f"requests compared; reference summary calls {sum(len(t['summary']) for t in ref_turns.values())}, "
          f"ours {sum(len(t['summary']) for t in our_turns.values())}")
    print("IDENTICAL" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
