"""`bench/fleet_tail.py --breakdown`: a fleet run's time after its last answer, from its run history."""
from __future__ import annotations

import json
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fleet_tail  # noqa: E402

LAST = 1_800_000_000.0   # the fleet's last answer (epoch s)


def _ts(rel: float) -> str:
    return datetime.fromtimestamp(LAST + rel, timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _history(folder: Path, runs: list[tuple[str, str | None, float, float, list[tuple[str, str, float]]]]) -> None:
    hist = folder / "dagster_home" / "history"
    (hist / "runs").mkdir(parents=True)
    con = sqlite3.connect(hist / "runs.db")
    con.execute("CREATE TABLE runs (run_id TEXT, start_time REAL, end_time REAL)")
    con.execute("CREATE TABLE run_tags (run_id TEXT, key TEXT, value TEXT)")
    for rid, part, start, end, events in runs:
        con.execute("INSERT INTO runs VALUES (?, ?, ?)", (rid, LAST + start, LAST + end))
        if part:
            con.execute("INSERT INTO run_tags VALUES (?, 'dagster/partition', ?)", (rid, part))
        ev = sqlite3.connect(hist / "runs" / f"{rid}.db")
        ev.execute("CREATE TABLE event_logs (id INTEGER PRIMARY KEY, timestamp TEXT, dagster_event_type TEXT, "
                   "step_key TEXT)")
        ev.executemany("INSERT INTO event_logs (timestamp, dagster_event_type, step_key) VALUES (?, ?, ?)",
                       [(_ts(t), kind, step) for kind, step, t in events])
        ev.commit()
        ev.close()
    con.commit()
    con.close()


def test_breakdown_places_the_last_runs_against_the_last_answer(tmp_path):
    folder = tmp_path / "wse"
    folder.mkdir()
    (folder / "sequences.jsonl").write_text(json.dumps({"a": LAST - 3, "s": LAST - 2, "e": LAST}) + "\n")
    (folder / "command.json").write_text(json.dumps({"t0": LAST - 40, "t1": LAST + 6.0}))
    _history(folder, [
        ("early", "B1|m", -30.0, -5.0, []),   # ended before the last answer: not part of the tail
        ("cell", "B2|m", -20.0, 2.0, [("STEP_START", "wse_generation", -20.0), ("STEP_SUCCESS", "wse_generation", 0.3),
                                      ("HOOK_COMPLETED", "wse_generation", 0.35),
                                      ("STEP_START", "wse_consistency_verdicts", 0.4),
                                      ("STEP_SUCCESS", "wse_consistency_verdicts", 1.5)]),
        ("tables", None, 2.2, 5.0, [("STEP_START", "wse_cell_metrics", 2.3), ("STEP_SUCCESS", "wse_cell_metrics", 3.0)]),
    ])
    text = fleet_tail.breakdown(folder)
    assert "early" not in text and "run cell" in text and "run tables" in text
    assert "wse_consistency_verdicts" in text and "1.10 s" in text and "(hook 0.05 s)" in text
    summary = json.loads(text.splitlines()[-1])
    assert summary == {"last_cell_finish_s": 2.0, "handoff_to_tables_s": 0.3, "tables_s": 2.7,
                       "after_last_run_s": 1.0, "after_last_answer_s": 6.0}
