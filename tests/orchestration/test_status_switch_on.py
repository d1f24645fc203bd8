"""A graph switch turned on to a graph no kept full check had (the NCP ablation turned on for the first
time), and the 100-Endings rubric turned off, replayed without Dagster (`status_switch.switch_on`,
`DROPPED`; issue 21: the first `wse status` after an edit ≤ 2 s): the graph transform is the graph the
definitions build, and the replayed report is what the full check (`wse status --full`) prints. On the
old code both edits were checked in full (`_replayed` fails if the full check runs)."""
from __future__ import annotations

import copy
import json

from tests.orchestration._tiny import MODEL, edit_config
from tests.orchestration.test_status_replay import _replayed, _report, _status
from tests.orchestration.test_status_switch import _graph
from wse_platform import cli, status_replay, status_switch
from wse_platform.config import load_settings, settings_from_dict
from wse_platform.status_reshape import families

ABLATION = {"narrator": MODEL, "auditors": [{"model": MODEL}]}


def _no_code(graph: dict) -> dict:
    return {name: sig[:3] + [None] + sig[4:] for name, sig in graph.items()}


def test_a_switch_turned_on_gives_the_graph_the_definitions_build(tmp_path):
    """`graph_with` on the graph built with a switch off equals the definitions built with it on
    (assets, kinds, partitions, parents; code versions are not known without the definitions) and
    Dagster's topological order; `ADDED` names what each switch adds."""
    shipped = load_settings(str(cli.Path(__file__).resolve().parents[2] / "wse.yaml"))
    raw = json.loads(shipped.model_dump_json())
    raw["ncp"]["ablation"] = ABLATION
    raw["endings"]["rubric"] = {"model": MODEL}
    on, order = _graph(tmp_path, raw, "on.yaml")
    fams = families(settings_from_dict(copy.deepcopy(raw), shipped.source_file))
    paths = {"wse.consistency_judges": ("wse", "consistency_judges"), "wse.richness_judges": ("wse", "richness_judges"),
             "ncp.ablation": ("ncp", "ablation"), "endings.rubric": ("endings", "rubric")}
    assert set(paths) == set(status_switch.ADDED) == set(status_switch.SWITCHED)
    for switch, (section, key) in paths.items():
        assert sorted(status_switch.ADDED[switch][1]) == sorted(status_switch.SWITCHED[switch])
        edited = copy.deepcopy(raw)
        edited[section][key] = None
        off, _ = _graph(tmp_path, edited, f"{key}.yaml")
        if switch in ("wse.consistency_judges", "wse.richness_judges"):  # their readers keep a stub
            assert any(off[k] == status_switch.STUB for k in status_switch.SWITCHED[switch])
        mine = status_switch.graph_with(off, [switch], fams)
        assert _no_code(mine) == _no_code(on), switch
        assert status_switch.toposorted(mine) == order, switch


def test_the_ablation_turned_on_the_first_time_is_replayed_as_the_full_check_reports_it(tiny, capsys, monkeypatch):
    # an NCP narrator (its cells never built) and a full check: the ablation's assets were never in a graph
    edit_config(tiny, lambda raw: raw["ncp"].update(narrators=[MODEL]))
    assert "missing    ncp_episodes[" in _status(capsys, "--full")
    edit_config(tiny, lambda raw: raw["ncp"].update(ablation=ABLATION))
    replayed = _replayed(capsys, monkeypatch, "--all")  # main: the full check
    assert "missing    ncp_ablation_episodes\n" in replayed and "missing    ncp_auditor_ablation\n" in replayed
    assert "fresh      wse_cell_metrics" in replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)
    # and a setting edited at the same time
    edit_config(tiny, lambda raw: (raw["ncp"].update(ablation=None), raw["wse"].update(horizon=2)))
    _status(capsys, "--full")
    edit_config(tiny, lambda raw: raw["ncp"].update(ablation=ABLATION))
    replayed = _replayed(capsys, monkeypatch)
    assert "horizon: 1 → 2" in replayed and "missing    ncp_ablation_turns\n" in replayed
    assert _report(_status(capsys, "--full")) == _report(replayed)


