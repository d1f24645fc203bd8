"""`wse` — the command line: demo, materialize, status, sql, ui, validate.

    wse demo [--full]                materialize everything at (quick or full) demo scale, show results
    wse materialize [--select K ...] [--partition P ...] [--stale] [--no-cache]
    wse status [--all]               stale and missing cells with their causes
    wse sql "SELECT ..." [--format table|csv|json|markdown|vertical] [-o FILE]   one read-only query
    wse ui                           the Dagster UI on 127.0.0.1, behind a guard (local Host, same origin)
    wse validate ncp-spec PATH ...   check NCP-Bench spec files
    wse ncp play --spec ID --as narrator|player   play an NCP-Bench episode in the terminal (resumable)
    wse doctor [--no-models]         check Python, llama.cpp, paths, cache, keys and every model
"""
from __future__ import annotations

import argparse
import os
import subprocess  # noqa: F401 - tests patch `cli.subprocess.Popen` (the `dagster dev` that `wse ui` starts)
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message=".*is currently in (beta|preview).*")


def _settings(args):
    from wse_platform import config_snapshot  # read once: every run of this command uses this version
    from wse_platform.config import ConfigError
    try:
        return config_snapshot.load(args.config)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def _defs(args):
    from wse_platform.definitions import build_definitions
    return build_definitions(args.config, no_cache=getattr(args, "no_cache", False))


def _defs_loader(args) -> tuple:
    """How a worker process of `wse materialize --parallel` rebuilds `_defs(args)`."""
    return "wse_platform.definitions:build_definitions", (args.config, getattr(args, "no_cache", False))


def cmd_materialize(args) -> int:
    from wse_platform.parallel_runs import release
    try:
        return _materialize(args)
    finally:
        release()   # worker processes started ahead of the plan and never used (nothing to do, an error)


def _materialize(args) -> int:
    settings = _settings(args)
    if args.config:
        os.environ["WSE_CONFIG"] = str(Path(args.config).resolve())
    from wse_platform.parallel_runs import prestart   # the workers' template loads while we import and plan
    shared = prestart(settings, getattr(args, "parallel", None), _defs_loader(args), select=args.select)
    from wse_platform.runner import execute, get_instance, observe_sources, plan, select_keys, warehouse_problem
    defs = _defs(args)   # first: meanwhile the workers' template creates a fresh instance (worker_template.make_instance)
    instance = get_instance(settings)
    graph = defs.resolve_asset_graph()
    keys = select_keys(defs, args.select)
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
        _leave_status(args, settings, defs, instance)
        return 0
    steps = plan(defs, keys, partitions)
    from wse_platform import config_snapshot
    from wse_platform.parallel_runs import default_parallel, default_spare, execute_parallel
    from wse_platform.run_guard import RunGuard
    tags = {"wse/cli": "materialize", "wse/stale": str(args.stale).lower()}
    guard = RunGuard(defs, config_changed=config_snapshot.changed, instance=instance)
    parallel = getattr(args, "parallel", None) or default_parallel(settings)
    from wse_platform.run_split import default_ways, defer_unneeded, split_independent
    if parallel > 1:   # the final tables side by side, what the cells do not read beside them
        steps = split_independent(defs, defer_unneeded(defs, steps), default_ways(parallel))
    from wse_platform.progress import CommandProgress
    progress = CommandProgress(settings, steps, parallel + default_spare(parallel), defs,  # requests done / planned, ETA
                               shared=shared)   # totals from the plan `prestart` made (parallel_runs.command_plan)
    try:
        report = (execute_parallel(defs, steps, instance, settings, parallel, _defs_loader(args), tags=tags,
                                   guard=guard, progress_args=progress.worker_args())
                  if parallel > 1 else execute(defs, steps, instance, tags=tags, guard=guard))
    except BaseException:
        progress.finish("stopped")
        raise
    progress.finish("done" if report.ok and len(report.steps) == len(steps) else "stopped")
    dt = time.perf_counter() - t0
    failed = [s for s, ok, _ in report.steps if not ok]
    print(f"{len(report.steps) - len(failed)}/{len(report.steps)} runs succeeded in {dt:.1f}s")
    if report.interrupted_by:
        return 130
    _leave_status(args, settings, defs, instance)
    if report.stopped_by or report.first_failure:  # the closing line says the cause (run_guard)
        print(f"error: {report.stopped_by or report.first_failure}", file=sys.stderr)
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
    from wse_platform.scale import scale_note
    note = scale_note(settings)
    if note:  # a run below its profile's scale says so first, and which keys make it so
        print(note)
    key = None if args.full else status_report.quick_key(settings, flags={"all": args.all})
    cached = status_report.cached_report(settings, key)
    if cached is not None:
        text, at = cached
        print(text, end="")
        print(f"(nothing changed since the full check of {at}; `wse status --full` checks again)")
        return 0
    if not args.full:  # a config edit since the last full check: replayed on its facts, without Dagster
        from wse_platform.status_replay import replay_report
        if replay_report(settings, key, flags={"all": args.all}):
            return 0
    return _full_status(args, settings)


