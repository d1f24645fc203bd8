"""`wse demo`: the quick scale still builds every asset; `--full` is the earlier demo; the closing hints work."""
from __future__ import annotations

import yaml

from tests.conftest import write_config
from wse_platform import demo, sqlshell
from wse_platform.config import DEFAULT_CONFIG, load_settings
from wse_platform.sql_models import run_models
from wse_platform.warehouse import Warehouse


def test_full_demo_is_wse_yaml_plus_the_overlay_with_its_own_warehouse(tmp_path):
    base = write_config(tmp_path)
    quick = load_settings(base)
    full = load_settings(demo.full_demo_config(base))
    assert (quick.ncp.t_max, quick.endings.k, quick.endings.max_positions_per_story) == (1, 2, 1)
    assert quick.ncp.architectures == ["baseline+adversarial"] and len(full.ncp.architectures) == 3
    assert (full.ncp.t_max, full.endings.k, full.endings.max_positions_per_story) == (3, 3, 3)
    assert quick.wse.architectures == ["B1"] and full.wse.architectures == ["B1", "B2+WMEM", "B3+WMOD"]
    assert quick.endings.pipelines == ["vanilla", "beats"] and len(full.endings.pipelines) == 3
    # the full demo retries like a real configuration; the quick one makes one attempt per request
    assert (quick.models["smollm2"].max_attempts, full.models["smollm2"].max_attempts) == (1, 3)
    same_model = lambda m: m.model_dump(exclude={"max_attempts"})  # noqa: E731
    assert same_model(quick.models["smollm2"]) == same_model(full.models["smollm2"])
    # the quick demo's inputs with the shortest prompts, in both scales
    assert quick.wse.seed_ids == full.wse.seed_ids == ["dracor_hamlet-01"]
    assert quick.ncp.spec_ids == full.ncp.spec_ids == ["movie26"]
    assert full.endings.story_sampling.max_tokens == 600 and quick.endings.story_sampling.max_tokens == 300
    assert [a.count for a in full.ncp.reaudit_auditors] == [3]
    assert full.warehouse.parent.name == "demo-full" and full.warehouse != quick.warehouse
    assert full.cache_dir == quick.cache_dir  # calls the quick demo made are reused
    # nothing else differs
    overlay = yaml.safe_load(demo.FULL_OVERLAY.read_text())
    q, f = quick.model_dump(), full.model_dump()
    assert q["concurrency"] == f["concurrency"]
    for section, keys in overlay.items():
        rest = lambda d: {k: v for k, v in d[section].items() if k not in keys}  # noqa: E731
        assert rest(q) == rest(f)


def test_quick_demo_builds_the_same_assets_as_the_full_one(tmp_path):
    """Every benchmark and every final table is still in the quick demo, with partitions to run."""
    from wse_platform.definitions import build_definitions
    from wse_platform.runner import materializable

    full_cfg = demo.full_demo_config(write_config(tmp_path))
    graphs = {}
    for name, cfg in (("quick", str(DEFAULT_CONFIG)), ("full", str(full_cfg))):
        defs = build_definitions(cfg)
        graph = defs.resolve_asset_graph()
        keys = set(materializable(defs))
        empty = [k for k in keys if graph.get(k).partitions_def is not None
                 and not graph.get(k).partitions_def.get_partition_keys()]
        assert not empty, f"{name}: assets with no partition to run: {empty}"
        graphs[name] = keys
    assert graphs["quick"] == graphs["full"]
    names = {k.to_user_string() for k in graphs["quick"]}
    for table in demo.SHOWN_TABLES + ("wse_pareto", "ncp_survival", "endings_pipeline_effect"):
        assert table in names


def test_closing_hints_name_the_ui_and_three_queries_that_run(tmp_path, monkeypatch, capsys):
    base = write_config(tmp_path)
    settings = load_settings(base)
    wh = Warehouse(settings.warehouse)
    wh.ensure_schema()
    run_models(wh)  # llm_usage and the other SQL models, empty
    for _, query in demo.EXAMPLE_QUERIES:  # the printed queries bind against the real schema
        with wh.connect(read_only=True, config={"memory_limit": "1GB"}) as con:  # as `wse sql` opens it
            sqlshell.run_query(con, query)
    demo.show_results(settings, "")
    out = capsys.readouterr().out
    assert "wse ui" in out and "What next" in out
    assert sum(f'wse sql "{q}"' in out for _, q in demo.EXAMPLE_QUERIES) == 3


def test_demo_leaves_a_status_report_so_the_suggested_wse_status_answers_at_once(tmp_path, monkeypatch, capsys):
    import argparse

    base = write_config(tmp_path)
    calls = []
    monkeypatch.setattr(demo, "show_results", lambda settings, flag: None)
    args = argparse.Namespace(config=str(base), full=False, no_cache=False)
    rc = demo.main(args, materialize=lambda a: calls.append(("materialize", a.stale)) or 0,
                   status=lambda a, s: (calls.append(("status", a.all, s.source_file)), print("hidden")))
    assert rc == 0 and calls == [("materialize", True), ("status", False, str(base))]
    assert "hidden" not in capsys.readouterr().out  # primed silently
