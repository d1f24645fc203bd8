"""How busy do the three paper designs keep a model fleet? (issue 24 item 5)

Starts the simulated OpenAI-compatible server of `bench/fleet_server.py` (N slots, lognormal
service time per sequence) and runs each paper design at reduced length through the real CLI
(`python -m wse_platform.cli materialize --select group:<benchmark>_{sources,cells,verdicts,tables} [--parallel P]`, fresh
warehouse, cache and Dagster home per benchmark):

    wse      12 architectures x 42 seeds, horizon 3, a panel of three judge models (consistency
             and richness)
    ncp      100 specs x 3 architectures, t_max 3
    endings  K = 100 endings at every position of 5 human stories (stride --stride)

Per benchmark it prints the fleet efficiency = sum of service times / slots / makespan, where
the makespan is the CLI command's wall time (start-up, planning and platform time included),
the same over the span from the first request to the last answer, and the share of the
command's time with nothing in flight. Run from the repository root:

    python bench/fleet.py --slots 64 [--median 0.4] [--benchmarks wse,ncp,endings] [--parallel P] [--stride 10]
                          [--horizon 3] [--t-max 3] [--k 100] [--spare N] [--py-spy RAW]

`--horizon` / `--t-max` lengthen the WSE trajectories / NCP episodes beyond the issue's minimum of 3
(a longer run amortizes the command's fixed start and end); the figures print the length used and
the 1-minute load average at the start and end of the command (the machine may be shared).

Besides the efficiency it prints where the fleet was left idle: when the first request came
(`first_request_at_s`), how long the command ran after the last answer (`after_last_answer_s`),
the slot-seconds left unused inside the span and the longest gaps with nothing in flight; the
CLI's output is kept with a time stamp per line in `<workdir>/<benchmark>/cli.log` (which run
started / ended when), to read the gaps against, and the command's start and end in `command.json`
(`python bench/fleet_tail.py --breakdown <workdir>` places the last runs' steps against the last answer).

The server draws the service times from one seeded stream in arrival order (`--seed`, default 0), so
runs of one seed share most of their draws. At σ 0.8 one draw in ~35,000 exceeds 10 s; a long draw
near the end of a run lands on the last conversation and sets the tail by itself (seed 0 in the NCP
design at 64 slots: a 10.6-s draw ~43 s into the span in half the runs, ~5 points of efficiency;
`bench/tail_sim.py`). So single runs are draws: `longest_service_s` and
`longest_service_ends_before_last_s` say whether one did, and the README's figures are medians over
seeds 0, 1, 2. `--code CHECKOUT` runs another checkout's CLI against the same server and figures (an
A/B of two commits with one bench).

Service times scale with --median: on a small machine a longer median keeps the client's own CPU
per call from being what is measured; the ratio is what the targets are about (>= 85 % at 64
slots, >= 75 % at 256).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STAGES = ("sources", "cells", "verdicts", "tables")   # assets/groups.py: <bench>_<stage>


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model(url: str, name: str, slots: int) -> dict:
    return {"backend": "litellm", "model_id": f"hosted_vllm/{name}", "api_base": url, "endpoint_concurrency": slots,
            "sampling": {"temperature": 0.7, "max_tokens": 256}, "extra": {"timeout_s": 600, "max_retries": 2}}


def config(folder: Path, url: str, slots: int, bench: str, stride: int, scale: tuple[int, int, int],
           length: tuple[int, int, int] = (3, 3, 100), code: Path = REPO) -> Path:
    """`scale` = (WSE seeds, NCP specs, stories); `length` = (WSE horizon, NCP t_max, 100-Endings K); `code`: the
    checkout whose shipped `wse.yaml` the run's config starts from."""
    raw = yaml.safe_load((code / "wse.yaml").read_text())
    raw.update({"profile": "paper", "warehouse_path": str(folder / "wh.duckdb"), "cache_dir": str(folder / "cache"),
                "artifacts_dir": str(folder / "artifacts"),
                "models": {n: model(url, n, slots) for n in ("fleet", "fleet-j1", "fleet-j2", "fleet-j3")},
                "concurrency": {"embedded": 1, "litellm": 8, "vllm": 1}})
    panel = [{"model": m, "prompt_version": "v1"} for m in ("fleet-j1", "fleet-j2", "fleet-j3")]
    off_wse = {"models": [], "consistency_judges": None, "richness_judges": None, "model_groups": {}}
    off_ncp = {"narrators": [], "extraction_models": [], "player_model": None, "auditor": None,
               "reaudit_auditors": []}
    off_end = {"forecaster": None, "judge": None, "generators": [], "corpora": []}
    for k in ("consistency_judge", "richness_judge"):
        raw.get("wse", {}).pop(k, None)
    wse = {**raw.get("wse", {}), "models": ["fleet"], "architectures": None, "n_seeds": scale[0], "seed_ids": None,
           "horizon": length[0], "consistency_judges": panel, "richness_judges": panel, "model_groups": {"fleet": ["fleet"]}}
    wse.pop("architectures")
    ncp = {**raw.get("ncp", {}), "narrators": ["fleet"], "player_model": "fleet", "extraction_models": [],
           "auditor": {"model": "fleet-j1", "prompt_version": "v1"}, "reaudit_auditors": [], "t_max": length[1],
           "n_specs": scale[1], "spec_ids": None, "architectures": ["baseline+adversarial", "baseline+natural",
                                                                 "memory+adversarial"]}
    endings = {**raw.get("endings", {}), "forecaster": "fleet", "judge": "fleet-j1", "allow_same_model": False,
               "generators": [], "k": length[2], "max_positions_per_story": None, "position_stride": stride,
               "max_human_stories": scale[2], "min_words": 0,
               "corpora": [{**c, "max_words": 100_000} for c in raw.get("endings", {}).get("corpora", [])]}
    raw["wse"] = wse if bench == "wse" else {**raw.get("wse", {}), **off_wse}
    raw["ncp"] = ncp if bench == "ncp" else {**raw.get("ncp", {}), **off_ncp}
    raw["endings"] = endings if bench == "endings" else {**raw.get("endings", {}), **off_end}
    path = folder / "wse.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def read_sequences(log: Path) -> list[dict]:
    """The server's log of sequences (`bench/fleet_server.py --log`): per sequence its arrival `a`, start `s`, end `e`."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def busy_figures(log: Path, slots: int, t0: float, t1: float) -> dict:
    seqs = read_sequences(log)
    if not seqs:
        return {"sequences": 0}
    service = sum(s["e"] - s["s"] for s in seqs)
    # nothing in flight: moments of [t0, t1] covered by no (arrival, end) interval
    events = sorted([(s["a"], 1) for s in seqs] + [(s["e"], -1) for s in seqs])
    idle, depth, last = 0.0, 0, t0
    for t, d in events:
        t = min(max(t, t0), t1)
        if depth == 0:
            idle += max(0.0, t - last)
        depth += d
        last = t
    idle += max(0.0, t1 - last)
    first, end = min(s["a"] for s in seqs), max(s["e"] for s in seqs)
    longest = max(seqs, key=lambda s: s["e"] - s["s"])
    # slots busy over time (server side: start..end of each sequence): where the span loses its share
    busy = sorted([(s["s"], 1) for s in seqs] + [(s["e"], -1) for s in seqs])
    under, depth, last, gaps, gap_from = 0.0, 0, first, [], None
    for t, d in busy:
        if depth < slots:
            under += (t - last) * (slots - depth) / slots   # slot-seconds left unused, in slot units
        if depth == 0 and gap_from is not None and t - gap_from > 0.5:
            gaps.append((round(gap_from - t0, 1), round(t - t0, 1)))
        depth += d
        last = t
        gap_from = t if depth == 0 else None
    return {"sequences": len(seqs), "sum_service_s": round(service, 1), "makespan_s": round(t1 - t0, 1),
            "efficiency": round(service / slots / (t1 - t0), 3),
            "request_span_s": round(end - first, 1), "efficiency_in_span": round(service / slots / (end - first), 3),
            "idle_share": round(idle / (t1 - t0), 3),
            "first_request_at_s": round(first - t0, 1), "after_last_answer_s": round(t1 - end, 1),
            "unused_slot_s_in_span": round(under, 1),
            # the longest single service (a lognormal draw): one near the span's end sets the tail by itself
            "longest_service_s": round(longest["e"] - longest["s"], 1),
            "longest_service_ends_before_last_s": round(end - longest["e"], 1),
            "idle_gaps_in_span": sorted(gaps, key=lambda g: g[0] - g[1])[:8]}


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children (the CLI and its worker processes)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds of a running process (Linux /proc), None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)
    except (OSError, IndexError, ValueError):
        return None


def process_tree(root: int) -> tuple[dict[int, tuple[int, int]], set[int]]:
    """Every process now (Linux /proc): pid -> (parent pid, CPU ticks user + system), and the pids of `root`
    and its descendants that are in it."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(d)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, grew = {root}, True
    while grew:
        new = {p for p, (pp, _) in parent.items() if pp in tree and p not in tree}
        tree |= new
        grew = bool(new)
    return parent, {p for p in tree if p in parent}