def test_an_added_asset_built_before_means_the_full_check(tiny, capsys, monkeypatch):
    from dagster import AssetMaterialization, DagsterInstance

    edit_config(tiny, lambda raw: raw["ncp"].update(narrators=[MODEL]))
    _status(capsys)  # (the first call points the copy's `dagster.yaml` at the copy)
    with DagsterInstance.get() as instance:  # the ablation's episodes built once, long ago
        instance.report_runless_asset_event(AssetMaterialization("ncp_ablation_episodes"))
    _status(capsys, "--full")
    edit_config(tiny, lambda raw: raw["ncp"].update(ablation=ABLATION))
    assert status_replay.replay(load_settings(str(tiny))) is None  # the full check says
    # the switch on and back off (no run since): replayed again
    edit_config(tiny, lambda raw: raw["ncp"].update(ablation=None))
    assert status_replay.replay(load_settings(str(tiny))) is not None


def _built_with_provenance(name: str, code_version: str, inputs: dict[str, str]) -> None:
    """A runless materialization of `name` whose provenance (Dagster's tags, as a run writes them)
    names `inputs` (asset -> data version)."""
    from dagster import AssetMaterialization, DagsterInstance

    tags = {"dagster/code_version": code_version, "dagster/data_version": f"{name}-v1"}
    for parent, version in inputs.items():
        tags[f"dagster/input_data_version/{parent}"] = version
        tags[f"dagster/input_event_pointer/{parent}"] = "1"
    with DagsterInstance.get() as instance:
        instance.report_runless_asset_event(AssetMaterialization(name, tags=tags))


def test_the_rubric_turned_off_is_replayed_with_the_removed_dependency(tiny, capsys, monkeypatch):
    """The rubric's readers drop the edge (no stub): a built table whose provenance names the rubric
    scores gets Dagster's `removed dependency` cause, one that does not name them none."""
    edit_config(tiny, lambda raw: raw["endings"].update(forecaster=MODEL, judge=MODEL, generators=[MODEL],
                                                        pipelines=["vanilla"], rubric={"model": MODEL}))
    _status(capsys)  # (the first call points the copy's `dagster.yaml` at the copy)
    graph = json.loads((load_settings(str(tiny)).dagster_home / status_replay.FACTS_FILE).read_text())["graph"]
    _built_with_provenance("endings_corpus_summary", graph["endings_corpus_summary"][3],
                           {"endings_positions": "p", "endings_stories": "s", "endings_rubric_scores": "r"})
    _built_with_provenance("endings_pipeline_effect", graph["endings_pipeline_effect"][3],
                           {"endings_story_tension": "t"})
    assert "incomplete endings_corpus_summary" in _status(capsys, "--full")
    edit_config(tiny, lambda raw: raw["endings"].update(rubric=None))
    replayed = _replayed(capsys, monkeypatch, "--all")  # main: the full check
    assert "stale      endings_corpus_summary\n" \
           "           - endings_rubric_scores: removed dependency on endings_rubric_scores" in replayed, replayed
    assert "endings_pipeline_effect\n           - endings_rubric_scores" not in replayed
    assert "endings_rubric_criteria" not in replayed and "endings_rubric_scores[" not in replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)


def _fresh(tmp_path, monkeypatch):
    """The tiny config on a Dagster home where nothing was built (a warehouse file exists)."""
    from tests.orchestration._tiny import PATH_VARS, tiny_config

    cfg = tiny_config(tmp_path)
    for k in PATH_VARS:
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("WSE_CONFIG", str(cfg))
    return cfg


