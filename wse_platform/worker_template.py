"""The template the worker processes of `wse materialize --parallel` are forked from.

`workers.start_template` starts multiprocessing's fork server with this module preloaded and the
command's definitions loader in `$WSE_WORKER_TEMPLATE` (JSON: token, "module:function", args, the
command's `--select` patterns). On
import in the fork server this module imports Dagster, creates the instance on a fresh Dagster home
(`make_instance`), builds those definitions, makes the jobs of the cell runs the command plans
(`warm_selections`), opens the instance (`keep_instance`) and warms what a run imports later (the LLM
path, DuckDB, matplotlib's Agg backend), once; every worker process is then a fork of it: it costs no
imports, no definitions build and no instance opening (`workers.init_worker` takes `DEFS` and `INSTANCE`).

Fork safety: nothing here keeps a file of the instance or the warehouse open, or starts a thread (the
kept instance's storages connect per use; `keep_instance` closes the event log's kept connections);
`check_fork_safe` says so or names what is open.
Any failure leaves `DEFS` empty (a worker then builds its own definitions, as a spawned one does)
and is kept in `ERROR` -- the fork server must not die of it.
"""
from __future__ import annotations

import json
import os

ENV = "WSE_WORKER_TEMPLATE"
DEFS: dict = {}          # (token, target, args as JSON) -> Definitions
INSTANCE: list = []      # [(Dagster home, its dagster.yaml's text, the instance opened on them)] (`keep_instance`)
ERROR: list[str] = []
BUILT_BY: list[int] = []  # the pid of the process that built DEFS (tests: not the worker's)

# modules a cell run or a table run imports after the definitions (each worker would import them again)
WARM = ("wse_platform.runner", "wse_platform.run_guard", "wse_platform.llm.client",
        "wse_platform.warehouse", "duckdb", "aiohttp", "matplotlib.pyplot", "upath",
        # and before a cell's first request (issue 24, measured in a fork of the template: ~0.06 CPU s per worker):
        # DuckDB's results as Arrow, the OpenAI-compatible backend, the planned requests (progress.TAG)
        "pyarrow", "wse_platform.llm.backends.openai_http", "wse_platform.plan")   # (Dagster's own: dagster_private)


def key(token: str, target: str, args) -> tuple:
    return token, target, json.dumps(list(args), default=str)


def build(spec: str) -> None:
    """Build the definitions `spec` names (JSON: token, target, args) and warm the run's imports."""
    import importlib
    token, target, args, *rest = json.loads(spec)
    select = rest[0] if rest else None
    # first, before the definitions' modules: the command opens the instance once it has built its definitions
    # and waits for the lock while this process creates it (issue 24: ~0.25 s before its first run, idle cores)
    make_instance(target, args)
    module, func = target.split(":")
    loader = getattr(importlib.import_module(module), func)
    defs = loader(*args)
    warm_selections(defs, select)
    keep_instance(target, args)
    import matplotlib
    matplotlib.use("Agg")
    from wse_platform.dagster_private import WORKER_WARM_MODULES
    for name in WORKER_WARM_MODULES + WARM:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - warming only: the run imports what it needs
            pass
    _draw()
    problem = check_fork_safe()
    if problem:
        raise RuntimeError(problem)
    DEFS[key(token, target, args)] = defs
    BUILT_BY.append(os.getpid())


def make_instance(target: str, args) -> bool:
    """Create the Dagster instance at $DAGSTER_HOME when the home has none yet (a first command), here, while
    the command builds its definitions (`cli._materialize` opens the instance after them): the storages'
    tables are made on this core instead of the command's (~0.7 s of CPU before the first run). Under
    `runner.get_instance`'s lock, as the command would; everything closed again (fork safety, `check_fork_safe`).
    True when made; any failure is left to the command, which opens or creates the instance itself and
    says what is wrong."""
    if target != "wse_platform.definitions:build_definitions" or not os.environ.get("DAGSTER_HOME"):
        return False
    from pathlib import Path
    home = Path(os.environ["DAGSTER_HOME"])
    if (home / "history" / "runs.db").exists():
        return False   # an instance is there: the command opens it (and migrates it if need be)
    try:
        from resources import settings_for
        from wse_platform.dagster_private import release_event_log_connections
        from wse_platform.runner import get_instance
        settings = settings_for(args[0] if args else None)
        if Path(settings.dagster_home).resolve() != home.resolve():
            return False
        instance = get_instance(settings)
        instance.dispose()
        release_event_log_connections()
        return True
    except Exception:  # noqa: BLE001 - the command's own get_instance reports it
        return False


