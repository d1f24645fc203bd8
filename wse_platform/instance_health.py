"""Which file of the Dagster home ($DAGSTER_HOME) is broken, and a fix that keeps the rest.

The home holds several SQLite files with different contents. Dagster silently re-creates one
that is empty (a 0-byte `index.db` turned a built warehouse into "61 missing" without a word), and
reports a damaged one as a SQL error; and a full or read-only disk under the home reads like a
broken instance. `check_files(home)` looks at the files before Dagster opens them (0 bytes, or not
a SQLite file); `explain(home, err)` turns a failure to open the instance into its real cause:
a full or read-only disk (`diskcheck`), else the one damaged file with what it holds and the fix
for that file only (moving the whole home aside throws away healthy run history).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from wse_platform.diskcheck import diagnose

# file (relative to the home) -> what it holds, and what moving it aside costs
STORES = {
    "history/runs.db": ("the run history (which runs ran, their status and tags)",
                        "the list of past runs is lost (materialization records in history/runs/index.db stay)"),
    "history/runs/index.db": ("the index of asset materializations (what is built, and from which versions)",
                              "`wse status` then calls every asset missing: rebuild with `wse materialize` "
                              "without --stale (cached LLM answers are reused, so no new model calls are made)"),
    "schedules/schedules.db": ("the state of sensors and schedules (on/off, cursors)",
                               "sensors and schedules start from their defaults; run history and "
                               "materializations are kept"),
}
_HEADER = b"SQLite format 3\x00"


def _broken(path: Path, quick: bool) -> str | None:
    """Why a store file cannot be used, or None (`quick`: header only, no integrity check)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(_HEADER))
    except OSError as err:
        return f"cannot be read ({err})"
    if size == 0:
        return "is empty (0 bytes): truncated"
    if head != _HEADER:
        return "is not a SQLite database (overwritten or damaged)"
    if quick:
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            verdict = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        return f"is damaged ({err})"
    return None if verdict == "ok" else f"is damaged (integrity check: {verdict})"


def _message(home: Path, rel: str, problem: str) -> str:
    holds, cost = STORES[rel]
    path = home / rel
    return (f"the Dagster instance file {path} {problem}. It holds {holds}; the other files of {home}, "
            "the warehouse and the LLM cache are not affected.\n"
            f"  fix: move only this file aside (mv {path} {path}.broken) and rerun; {cost}")


def check_files(home: Path) -> str | None:
    """A store file that is empty or not SQLite while the home has a history (cheap: headers only)."""
    home = Path(home)
    # the per-run event logs (history/runs/<run id>.db): runs were recorded here
    ran = any(p.stem not in ("", "index") for p in (home / "history" / "runs").glob("*.db"))
    for rel in STORES:
        if not (home / rel).exists():
            continue
        problem = _broken(home / rel, quick=True)
        # empty in a home that has recorded runs: truncated (Dagster would re-create it silently);
        # empty before any run: a creation that was interrupted, which Dagster completes
        if problem and (ran or not problem.startswith("is empty")):
            return _message(home, rel, problem)
    return None


def explain(home: Path, err: BaseException) -> str | None:
    """The real cause of a failure to open the instance at `home`, or None when none is found."""
    home = Path(home)
    disk = diagnose(home, err, "the Dagster home", "DAGSTER_HOME", is_dir=True)
    if disk is None:
        for rel in STORES:  # a read-only or immutable store file inside a writable home
            if (home / rel).exists():
                disk = diagnose(home / rel, err, "the Dagster instance file", "DAGSTER_HOME")
                if disk:
                    break
    if disk:
        return disk
    for rel in STORES:
        if (home / rel).exists():
            problem = _broken(home / rel, quick=False)
            if problem:
                return _message(home, rel, problem)
    return None


def explain_crash(err: BaseException) -> str | None:
    """An error that escaped a command (Dagster writing its run records while the disk under
    $DAGSTER_HOME filled or turned read-only), as its cause; None when the home is not the cause."""
    import os

    home = os.environ.get("DAGSTER_HOME")
    return diagnose(Path(home), err, "the Dagster home", "DAGSTER_HOME", is_dir=True) if home else None
