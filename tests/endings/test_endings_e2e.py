"""End to end on the embedded model (SmolLM2-135M via llama.cpp) at tiny scale, through the
Dagster assets: a human set (one short story, K = 2, three positions) from
stories to verdicts, and one generated story (vanilla pipeline, one idea)."""
from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

pytest.importorskip("llama_cpp")

from dagster import AssetChecksDefinition, AssetsDefinition, materialize  # noqa: E402

from assets.endings import forecasting, generation, stories  # noqa: E402
from assets.partitions import build_partitions  # noqa: E402
from resources import LLMResource, SettingsResource, WarehouseResource, settings_for  # noqa: E402
from wse_platform.config import REPO_ROOT  # noqa: E402
from wse_platform.warehouse import Warehouse  # noqa: E402

pytestmark = pytest.mark.slow


# A short story of our own (261 words, 14 sentences) keeps every prompt small.
STORY = """Nell kept the bakery open long after the last bus had gone, because her brother had promised to come.
The ovens ticked as they cooled, and the windows fogged over with the smell of burnt sugar and rain.
At nine a stranger in a wet grey coat knocked twice and asked whether she had any bread left at all.
She sold him the last loaf and noticed that his hands were shaking as he counted out the coins.
He said he had driven all night from the coast to find a woman who used to bake exactly this bread.
Nell told him that the recipe was her mother's, and that her mother had died three winters ago.
The stranger sat down at the small table by the door and did not touch the loaf for a long time.
Then he took a folded photograph from his pocket and slid it across the counter towards her.
It showed her mother, young and laughing, standing beside a man who looked very much like him.
Nell understood before he said a word, and she had to hold the edge of the counter to stay standing.
Her brother arrived at last, soaked and apologising, and stopped in the doorway when he saw them.
The three of them stayed until midnight, passing the photograph back and forth and saying very little.
When the stranger finally left, he promised to come back on Sunday and learn to bake the bread himself.
Nell left the light on over the door that night, the way her mother always had."""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("endings_e2e")
    corpus = tmp / "corpus"
    corpus.mkdir()
    (corpus / "bakery.txt").write_text(STORY, encoding="utf-8")
    (corpus / "corpus.yaml").write_text(yaml.safe_dump({"corpus": "tiny", "quality_tier": "test", "stories": {
        "bakery.txt": {"title": "The Last Loaf", "author": "wse-platform tests", "source": "written for this test",
                       "license": "Apache-2.0"}}}), encoding="utf-8")
    shipped = yaml.safe_load((REPO_ROOT / "wse.yaml").read_text(encoding="utf-8"))
    cfg = {
        "profile": "demo",
        "warehouse_path": str(tmp / "wh.duckdb"), "cache_dir": str(tmp / "cache"),
        "artifacts_dir": str(tmp / "artifacts"),
        "models": {"smollm2": shipped["models"]["smollm2"]},
        "endings": {
            "forecaster": "smollm2", "judge": "smollm2", "allow_same_model": True,
            "generators": ["smollm2"], "pipelines": ["vanilla"],
            "corpora": [{"name": "tiny", "path": str(corpus)}],
            "min_words": 100, "k": 2, "position_stride": 5, "max_human_stories": 1, "n_ideas": 1,
            "forecast_sampling": {"temperature": 1.2, "top_p": 0.95, "max_tokens": 80},
            "story_sampling": {"temperature": 0.7, "min_p": 0.1, "max_tokens": 200},
        },
    }
    path = tmp / "wse.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return str(path)


def _run(config_path, partition_key, names):
    s = settings_for(config_path)
    parts = build_partitions(s)
    objs = [o for m in (stories, generation, forecasting) for o in m.build(s, parts)]
    selected = [o for o in objs if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition)
                and o.is_materializable and {k.to_user_string() for k in o.keys} <= names]
    resources = {"settings": SettingsResource(config_path=config_path),
                 "warehouse": WarehouseResource(config_path=config_path),
                 "llm": LLMResource(config_path=config_path)}
    result = materialize(selected, partition_key=partition_key, resources=resources)
    assert result.success
    return Warehouse(s.warehouse)


def test_human_set_stories_to_verdicts(config):
    wh = _run(config, "human:tiny",
              {"endings_stories", "endings_positions", "endings_predictions", "endings_verdicts"})
    st = wh.query("SELECT story_id, n_words, included, same_model_judge FROM endings_stories")
    assert st.rows() == [("human:tiny/bakery", len(STORY.split()), True, True)]

    pos = wh.query("SELECT * FROM endings_positions ORDER BY position")
    # 14 sentences of >= 10 words; shares in [0.1, 0.99] keep sentences 2..13, every 5th: 2, 7, 12
    assert pos["sentence_index"].to_list() == [2, 7, 12]
    assert pos["position"].to_list() == [0, 1, 2]
    assert all(0.10 <= x <= 0.99 for x in pos["revealed_share"])
    assert pos["tokenizer"][0].startswith("embedded:SmolLM2")

    preds = wh.query("SELECT * FROM endings_predictions ORDER BY position, sample_index")
    assert preds.height == 6
    # a prediction, or (a 135M model may ramble past the token cap) a recorded failure — never both
    assert all((p is None) != (f is None) for p, f in zip(preds["prediction"], preds["failure_json"]))
    ok = preds.filter(pl.col("failure_json").is_null())
    assert all(p.strip() for p in ok["prediction"])

    v = wh.query("SELECT * FROM endings_verdicts ORDER BY position, sample_index")
    assert v.height == 6
    assert set(v.filter(pl.col("failure_json").is_null())["verdict"].to_list()) <= {"Y", "N"}
    assert v["judge_config_id"].unique().to_list() == ["endings.judge:smollm2:v1:x1"]
    assert v["same_model_judge"].all()
    calls = dict(wh.query("SELECT role, count(*) AS n FROM llm_calls GROUP BY role ORDER BY role").iter_rows())
    assert calls["endings.forecast"] >= 3                  # one n = K request per position (+ retries)
    assert calls.get("endings.judge", 0) == ok.height      # one judge call per valid prediction


def test_generated_vanilla_story(config):
    wh = _run(config, "gen:smollm2:vanilla", {"endings_stories"})
    row = wh.query("SELECT * FROM endings_stories WHERE set_key = 'gen:smollm2:vanilla'").to_dicts()
    assert len(row) == 1
    r = row[0]
    assert r["idea_id"] == "lighthouse_ledger" and r["pipeline"] == "vanilla"
    if r["included"]:
        assert len(r["text"]) >= 200 and r["n_words"] >= 100
    elif r["text"] is None:  # a recorded failure, never a silent default
        assert json.loads(r["failure_json"])["step"] == "write"
    else:                    # written, but outside the word range or not prose: kept with the reason
        assert r["exclusion_reason"].startswith(("too short", "too long", "not prose"))
    steps = json.loads(r["steps_json"])
    assert steps and all(s["step"] == "write" for s in steps)
