"""`bench/ncp_replay.py` keeps scripting valid auditor outputs for the current NCP audit schemas
(it broke silently once: every replayed episode ended INVALID at the first fact update)."""
from __future__ import annotations

import importlib.util
import json

from tests.conftest import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("ncp_replay_bench", REPO / "bench" / "ncp_replay.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_replay_audits_every_turn_without_invalid_outputs(tmp_path):
    out = tmp_path / "fig.json"
    assert _bench().main(["--specs", "2", "--turns", "5", "--cache-dir", str(tmp_path / "c"),
                          "--json", str(out)]) == 0
    fig = json.loads(out.read_text())
    for p in ("cold", "warm"):
        assert fig[p]["turns_audited"] == 10
        assert fig[p]["terminations"] == ["SURVIVAL"]
        assert fig[p]["requests"] == fig[p]["call_attempts"]  # no retried (invalid) output
    assert fig["warm"]["backend_calls"] == 0 and fig["warm"]["cache_hit_share"] == 1.0
