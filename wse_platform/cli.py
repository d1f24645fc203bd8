"""`wse` — the command line: demo, materialize, status, sql, ui, validate.

    wse demo [--full]                materialize everything at (quick or full) demo scale, show results
    wse materialize [--select K ...] [--partition P ...] [--stale] [--no-cache]
    wse status [--all]               stale and missing cells with their causes
    wse sql "SELECT ..." [--format table|csv|json|markdown|vertical] [-o FILE]   one read-only query
    wse ui                           dagster dev on 127.0.0.1
    wse validate ncp-spec PATH ...   check NCP-Bench spec files
    wse ncp play --spec ID --as narrator|player   play an NCP-Bench episode in the terminal (resumable)
    wse doctor [--no-models]         check Python, llama.cpp, paths, cache, keys and every model
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message=".*is currently in (beta|preview).*")


def _settings(args):
    from wse_platform.config import ConfigError, load_settings
    try:
        return load_settings(args.config)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def _defs(args):
    from wse_platform.definitions import build_definitions
    return build_definitions(args.config, no_cache=getattr(args, "no_cache", False))


def _defs_loader(args) -> tuple:
    """How a worker process of `wse materialize --parallel` rebuilds `_defs(args)`."""
    return "wse_platform.definitions:build_definitions", (args.config, getattr(args, "no_cache", False))


def _select(defs, patterns: list[str] | None):
    from wse_platform.runner import materializable
    keys = list(materializable(defs))
    if not patterns:
        return keys
    graph = defs.resolve_asset_graph()
    chosen = []
    for k in keys:
        name = k.to_user_string()
        group = graph.get(k).group_name
        if any(fnmatch.fnmatch(name, p) or p == f"group:{group}" for p in patterns):
            chosen.append(k)
    if not chosen:
        raise SystemExit(f"error: --select {patterns} matches no asset")
    from wse_platform.runner import expand_multi_assets
    chosen, notes = expand_multi_assets(defs, chosen)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return chosen


def cmd_materialize(args) -> int:
    from wse_platform.runner import execute, get_instance, observe_sources, plan, warehouse_problem

    settings = _settings(args)
    if args.config:
        os.environ["WSE_CONFIG"] = str(Path(args.config).resolve())
    instance = get_instance(settings)
    defs = _defs(args)
    graph = defs.resolve_asset_graph()
    keys = _select(defs, args.select)
    t0 = time.perf_counter()
    observe_sources(defs, instance)
    problem = warehouse_problem(settings)
    if problem:  # a truncated or corrupt warehouse file: never written over, never called fresh
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.stale and warehouse_problem(settings, defs, instance):  # deleted: --stale would find nothing
        print(f"note: the warehouse {settings.warehouse} does not exist but the run history records built "
              "assets: rebuilding every selected asset, not only stale ones", file=sys.stderr)
        args.stale = False
    if args.stale:
        partitions = stale_partitions(defs, instance, keys)
        keys = [k for k in keys if k in partitions]
    else:
        partitions = {}
        for k in keys:
            pdef = graph.get(k).partitions_def
            partitions[k] = (args.partition or list(pdef.get_partition_keys())) if pdef else None
    if not keys:
        print("nothing to do: every selected asset is fresh")
        return 0
    steps = plan(defs, keys, partitions)
    tags = {"wse/cli": "materialize", "wse/stale": str(args.stale).lower()}
    from wse_platform.parallel_runs import default_parallel, execute_parallel
    parallel = getattr(args, "parallel", None) or default_parallel(settings)
    report = (execute_parallel(defs, steps, instance, settings, parallel, _defs_loader(args), tags=tags) if parallel > 1
              else execute(defs, steps, instance, tags=tags))
    dt = time.perf_counter() - t0
    failed = [s for s, ok, _ in report.steps if not ok]
    print(f"{len(report.steps) - len(failed)}/{len(report.steps)} runs succeeded in {dt:.1f}s")
    if report.interrupted_by:
        return 130
    return 1 if failed else 0


def stale_partitions(defs, instance, keys) -> dict:
    """What `--stale` runs among `keys`: stale and missing partitions, everything downstream of them
    (a table built from a rebuilt cell is rebuilt in the same invocation), and the other outputs of
    a multi-asset that cannot run partially. Maps asset key -> partition keys (None = unpartitioned)."""
    from dagster import AssetKey

    from wse_platform.runner import materializable
    from wse_platform.status import MISSING, STALE, compute_status, with_descendants

    graph = defs.resolve_asset_graph()
    selected = set(keys)
    cells = [(AssetKey.from_user_string(c.asset), c.partition) for c in compute_status(defs, instance)
             if c.status in (MISSING, STALE)]
    todo = with_descendants(defs, [c for c in cells if c[0] in selected], allowed=selected)
    by_key = materializable(defs)
    for key, pks in list(todo.items()):
        a = by_key[key]
        if not a.can_subset:
            for sibling in a.keys:
                todo.setdefault(sibling, set()).update(pks)
    out: dict = {}
    for key, pks in todo.items():
        pdef = graph.get(key).partitions_def
        out[key] = None if pdef is None else [p for p in pdef.get_partition_keys() if p in pks]
    return out


def cmd_status(args) -> int:
    from wse_platform import status_report  # the no-Dagster fast path when nothing changed

    settings = _settings(args)
    key = None if args.full else status_report.quick_key(settings, flags={"all": args.all})
    cached = status_report.cached_report(settings, key)
    if cached is not None:
        text, at = cached
        print(text, end="")
        print(f"(nothing changed since the full check of {at}; `wse status --full` checks again)")
        return 0
    return _full_status(args, settings)


def _full_status(args, settings) -> int:
    from wse_platform import status_report
    from wse_platform.runner import get_instance, observe_sources, warehouse_problem
    from wse_platform.status import compute_status

    instance = get_instance(settings)
    defs = _defs(args)
    t0 = time.perf_counter()
    problem = warehouse_problem(settings, defs, instance)
    if problem:  # the instance's records would call a truncated or deleted warehouse fresh
        print(f"error: {problem}", file=sys.stderr)
        return 2
    observe_sources(defs, instance)
    flags = {"all": args.all}
    key = status_report.quick_key(settings, flags)  # after observing: the state this report describes
    rows = compute_status(defs, instance, only_problems=not args.all, refresh=getattr(args, "full", False))
    lines: list[str] = []
    for r in rows:
        where = f"[{r.partition}]" if r.partition else ""
        lines.append(f"{r.status:10s} {r.asset}{where}")
        lines += [f"           - {c}" for c in r.causes]
    counts = {s: sum(r.status == s for r in rows) for s in ("stale", "missing", "incomplete")}
    lines.append(f"{counts['stale']} stale, {counts['missing']} missing, {counts['incomplete']} incomplete")
    from wse_platform.llm.truncation_report import NOT_READ, truncation_lines  # one query on llm_calls
    truncation = truncation_lines(settings.warehouse)
    text = "".join(f"{line}\n" for line in lines + truncation)
    print(text, end="")
    print(f"({time.perf_counter() - t0:.1f}s)")
    if NOT_READ not in truncation and key == status_report.quick_key(settings, flags):
        status_report.save_report(settings, key, text)  # nothing was recorded while computing it
    return 0


def cmd_sql(args) -> int:
    from wse_platform import sqlshell  # read-only enforcement and rendering live there
    return sqlshell.main(_settings(args), args.query, fmt=args.format, output=args.output, limit=args.limit,
                         width=args.width)


def cmd_ui(args) -> int:
    from wse_platform.runner import get_instance
    settings = _settings(args)
    get_instance(settings)  # created here, under the instance lock, not raced by dagster dev's processes
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    if settings.source_file:  # the config this command resolved (--config, $WSE_CONFIG or ./wse.yaml): the
        env["WSE_CONFIG"] = str(Path(settings.source_file).resolve())  # code location runs in the repo folder
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(root / "workspace.yaml"), "-h", "127.0.0.1",
           "-p", str(args.port)]
    server = _start_plot_server(settings)
    print("running:", " ".join(cmd))
    proc = subprocess.Popen(cmd, env=env, cwd=root)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl-C reached `dagster dev` too (same process group): let it stop its services
        try:
            proc.wait(timeout=60)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):  # a second Ctrl-C, or it hangs: stop it now
            proc.kill()
        print("\nwse ui: stopped", file=sys.stderr)
        return 130
    finally:
        if server is not None:
            server.shutdown()


def _start_plot_server(settings):
    """Serve the published plots so they show inline on the assets' Overview pages (see
    `wse_platform.plot_server`); a taken port only costs the inline view, not the UI."""
    from wse_platform import plot_server
    if not settings.plots_port:
        return None
    try:
        server = plot_server.start(settings.artifacts, settings.plots_port)
    except OSError as e:
        print(f"note: plots will not show inline: port {settings.plots_port} is not free ({e}); "
              "set plots_port in the config to another port (or 0 to silence this)", file=sys.stderr)
        return None
    print(f"plots: served from {plot_server.served_dir(settings.artifacts)} on "
          f"http://127.0.0.1:{settings.plots_port}/")
    return server


def cmd_validate(args) -> int:
    if args.kind == "ncp-spec":
        from wse_platform.ncp.validate import main as validate_main
        return validate_main([str(p) for p in args.paths])
    print(f"error: unknown kind {args.kind}", file=sys.stderr)
    return 2


def cmd_ncp_play(args) -> int:
    from wse_platform.ncp.play import main as play_main
    return play_main(_settings(args), args.spec, args.as_, narrator_model=args.narrator, session=args.session)


def cmd_demo(args) -> int:
    from wse_platform import demo  # quick and --full scales, the closing "what next"
    return demo.main(args, cmd_materialize, _full_status)


def cmd_doctor(args) -> int:
    from wse_platform.doctor import run_doctor
    return run_doctor(_settings(args), move_broken_cache=args.move_broken_cache, models=not args.no_models)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wse", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="config file (default: $WSE_CONFIG or ./wse.yaml)")
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("demo", help="materialize everything at demo scale and show results")
    p.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache")
    p.add_argument("--full", action="store_true",
                   help="the larger demo (wse.yaml + defaults/demo-full.yaml, own warehouse under .wse/demo-full)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("materialize", help="materialize assets (all partitions unless --partition/--stale)")
    p.add_argument("--select", nargs="*", help="asset names or globs, or group:<name>")
    p.add_argument("--partition", nargs="*", help="partition keys, e.g. 'B1|smollm2'")
    p.add_argument("--stale", action="store_true", help="only stale or missing partitions")
    p.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache")
    p.add_argument("--parallel", type=int, metavar="N",
                   help="runs (cells) at once; default 1 with in-process models, else the run queue's limit")
    p.set_defaults(func=cmd_materialize)

    p = sub.add_parser("status", help="list stale and missing cells with causes")
    p.add_argument("--all", action="store_true", help="also list fresh ones")
    p.add_argument("--full", action="store_true",
                   help="ask Dagster about every asset again, ignoring the saved report and results")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("sql", help="read-only SQL against the warehouse")
    p.add_argument("query", help="exactly one read-only statement (SELECT, WITH, SHOW, DESCRIBE, ...)")
    p.add_argument("--format", "-f", choices=["table", "csv", "json", "markdown", "vertical"], default="table",
                   help="table (DuckDB's box rendering, fitted to the terminal), csv, json, markdown, "
                        "vertical (one field per line)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the whole result to FILE instead of the terminal")
    p.add_argument("--limit", type=int, default=None,
                   help="rows to show (default: 40 on the terminal for table/vertical, all otherwise)")
    p.add_argument("--width", type=int, default=None, help="table width in characters (default: the terminal's)")
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("doctor", help="check the environment and every configured model; say what to fix")
    p.add_argument("--no-models", action="store_true", help="skip the one tiny request per configured model")
    p.add_argument("--move-broken-cache", action="store_true",
                   help="move an unreadable LLM response cache aside (a new one is created)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("ncp", help="NCP-Bench tools: `wse ncp play --spec movie52 --as narrator|player`")
    ncp_sub = p.add_subparsers(dest="ncp_cmd", required=True)
    pp = ncp_sub.add_parser("play", help="play an episode in the terminal as the narrator (Table 5) or the player")
    pp.add_argument("--spec", required=True, help="spec id, e.g. movie52")
    pp.add_argument("--as", dest="as_", required=True, choices=["narrator", "player"])
    pp.add_argument("--narrator", default=None, help="narrator model when playing the player (default: first of "
                                                     "ncp.narrators)")
    pp.add_argument("--session", default=None, help="session name (default <spec>-<role>; rerun to resume)")
    pp.set_defaults(func=cmd_ncp_play)

    p = sub.add_parser("validate", help="validate input files")
    p.add_argument("kind", choices=["ncp-spec"])
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)

    args = parser.parse_args(argv)
    from wse_platform.errors import ActionableError
    try:
        return int(args.func(args) or 0)
    except ActionableError as err:  # a broken instance or warehouse file: the message names it and the fix
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