def _leave_status(args, settings, defs, instance) -> None:
    """At the end of `wse materialize`: the full status check, silently, so the next `wse status`
    prints its report or replays a config edit on its facts without Dagster (issue 21)."""
    import contextlib
    import io
    if getattr(args, "no_status", False):
        return

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            _full_status(argparse.Namespace(**{**vars(args), "all": False, "full": False}), settings, defs, instance)
    except Exception as err:  # never fails the command: the next `wse status` computes in full
        print(f"note: the status was not saved for `wse status` ({type(err).__name__}: {err})", file=sys.stderr)


def settle() -> None:
    """Close the connections this process keeps to the instance's files (the runs' holders of
    `instance_sqlite`, the event log storage's engines): the status keys then stamp the files as the
    next process finds them (a held connection closing at exit would checkpoint the WAL after the stamp).
    New connections are made by the next query."""
    from wse_platform import instance_sqlite
    from wse_platform.dagster_private import release_event_log_connections
    instance_sqlite.release()
    release_event_log_connections()


def _full_status(args, settings, defs=None, instance=None) -> int:
    from wse_platform import status_report
    from wse_platform.runner import get_instance, observe_sources, warehouse_problem
    from wse_platform.status import compute_status

    instance = instance or get_instance(settings)
    defs = defs or _defs(args)
    t0 = time.perf_counter()
    problem = warehouse_problem(settings, defs, instance)
    if problem:  # the instance's records would call a truncated or deleted warehouse fresh
        print(f"error: {problem}", file=sys.stderr)
        return 2
    observe_sources(defs, instance)
    flags = {"all": args.all}
    settle()
    key = status_report.quick_key(settings, flags)  # after observing: the state this report describes
    state = status_report.quick_key(settings, with_settings=False)
    rows = compute_status(defs, instance, only_problems=False, refresh=getattr(args, "full", False))
    from wse_platform import status_replay  # what the next call needs to replay a config edit
    facts = status_replay.gather(defs.resolve_asset_graph(), instance, settings, rows)
    settle()
    status_replay.save(settings, state if state == status_report.quick_key(settings, with_settings=False) else None,
                       facts)
    from wse_platform.status_rows import report_lines
    lines = report_lines(rows, only_problems=not args.all)
    from wse_platform.llm.truncation_report import NOT_READ, truncation_lines  # one query on llm_calls
    truncation = truncation_lines(settings.warehouse)
    text = "".join(f"{line}\n" for line in lines + truncation)
    print(text, end="")
    print(f"({time.perf_counter() - t0:.1f}s)")
    settle()
    if NOT_READ not in truncation and key == status_report.quick_key(settings, flags):
        status_report.save_report(settings, key, text)  # nothing was recorded while computing it
    return 0


def cmd_view(args) -> int:
    from wse_platform.view import server  # no Dagster: read-only pages over the warehouse
    settings = _settings(args)
    return server.main(settings, args.port if args.port is not None else settings.view_port)


def cmd_plan(args) -> int:
    from wse_platform import plan  # no Dagster: reads the config, the input files and llm_calls
    return plan.main(_settings(args), latency=args.latency)


def cmd_sql(args) -> int:
    from wse_platform import sqlshell  # read-only enforcement and rendering live there
    return sqlshell.main(_settings(args), args.query, fmt=args.format, output=args.output, limit=args.limit,
                         width=args.width, timeout=args.timeout, memory=args.memory_limit)