class TreeCpu:
    """CPU seconds of a process and all its descendants, sampled from /proc every `every` s (a thread).

    `RUSAGE_CHILDREN` misses worker processes forked by multiprocessing's fork server (they are the
    fork server's children, and the fork server is never waited for): this counts every descendant
    by its own utime + stime as last seen (a process's last < `every` s are missed)."""

    def __init__(self, pid: int, every: float = 0.25):
        import threading
        self.pid, self.every, self.seen = pid, every, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        parent, tree = process_tree(self.pid)
        for p in tree:
            self.seen[p] = max(self.seen.get(p, 0), parent[p][1])

    def _loop(self) -> None:
        while not self.stop.wait(self.every):
            self._sample()

    def total(self) -> float:
        self.stop.set()
        self.thread.join()
        return round(sum(self.seen.values()) / os.sysconf("SC_CLK_TCK"), 1)


def start_server(port: int, log: Path, slots: int, median: float, sigma: float = 0.8, seed: int = 0,
                 quiet: bool = False) -> subprocess.Popen:
    """`bench/fleet_server.py` on `port`, logging each sequence to `log`, once it accepts connections."""
    out = subprocess.DEVNULL if quiet else None
    server = subprocess.Popen([sys.executable, str(REPO / "bench" / "fleet_server.py"), "--port", str(port),
                               "--slots", str(slots), "--median", str(median), "--sigma", str(sigma),
                               "--log", str(log), "--seed", str(seed)], stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.terminate()
                raise RuntimeError("the fleet server did not start")
            time.sleep(0.1)


def cli_env(folder: Path, code: Path) -> dict:
    """The environment of a `wse` command on `folder` (its own Dagster home) running the checkout `code`."""
    env = {**os.environ, "DAGSTER_HOME": str(folder / "dagster_home"), "PYTHONPATH": str(code),
           "PYTHONUNBUFFERED": "1"}
    for k in ("WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR"):
        env.pop(k, None)
    (folder / "dagster_home").mkdir(exist_ok=True)
    return env


def run_one(bench: str, args, root: Path) -> dict:
    code = Path(args.code).resolve() if args.code else REPO   # the platform code under test (the bench's own by default)
    folder = root / bench
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "sequences.jsonl"
    log.write_text("")
    server = start_server(port, log, args.slots, args.median, args.sigma, args.seed)
    try:
        cfg = config(folder, f"http://127.0.0.1:{port}/v1", args.slots, bench, args.stride,
                     (args.seeds, args.specs, args.stories), (args.horizon, args.t_max, args.k), code)
        env = cli_env(folder, code)
        if args.spare is not None:
            env["WSE_SPARE_RUNS"] = str(args.spare)
        # --py-spy: the CLI and every worker sampled (bench/cpu_components.py reads the file); the tree's
        # CPU then includes py-spy's own
        spy = ["py-spy", "record", "--subprocesses", "--rate", "10", "--format", "raw", "--nonblocking", "-o",
               str(Path(args.py_spy).resolve().with_suffix(f".{bench}.txt")), "--"] if args.py_spy else []
        cmd = [*spy, sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "materialize",
               "--select", *(f"group:{bench}_{stage}" for stage in STAGES),
               *(("--parallel", str(args.parallel)) if args.parallel else ())]
        load_at_start = os.getloadavg()[0]
        cpu0 = _children_cpu()
        t0 = time.time()
        with open(folder / "cli.log", "w") as out:   # each line with its time since the command started
            proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1)
            tree = TreeCpu(proc.pid) if Path("/proc").is_dir() else None
            for line in proc.stdout:
                out.write(f"{time.time() - t0:8.2f} {line}")
                out.flush()
            tree_cpu = tree.total() if tree is not None else None
            rc = proc.wait()
        t1 = time.time()
        # the command's start and end (epoch s), to place its runs' events (`bench/fleet_tail.py --breakdown`)
        (folder / "command.json").write_text(json.dumps({"t0": t0, "t1": t1}))
        cli_cpu = _children_cpu() - cpu0
        server_cpu = _proc_cpu(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    length = {"wse": {"horizon": args.horizon}, "ncp": {"t_max": args.t_max}, "endings": {"k": args.k}}.get(bench, {})
    fig = {"benchmark": bench, "rc": rc, "code": str(code), "seed": args.seed, "slots": args.slots,
           "median_s": args.median, "sigma": args.sigma,
           "parallel": args.parallel, "spare": args.spare, **length, "load_avg_1m": [load_at_start, os.getloadavg()[0]],
           "cli_cpu_s": round(cli_cpu, 1), "cli_tree_cpu_s": tree_cpu, "server_cpu_s": server_cpu, **busy_figures(log, args.slots, t0, t1)}
    try:
        import duckdb
        con = duckdb.connect(str(folder / "wh.duckdb"), read_only=True)
        fig["llm_calls"], fig["invalid_calls"] = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT valid) FROM llm_calls").fetchone()
        con.close()
    except Exception as err:  # informative only
        fig["llm_calls_error"] = str(err)[:200]
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description="fleet efficiency of the three paper designs at reduced length")
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--median", type=float, default=0.4, help="median service time per sequence (s)")
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--benchmarks", default="wse,ncp,endings")
    ap.add_argument("--parallel", type=int, default=None,
                    help="`wse materialize --parallel` (runs at once; default: the CLI's, from the endpoints' slots)")
    ap.add_argument("--stride", type=int, default=10, help="endings.position_stride (sentences between positions)")
    ap.add_argument("--seeds", type=int, default=42, help="WSE seeds (paper: 42)")
    ap.add_argument("--specs", type=int, default=100, help="NCP specs (paper: 100)")
    ap.add_argument("--stories", type=int, default=5, help="100-Endings human stories (>= 5)")
    ap.add_argument("--horizon", type=int, default=3, help="WSE steps per trajectory (issue minimum 3; paper 20)")
    ap.add_argument("--t-max", type=int, default=3, help="NCP turns per episode (issue minimum 3; paper up to 25)")
    ap.add_argument("--k", type=int, default=100, help="100-Endings endings per position (paper 100)")
    ap.add_argument("--spare", type=int, default=None,
                    help="worker processes for runs past their requests (WSE_SPARE_RUNS; default: the CLI's)")
    ap.add_argument("--py-spy", default=None, metavar="RAW",
                    help="record the CLI's process tree with py-spy (on PATH) into RAW.<benchmark>.txt "
                         "(see bench/cpu_components.py)")
    ap.add_argument("--workdir", default=None, help="folder for the runs (default: a new temp folder)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the server's service-time draws (bench/fleet_server.py); single runs differ by the "
                         "draws, so report several seeds (e.g. 0, 1, 2) and their median")
    ap.add_argument("--code", default=None, metavar="CHECKOUT",
                    help="run the CLI of another checkout of the platform (same server, same figures: an A/B of two "
                         "commits with one bench); default: this one")
    args = ap.parse_args()
    import tempfile
    root = Path(args.workdir or tempfile.mkdtemp(prefix="wse-fleet-"))
    print(f"fleet: {args.slots} slots, lognormal median {args.median} s, sigma {args.sigma}; runs in {root}")
    for bench in args.benchmarks.split(","):
        fig = run_one(bench.strip(), args, root)
        print(json.dumps(fig), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
