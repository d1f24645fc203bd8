"""Infrastructure failures never become benchmark results (issue 14, item 3), and LLM usage
reaches every LLM asset's metadata (issue 12).

Before: with `api_key_env` naming an unset variable, `wse materialize` reported success,
wrote rows whose LLM results were all failures (G = 0 in wse_cell_metrics) and the next
`--stale` run found "nothing to do". Now the asset fails, writes nothing, and stays missing,
so the next run tries again.
"""
from __future__ import annotations

import pytest
from dagster import AssetSpec, MaterializeResult, asset, materialize, multi_asset

from resources.llm import LLMResource
from tests.conftest import write_config
from tests.llm.conftest import needs_llama
from wse_platform.cli import main
from wse_platform.config import load_settings
from wse_platform.llm import LLMRequest
from wse_platform.warehouse import Warehouse

SELECT = ["endings_stories", "endings_positions", "endings_predictions"]


def test_missing_api_key_fails_the_run_writes_nothing_and_is_retried(tmp_path, config_file, monkeypatch, capsys):
    monkeypatch.delenv("WSE_DOCTOR_TEST_MISSING", raising=False)
    cfg = write_config(tmp_path, models={
        **load_settings(config_file).model_dump()["models"],
        "remote": {"backend": "litellm", "model_id": "openai/gpt-4o-mini", "api_key_env": "WSE_DOCTOR_TEST_MISSING"},
    }, endings={"forecaster": "remote", "judge": "smollm2", "k": 2, "max_human_stories": 1, "position_stride": 4,
                "max_positions_per_story": 2, "generators": []})
    args = ["--config", str(cfg), "materialize", "--select", *SELECT, "--partition", "human:public_domain"]
    assert main(args) != 0  # before: exit 0, "runs succeeded"
    wh = Warehouse(load_settings(cfg).warehouse)
    assert wh.query("SELECT count(*) AS n FROM endings_predictions")["n"][0] == 0  # no result written
    calls = wh.query("SELECT error_kind, count(*) AS n FROM llm_calls GROUP BY ALL")
    assert dict(calls.iter_rows()) == {"infrastructure": 2}  # accounted, as infrastructure (not a model failure)

    # the partition is not fresh: the next --stale run tries it again (and fails again: still no key)
    capsys.readouterr()
    assert main(["--config", str(cfg), "materialize", "--select", *SELECT, "--stale"]) != 0
    assert "nothing to do" not in capsys.readouterr().out
    assert wh.query("SELECT count(DISTINCT run_id) AS n FROM llm_calls")["n"][0] == 2


@needs_llama
def test_llm_assets_show_truncated_share_in_their_metadata(tmp_path, config_file):
    def ask(client, words: int):
        return client.complete(LLMRequest(role="test.meta", model="smollm2", sampling={"max_tokens": words},
                                          messages=[{"role": "user", "content": "Tell a long story about a cat."}]))

    @asset
    def cut_story(context, llm: LLMResource) -> MaterializeResult:
        with llm.session(context) as client:
            ask(client, 2)
        return MaterializeResult(metadata={"own": 1})

    @multi_asset(specs=[AssetSpec("part_a"), AssetSpec("part_b")])
    def two_parts(context, llm: LLMResource):
        with llm.session(context) as client:
            ask(client, 2)
        yield MaterializeResult(asset_key="part_a")
        yield MaterializeResult(asset_key="part_b")

    from wse_platform.llm.client import MAX_ATTEMPTS
    attempts = load_settings(config_file).models["smollm2"].max_attempts or MAX_ATTEMPTS
    result = materialize([cut_story, two_parts], resources={"llm": LLMResource(config_path=str(config_file))})
    assert result.success
    for node, key in (("cut_story", "cut_story"), ("two_parts", "part_a"), ("two_parts", "part_b")):
        (mat,) = [m for m in result.asset_materializations_for_node(node) if m.asset_key.to_user_string() == key]
        md = mat.metadata
        assert md["llm_truncated_share"].value == pytest.approx(1.0), md
        # one record per attempt (the shipped demo model makes one; the client default is 3)
        assert md["llm_calls"].value == attempts and f"truncated={attempts}" in md["llm_failures_by_kind"].value
    wh = Warehouse(load_settings(config_file).warehouse)
    assert wh.query("SELECT count(*) AS n FROM llm_calls WHERE error_kind = 'truncated'")["n"][0] == 2 * attempts