def cmd_ui(args) -> int:
    from wse_platform import ui  # the guard in front of the webserver, the plot server, stopping on signals
    from wse_platform.runner import get_instance
    settings = _settings(args)
    get_instance(settings)  # created here, under the instance lock, not raced by dagster dev's processes
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    if settings.source_file:  # the config this command resolved (--config, $WSE_CONFIG or ./wse.yaml): the
        env["WSE_CONFIG"] = str(Path(settings.source_file).resolve())  # code location runs in the repo folder
    return ui.run(settings, args.port, env, root)


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
    return demo.main(args, cmd_materialize)  # which leaves the status check behind (`_leave_status`)


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
                   help="runs (cells) at once; default 1 with in-process models, else enough cells to fill the "
                        "endpoints' slots 3 times (at least 4, at most the run queue's limit)")
    p.add_argument("--no-status", action="store_true",
                   help="do not end with the status check that lets the next `wse status` answer at once")
    p.set_defaults(func=cmd_materialize)

    p = sub.add_parser("status", help="list stale and missing cells with causes")
    p.add_argument("--all", action="store_true", help="also list fresh ones")
    p.add_argument("--full", action="store_true",
                   help="ask Dagster about every asset again, ignoring the saved report and results")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("view", help="read trajectories, episodes and stories with their verdicts (local web page)")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: view_port, 3072)")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("plan", help="requests, tokens, cost and wall time per cell before a run")
    p.add_argument("--latency", type=float, default=None, metavar="SECONDS",
                   help="assume this many seconds per request (default: the mean latency in llm_calls)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("sql", help="read-only SQL against the warehouse")
    p.add_argument("query", help="exactly one read-only statement (SELECT, WITH, SHOW, DESCRIBE, ...)")
    p.add_argument("--format", "-f", choices=["table", "csv", "json", "markdown", "vertical"], default="table",
                   help="table (DuckDB's box rendering, fitted to the terminal), csv, json, markdown, "
                        "vertical (one field per line)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the whole result to FILE instead of the terminal")
    p.add_argument("--limit", type=int, default=None,
                   help="rows to show (default: 40 on the terminal for table/vertical, all otherwise)")
    p.add_argument("--width", type=int, default=None, help="table width in characters (default: the terminal's)")
    from wse_platform.sql_limits import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT_S, memory_limit
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"stop the query after this long (default {DEFAULT_TIMEOUT_S:g}; 0 = no limit)")
    p.add_argument("--memory-limit", type=memory_limit, default=DEFAULT_MEMORY_LIMIT, metavar="SIZE",
                   help=f"DuckDB memory limit for the query, e.g. 512MB, 8GB (default {DEFAULT_MEMORY_LIMIT})")
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
    from wse_platform.ncp.cli_commands import register as register_ncp  # reference check, import-runs
    register_ncp(ncp_sub)

    p = sub.add_parser("validate", help="validate input files")
    p.add_argument("kind", choices=["ncp-spec"])
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)

    for sp in [*sub.choices.values(), *ncp_sub.choices.values()]:  # `wse status --config X` as `wse --config X status`
        sp.add_argument("--config", default=argparse.SUPPRESS, help="config file (default: $WSE_CONFIG or ./wse.yaml)")
    args = parser.parse_args(argv)
    from wse_platform.errors import ActionableError
    from wse_platform import config_snapshot
    try:
        return int(args.func(args) or 0)
    except ActionableError as err:  # a broken instance or warehouse file: the message names it and the fix
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # the disk under the Dagster home filled or turned read-only mid-command
        from wse_platform.diskcheck import one_line
        from wse_platform.instance_health import explain_crash
        if (cause := explain_crash(err)) is None:
            raise
        print(f"error: {one_line(cause)}", file=sys.stderr)
        return 2
    finally:
        config_snapshot.release()


def entry() -> None:
    """The `wse` command: `main`, its exit handlers, and no interpreter teardown (~1 s of CPU once Dagster
    is loaded, paid after the command's last line; `wse_platform.workers` exits its processes the same way)."""
    rc = main()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    entry()
