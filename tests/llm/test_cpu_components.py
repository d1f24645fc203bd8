"""`bench/cpu_components.py` attributes py-spy samples to components (issue 24, 256 slots): waits
are dropped, nested work is counted once under the first component that matches."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("cpu_components_bench", REPO / "bench" / "cpu_components.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_samples_go_to_the_first_matching_component_and_waits_are_dropped():
    proc = 'process 1:"python -m wse_platform.cli materialize"'
    gen = f"{proc};simulate_cell (wse_platform/wse/simulate.py:10);LLMClient._finish (wse_platform/llm/client.py:600)"
    lines = [
        f"{gen};write_call_records (wse_platform/llm/accounting.py:53) 7",   # records, though inside generation
        f"{gen} 5",
        f"{gen};Condition.wait (threading.py:331) 100",                     # a wait: dropped
        f"{proc};init_worker (wse_platform/workers.py:159);_find_and_load (<frozen>:1) 3",
        f"{proc};something_else (x.py:1) 2",
        "not a sample line",
    ]
    rows, busy, idle = _bench().attribute(lines)
    assert (busy, idle) == (17, 100)
    assert rows["LLM call records -> llm_calls (write_call_records)"] == 7
    assert rows["WSE generation step (simulate_cell, early judges, client included)"] == 5
    assert rows["worker start: imports after the fork (DagsterInstance.get -> storage modules)"] == 3
    assert rows["other"] == 2