def _warehouse_and_graph(cfg) -> dict:
    import duckdb
    with duckdb.connect(str(load_settings(str(cfg)).warehouse)) as con:  # (a warehouse file, as after runs)
        con.execute("CREATE TABLE IF NOT EXISTS placeholder (x INTEGER)")
    return json.loads((load_settings(str(cfg)).dagster_home / status_replay.FACTS_FILE).read_text())["graph"]


def test_the_rubric_turned_on_the_first_time_is_replayed_as_the_full_check_reports_it(tmp_path, capsys, monkeypatch):
    """Its readers gain an edge to the (never built) rubric scores: a built one whose provenance does
    not name them gets Dagster's "has a new dependency on" cause per set, and the rubric configuration
    as a new source."""
    cfg = _fresh(tmp_path, monkeypatch)
    edit_config(cfg, lambda raw: raw["endings"].update(forecaster=MODEL, judge=MODEL, generators=[MODEL],
                                                       pipelines=["vanilla", "beats"]))
    _status(capsys)
    graph = _warehouse_and_graph(cfg)
    _built_with_provenance("endings_corpus_summary", graph["endings_corpus_summary"][3],
                           {p: "v" for p in graph["endings_corpus_summary"][5]})
    _built_with_provenance("endings_pipeline_effect", "an older code version",
                           {p: "v" for p in graph["endings_pipeline_effect"][5]})
    # a table reading `llm_calls`, which lists the rubric scores once on: the rubric configuration becomes
    # one of its sources (the edits recorded on it since the table was built are saved for that)
    _built_with_provenance("llm_usage", graph["llm_usage"][3], {p: "v" for p in graph["llm_usage"][5]})
    _status(capsys, "--full")
    edit_config(cfg, lambda raw: raw["endings"].update(rubric={"model": MODEL}))
    replayed = _replayed(capsys, monkeypatch, "--all")  # main: the full check
    cause = "endings_rubric_scores[gen:smollm2:beats]: has a new dependency on endings_rubric_scores"
    assert replayed.count(cause) == 2 and "missing    endings_rubric_criteria\n" in replayed, replayed
    assert "stale      llm_usage\n" in replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)


def test_a_judge_turned_on_the_first_time_is_replayed_as_the_full_check_reports_it(tmp_path, capsys, monkeypatch):
    """The richness judge off from the start (its verdicts never built), tables built reading the stub
    of them: turned on, the verdicts are missing in every cell and a table whose provenance does not name
    them gets Dagster's "has a new dependency on" cause per cell (the stub's causes gone), one whose
    provenance names them none; as the full check says."""
    cfg = _fresh(tmp_path, monkeypatch)
    judge = load_settings(str(cfg)).wse.richness_judge.model_dump()
    edit_config(cfg, lambda raw: raw["wse"].update(richness_judge=None))
    _status(capsys)  # the config versions recorded, nothing built
    graph = _warehouse_and_graph(cfg)
    readers = sorted(n for n, sig in graph.items() if "wse_richness_verdicts" in sig[5] and sig[0])
    assert len(readers) >= 2 and graph["wse_richness_verdicts"] == status_switch.STUB
    for i, name in enumerate(readers):  # the first names the stub in its provenance, the others do not
        inputs = {p: "v" for p in graph[name][5] if p != "wse_richness_verdicts" or i == 0}
        _built_with_provenance(name, graph[name][3], inputs)
    _status(capsys, "--full")
    edit_config(cfg, lambda raw: raw["wse"].update(richness_judge=judge))
    replayed = _replayed(capsys, monkeypatch, "--all")  # main: the full check
    cause = "wse_richness_verdicts[B1|smollm2]: has a new dependency on wse_richness_verdicts"
    assert "missing    wse_richness_verdicts[B1|smollm2]" in replayed and f"- {cause}" in replayed
    assert replayed.count(cause) == len(readers) - 1, replayed
    assert _report(_status(capsys, "--full", "--all")) == _report(replayed)
