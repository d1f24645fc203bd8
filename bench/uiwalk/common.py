"""Constants and small helpers shared by the walkthrough's modules."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SENSORS = ("config_observer", "sync_status", "wse_automation")
CELL_ASSETS = ("wse_trajectories", "wse_consistency_verdicts", "wse_cell_metrics")  # whose checks tab is shown
EDIT = ("wse", "horizon", 3)
EDIT_TEXT = "horizon: 2 → 3"
IN_SYNC = "in_sync"
ACTIVE_RUN = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "MANAGED", "CANCELING"}
POLL_S = 5.0
QUIET_TICK = r"no in_sync verdict changed|no configuration or input-file change"  # ticks with nothing to say


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OVERRIDES = ("DAGSTER_HOME", "WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR")


def child_env() -> dict[str, str]:
    """This checkout's code first; no inherited instance or output overrides (the folder's own)."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["DAGSTER_DISABLE_TELEMETRY"] = "1"
    return env

