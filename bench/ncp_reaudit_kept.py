"""CPU of an NCP cell's re-audit baseline (the in-loop auditor) after its last answer: answered by
cache-hit replays through the client ("old", as on another run or process) vs from the live episodes'
kept answers (`wse_platform/ncp/kept.py`, "new") vs taking the replays made from those answers while the
live episodes ran ("early", `kept.replaying`: their CPU in the episodes' threads is printed apart),
interleaved in one process (A/B/C), same rows checked.

Live episodes of one baseline+adversarial cell on the first SPECS released specs, t_max 3, on a
scripted backend; then ROUNDS x (old, new, early) re-audits, order alternating; CPU = `time.process_time`
(all threads) of `reaudit(...)` plus writing its call records into `llm_calls` (DuckDB) as a session
does; records = the `llm_calls` rows the re-audit writes.

    PYTHONPATH=. python bench/ncp_reaudit_kept.py [SPECS=30] [ROUNDS=5]
"""
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from resources.llm import FLUSH_EVERY, FLUSH_INTERVAL_MAX_S, FLUSH_INTERVAL_S  # noqa: E402
from tests.ncp._ncp_helpers import NO_CONFLICT, NODE_NO, NONE_DIFF, released_specs, statuses, text_of  # noqa: E402
from wse_platform.config import settings_from_dict  # noqa: E402
from wse_platform.kept_answers import EarlyAnswers  # noqa: E402
from wse_platform.llm import LLMClient, ScriptedBackend  # noqa: E402
from wse_platform.llm.accounting import write_call_records  # noqa: E402
from wse_platform.ncp.episode import Architecture, AuditorSetup, EpisodeSetup, run_episodes  # noqa: E402
from wse_platform.ncp.kept import EarlyReplays, answered, keeping, replaying  # noqa: E402
from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows  # noqa: E402
from wse_platform.warehouse import Warehouse  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
specs = list(released_specs())[:N]
def answer(call):
    t = text_of(call); seen = t.count("Scene ")
    r = call.role
    if r.startswith("ncp.player"): return [f"I look around {seen}."] * call.n
    if r in ("ncp.narrator", "ncp.narrator_opening"):
        return [json.dumps({"text": f"Scene {seen}. The hall is quiet."})] * call.n
    if r == "ncp.fact_update": return [NONE_DIFF] * call.n
    if r == "ncp.conflict_check": return [NO_CONFLICT] * call.n
    if r == "ncp.node_update": return [NODE_NO] * call.n
    if r == "ncp.commitment_status":
        ids = re.findall(r"^- (c_[0-9]+) \[", t, flags=re.MULTILINE)
        return [statuses(ids=tuple(ids))] * call.n
    raise AssertionError(r)
d = tempfile.mkdtemp(prefix="ncpaudit-ab-")
s = settings_from_dict({"cache_dir": d + "/cache", "warehouse_path": d + "/wh.duckdb"})
be = ScriptedBackend(answer, namespace="ab")
c = LLMClient(s, run_id="r", backends={"narr": be, "player": be, "aud": be}, progress=False)
setup = EpisodeSetup(narrator_model="narr", arch=Architecture.parse("baseline+adversarial"), player_model="player",
                     auditor=AuditorSetup("aud"), t_max=3)
answers, replays = EarlyAnswers(), EarlyReplays()
on_episode = replaying(c, "cell", {sp.spec_id: sp for sp in specs}, AuditorSetup("aud"), t_max=3, prompts_dir=None,
                       sampling=None, answers=answers, replays=replays)
span_cpu = [0.0]   # CPU of the early replays, in the live episodes' threads (time.thread_time)


def timed(runs):
    t = time.thread_time()
    on_episode(runs)
    span_cpu[0] += time.thread_time() - t


live = run_episodes(keeping(c, "cell", answers), specs, setup, on_episode=timed)
c.close()
early = dict(replays._sets[("r", "cell")])
print(f"early replays {len(early)}, their CPU during the live episodes {span_cpu[0]:.3f}s")
kept = answers.take("r", "cell")
trs = transcripts_from_rows(live.turn_rows())
by_id = {sp.spec_id: sp for sp in specs}
print("specs", N, "kept answers", len(kept), "live calls", be.n_calls)
wh = Warehouse(d + "/calls.duckdb")


def one(mode):
    """One re-audit step as a Dagster session runs it: call records written into `llm_calls` (DuckDB) in the
    session's batches, flushed at the end."""
    cl = LLMClient(s, run_id="r", backends={"aud": ScriptedBackend(answer, namespace="ab")}, progress=False,
                   record_sink=lambda rows: write_call_records(wh, rows), flush_every=FLUSH_EVERY,
                   flush_interval_s=FLUSH_INTERVAL_S, flush_interval_max_s=FLUSH_INTERVAL_MAX_S)
    a = EarlyAnswers()
    if mode in ("new", "early"):
        a._sets[("r", "cell")] = dict(kept)
    t = time.process_time()
    res = reaudit(answered(cl, "cell", a), by_id, trs, AuditorSetup("aud"), t_max=3,
                  early=early if mode == "early" else None)
    n = len(cl.call_records())
    cl.flush_records()
    cl.drain_call_records()
    cl.close()
    cpu = time.process_time() - t
    return cpu, n, [{k: v for k, v in r.items() if k != "llm_call_ids"} for r in res.turn_rows()]
out = {"old": [], "new": [], "early": []}
ref = None
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
    for mode in (("old", "new", "early") if i % 2 == 0 else ("early", "new", "old")):
        cpu, n, rows = one(mode)
        ref = ref or rows
        assert rows == ref
        out[mode].append(cpu)
        print(mode, f"cpu {cpu:.3f}s records {n}")
import statistics as st
print({m: round(st.median(v), 3) for m, v in out.items()})