def warm_selections(defs, select: list[str] | None) -> int:
    """Make the jobs of the partitioned runs (the cells) that `wse materialize --select <select>` plans, and
    their snapshots (`dagster_private.warm_selection`): each worker's runs then take them from here instead
    of making them again (~0.2-0.3 s of CPU per cell run, issue 24). A selection the command plans otherwise
    (e.g. `--stale` leaving out a cell's fresh assets) is made in the worker, as before. Returns how many."""
    import contextlib
    import io

    from wse_platform.dagster_private import warm_selection
    from wse_platform.runner import plan, select_keys

    try:
        with contextlib.redirect_stderr(io.StringIO()):   # its notes are the command's to print
            keys = select_keys(defs, select)
    except SystemExit:   # matches nothing: the command says so
        return 0
    job = defs.resolve_implicit_global_asset_job_def()
    selections = {frozenset(st.keys) for st in plan(defs, keys, {k: None for k in keys}) if st.partition_key}
    for chosen in sorted(selections, key=lambda s: sorted(k.to_user_string() for k in s)):
        warm_selection(job, sorted(chosen, key=lambda k: k.to_user_string()))
    return len(selections)


def keep_instance(target: str, args) -> bool:
    """Open the Dagster instance at $DAGSTER_HOME here, once, for every worker forked from this template
    (`kept_instance`) instead of in each worker (~0.3-0.6 s of CPU each: the storages' configuration, their
    alembic revision checks, imports). Opened as the command opens it (`runner.get_instance`: under its lock,
    created or migrated if need be) and holding nothing open afterwards (`check_fork_safe`): its storages
    connect per use (the event log's kept connections are closed here). True when kept."""
    INSTANCE.clear()
    if target != "wse_platform.definitions:build_definitions" or not os.environ.get("DAGSTER_HOME"):
        return False
    from pathlib import Path
    home = Path(os.environ["DAGSTER_HOME"])
    try:
        from resources import settings_for
        from wse_platform.dagster_private import release_event_log_connections
        from wse_platform.runner import get_instance, user_managed
        settings = settings_for(args[0] if args else None)
        if Path(settings.dagster_home).resolve() != home.resolve() or user_managed(home / "dagster.yaml"):
            return False   # the user's own storages (Postgres: pooled sockets) are not shared by forks
        instance = get_instance(settings)
        release_event_log_connections()
        if any(f.startswith(str(home.resolve()) + os.sep) for f in _open_files()):   # not for forks: the workers open their own
            instance.dispose()
            release_event_log_connections()
            return False
        INSTANCE.append((str(home.resolve()), (home / "dagster.yaml").read_text(), instance))
        return True
    except Exception:  # noqa: BLE001 - each worker opens the instance itself, as before
        return False


def kept_instance(home: str):
    """The instance `keep_instance` opened, if it is the one at `home` with the same `dagster.yaml` (what
    `DagsterInstance.get()` would open now), else None (the worker opens its own)."""
    if not INSTANCE:
        return None
    where, text, instance = INSTANCE[0]
    from pathlib import Path
    try:
        same = Path(home).resolve() == Path(where) and (Path(home) / "dagster.yaml").read_text() == text
    except OSError:
        return None
    return instance if same else None


def _draw() -> None:
    """One small figure with text to PNG: the font list, the default font and the Agg renderer are loaded
    once here instead of in the first plot of every table run (~0.4 s of CPU each)."""
    import io

    from wse_platform.plotting import new_figure
    fig = new_figure(figsize=(2, 1))
    ax = fig.subplots()
    ax.imshow([[0.0, 1.0]], cmap="viridis")
    ax.set_title("warm-up")
    fig.colorbar(ax.images[0], ax=ax)
    fig.savefig(io.BytesIO(), format="png", dpi=50, bbox_inches="tight")


def check_fork_safe() -> str | None:
    """None, or what a fork of this process would carry that it must not: a thread, an open database file, an
    endpoint slot file (`llm/limiter.py`: a forked descriptor would share the parent's flock)."""
    import threading
    problems = []
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if threads:
        problems.append(f"threads running in the template: {threads}")
    open_files = [f for f in _open_files()
                  if f.endswith((".db", ".duckdb", ".db-wal", ".sqlite", ".lock")) or "wse-platform-slots" in f]
    if open_files:
        problems.append(f"database files open in the template: {open_files}")
    return "; ".join(problems) or None


def _open_files() -> list[str]:
    """The paths this process holds open (Linux; elsewhere none are known)."""
    out = []
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return out


if os.environ.get(ENV):
    import atexit

    from wse_platform.procs import exit_without_teardown
    # in the fork server only (its forks end with os._exit, as multiprocessing's do): when the command that
    # started it ends (`multiprocessing.forkserver` raises SystemExit), no teardown of what it preloaded
    # (~1 s of CPU after the command's last line, with the command's output pipe still open: `wse ... | tee`
    # and `bench/fleet.py` waited for it); it holds no open file and no thread (`check_fork_safe`)
    atexit.register(exit_without_teardown)
    try:
        build(os.environ[ENV])
    except Exception as err:  # noqa: BLE001 - never kill the fork server: workers then build their own
        ERROR.append(f"{type(err).__name__}: {err}")
        INSTANCE.clear()   # (nor open their own instance from a template that failed its checks)
