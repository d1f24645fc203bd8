"""CPU seconds of the parts of a full `wse status` check after start-up, in one process: observing the
config sources, `compute_status` with the per-partition status cache (what changed since the last check
only), and gathering the facts a later config edit is replayed on (`status_replay.gather`). This is what
the silent check at the end of `wse materialize` costs on top of the run (issue 24 item 3).

    python bench/status_phases.py --config /tmp/status-grid/wse.yaml [--repeat 2]

Run it on a warehouse that had a `wse status` (so the status cache exists); run from another checkout
(`PYTHONPATH=<checkout> python <checkout>/bench/status_phases.py ...`) to compare code versions.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if os.environ.get("DAGSTER_HOME"):
        sys.exit("unset DAGSTER_HOME: the config's own Dagster home is measured")
    os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
    from wse_platform import status_replay
    from wse_platform.config import load_settings
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import get_instance, observe_sources
    from wse_platform.status import compute_status

    settings = load_settings(args.config)
    instance = get_instance(settings)
    defs = build_definitions(args.config)
    graph = defs.resolve_asset_graph()
    for i in range(args.repeat):
        t = time.process_time()
        observe_sources(defs, instance)
        t1 = time.process_time()
        rows = compute_status(defs, instance, only_problems=False)
        t2 = time.process_time()
        status_replay.gather(graph, instance, settings, rows)
        t3 = time.process_time()
        print(f"pass {i + 1}: observe {t1 - t:.2f} s CPU, compute_status {t2 - t1:.2f} s CPU, "
              f"gather {t3 - t2:.2f} s CPU ({len(rows)} rows); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
