"""NarrativeSpec schema, loader and `wse validate ncp-spec` core on small hand-written specs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from wse_platform.ncp.spec import (NCP_DATASET_DIR, Commitment, NarrativeSpec, display_title, load_spec_file,
                                   load_specs)
from wse_platform.ncp.validate import main, validate_paths


def good_spec(spec_id: str = "movie77") -> dict:
    return {
        "meta": {"id": spec_id, "title": "Heist——The Return", "genres": ["Crime", "Drama"], "player_role": "Ana"},
        "synopsis": "Ana plans a heist and escapes.",
        "initial_facts": [
            {"id": "f_0", "content": "Ana is in Lisbon.", "negated": False},
            {"id": "f_1", "content": "Ana owns the vault key.", "negated": True},
        ],
        "commitments": [
            {"id": "c_0", "type": "ordering", "description": "Plan before the break-in.",
             "satisfaction_condition": "s_0 happens before s_1.", "violation_condition": "s_1 happens first."},
            {"id": "c_1", "type": "achievement", "description": "Escape at S_2.",
             "satisfaction_condition": "Ana leaves the city.", "violation_condition": "Ana is caught."},
            {"id": "c_2", "type": "invariant", "description": "The vault stays shut from s_0 through s_2.",
             "satisfaction_condition": "Nobody opens the vault early.", "violation_condition": "The vault opens."},
        ],
        "trajectory": [
            {"id": f"s_{i}", "description": d, "trigger_event": t, "key_delta": k}
            for i, (d, t, k) in enumerate([("Ana plans.", "A call comes.", "A plan exists."),
                                           ("Ana breaks in.", "The alarm fails.", "Ana is inside."),
                                           ("Ana escapes.", "A car arrives.", "Ana is free.")])
        ],
    }


def write(tmp_path: Path, data: dict, name: str = "movie77") -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return p


def problem_keys(problems) -> set[tuple[str, str]]:
    return {(p.record_id, p.field) for p in problems}


def test_valid_spec_loads_with_derived_links(tmp_path):
    spec, problems = load_spec_file(write(tmp_path, good_spec()))
    assert problems == []
    assert isinstance(spec, NarrativeSpec)
    assert spec.display_title == "Heist: The Return"
    assert spec.primary_genre == "Crime"
    # c_0 mentions s_0 and s_1; c_1 writes "S_2"; c_2 spans s_0..s_2 but only mentions both ends.
    assert spec.commitment_links() == {"c_0": ["s_0", "s_1"], "c_1": ["s_2"], "c_2": ["s_0", "s_1", "s_2"]}
    assert spec.commitments[2].node_mentions == ["s_0", "s_2"]
    assert spec.commitment_type_counts() == {"invariant": 1, "ordering": 1, "achievement": 1}
    assert spec.source_file == str(tmp_path / "movie77.yaml")


def test_missing_field_is_named(tmp_path):
    data = good_spec()
    del data["commitments"][1]["violation_condition"]
    del data["meta"]["player_role"]
    spec, problems = load_spec_file(write(tmp_path, data))
    assert spec is None
    assert problem_keys(problems) == {("c_1", "violation_condition"), ("meta", "player_role")}
    assert all(p.message == "missing required field" for p in problems)
    assert all(p.file == str(tmp_path / "movie77.yaml") for p in problems)


def test_missing_top_level_list(tmp_path):
    data = good_spec()
    del data["initial_facts"]
    _, problems = load_spec_file(write(tmp_path, data))
    assert [(p.record_id, p.field, p.message) for p in problems] == [
        ("(document)", "initial_facts", "missing required field")]


def test_bad_ids(tmp_path):
    """As the reference loader: a duplicate id is an error; an id out of sequence or of another form is
    accepted, with a warning."""
    data = good_spec()
    data["trajectory"][1]["id"] = "s_5"      # out of sequence (and s_5 does not exist: not a mention)
    data["initial_facts"][1]["id"] = "fact1"  # another form
    data["commitments"][2]["id"] = "c_0"      # duplicate
    _, problems = load_spec_file(write(tmp_path, data))
    by_key = {(p.record_id, p.field): (p.severity, p.message) for p in problems}
    assert set(by_key) == {("s_5", "id"), ("fact1", "id"), ("c_0", "id")}
    assert by_key[("s_5", "id")][0] == "warning" and by_key[("s_5", "id")][1].startswith("expected 's_1'")
    assert by_key[("fact1", "id")][0] == "warning"
    assert by_key[("c_0", "id")] == ("error", "duplicate id in commitments")


def test_the_loader_accepts_what_the_reference_loader_accepts_with_warnings(tmp_path):
    data = good_spec()
    data["initial_facts"] = [{"id": "f_0", "content": "Ana is in Lisbon."},          # no `negated`
                             {"id": "f_2", "content": "Ana owns the key.", "negated": True}]  # a pure id gap
    data["meta"]["genres"] = ["Crime"]                                                # one genre
    data["commitments"] = []                                                          # no commitments
    data["trajectory"][0]["mood"] = "tense"                                           # an extra key
    data["notes"] = "draft"
    spec, problems = load_spec_file(write(tmp_path, data))
    assert spec is not None and all(p.severity == "warning" for p in problems)
    assert {("f_0", "negated"), ("f_2", "id"), ("meta", "genres"), ("(document)", "commitments"),
            ("s_0", "mood"), ("(document)", "notes")} <= problem_keys(problems)
    assert spec.initial_facts[0].negated is False and spec.primary_genre == "Crime" and spec.commitments == []


REJECTED = [
    (lambda d: d["initial_facts"][0].update(negated="no"), ("f_0", "negated")),       # not a boolean
    (lambda d: d["commitments"][0].update(type="gate"), ("c_0", "type")),             # unknown commitment type
    (lambda d: d["trajectory"][0].update(id="s_1"), ("s_1", "id")),                  # duplicate id
    (lambda d: d["trajectory"][2].update(key_delta=" "), ("s_2", "key_delta")),      # blank text
    (lambda d: d["meta"].pop("title"), ("meta", "title")),                            # missing text
    (lambda d: d.update(commitments={"c_0": 1}), ("(document)", "commitments")),      # not a list
    (lambda d: d["meta"].update(genres=["Crime", 3]), ("meta", "genres.1")),          # not a string
    (lambda d: d["meta"].update(id="movie78"), ("meta", "id")),                       # unlike the file name
    # the one deliberate difference: a mention of a node the spec does not have
    (lambda d: d["commitments"][0].update(description="Plan at s_9."), ("c_0", "description")),
]


def test_the_loader_rejects_what_the_reference_loader_rejects_and_nothing_more(tmp_path):
    """Each change below is rejected by the reference loader, and here; a pure id gap next to it is not."""
    for change, key in REJECTED:
        data = good_spec()
        data["initial_facts"][1]["id"] = "f_5"  # a pure id gap: accepted (a warning) by both loaders
        change(data)
        spec, problems = load_spec_file(write(tmp_path, data))
        errors = {(p.record_id, p.field) for p in problems if p.severity == "error"}
        assert spec is None and key in errors and ("f_5", "id") not in errors, key


def test_unknown_type(tmp_path):
    data = good_spec()
    data["commitments"][0]["type"] = "gate"
    _, problems = load_spec_file(write(tmp_path, data))
    assert len(problems) == 1
    p = problems[0]
    assert (p.record_id, p.field) == ("c_0", "type")
    assert "invariant, ordering, achievement" in p.message and "'gate'" in p.message


def test_dangling_node_mention(tmp_path):
    data = good_spec()
    data["commitments"][1]["satisfaction_condition"] = "Ana leaves the city at s_3."
    _, problems = load_spec_file(write(tmp_path, data))
    assert [(p.record_id, p.field, p.message) for p in problems] == [
        ("c_1", "satisfaction_condition", "mentions s_3 but the trajectory has only s_0..s_2")]


def test_other_field_checks(tmp_path):
    data = good_spec()
    data["meta"]["genres"] = ["Crime"]
    data["initial_facts"][0]["negated"] = "no"       # not a bool
    data["trajectory"][2]["key_delta"] = "   "       # blank
    data["trajectory"][0]["mood"] = "tense"          # unknown field
    data["meta"]["id"] = "movie78"                    # does not match the file name
    _, problems = load_spec_file(write(tmp_path, data))
    assert problem_keys(problems) == {("meta", "genres"), ("f_0", "negated"), ("s_2", "key_delta"),
                                      ("s_0", "mood"), ("meta", "id")}


def test_invalid_yaml(tmp_path):
    p = tmp_path / "movie77.yaml"
    p.write_text("meta: [unclosed\n", encoding="utf-8")
    spec, problems = load_spec_file(p)
    assert spec is None and problem_keys(problems) == {("(document)", "(yaml)")}


def test_programmatic_construction_checks_structure():
    data = good_spec()
    data["commitments"][0]["description"] = "Plan before s_9."
    with pytest.raises(ValueError, match=r"c_0: description: mentions s_9"):
        NarrativeSpec.model_validate(data)


def test_node_span_links():
    c = Commitment(id="c_0", type="invariant", description="Hidden from s_1 to s_3, and s_5–s_6.",
                   satisfaction_condition="x", violation_condition="y")
    assert c.node_mentions == ["s_1", "s_3", "s_5", "s_6"]
    assert c.node_links == ["s_1", "s_2", "s_3", "s_5", "s_6"]


def test_display_title():
    assert display_title("Star Wars——A New Hope") == "Star Wars: A New Hope"
    assert display_title("Alien") == "Alien"


def test_load_specs_keeps_good_ones_in_index_order(tmp_path):
    (tmp_path / "specs").mkdir()
    write(tmp_path / "specs", good_spec("movie01"), "movie01")
    bad = good_spec("movie02")
    bad["commitments"][0]["type"] = "gate"
    write(tmp_path / "specs", bad, "movie02")
    write(tmp_path / "specs", good_spec("movie03"), "movie03")
    (tmp_path / "index.yaml").write_text("specs: [movie03, movie02, movie01, movie09]\n", encoding="utf-8")
    specs, problems = load_specs(tmp_path)
    assert [(s.spec_id, s.eval_order) for s in specs] == [("movie03", 0), ("movie01", 2)]
    assert {(Path(p.file).name, p.record_id, p.field) for p in problems} == {
        ("movie02.yaml", "c_0", "type"), ("index.yaml", "movie09", "specs")}


def test_released_dataset_loads_without_errors():
    specs, problems = load_specs(NCP_DATASET_DIR, include_warnings=True)
    assert [p for p in problems if p.severity == "error"] == []
    assert len(specs) == 100
    index = yaml.safe_load((NCP_DATASET_DIR / "index.yaml").read_text())["specs"]
    assert [s.spec_id for s in specs] == index
    # The released data has commitments without any s_N mention; they load, with a warning each.
    warned = {(Path(p.file).stem, p.record_id) for p in problems}
    assert ("movie42", "c_5") in warned
    for stem, cid in warned:
        spec = next(s for s in specs if s.spec_id == stem)
        assert next(c for c in spec.commitments if c.id == cid).node_mentions == []


# ---- validate CLI core -----------------------------------------------------------------------

def test_validate_main_ok(tmp_path, capsys):
    write(tmp_path, good_spec())
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""


def test_validate_main_reports_lines_and_fails(tmp_path, capsys):
    data = good_spec()
    data["commitments"][2]["type"] = "gate"
    data["commitments"][1]["description"] = "Escape at s_7."
    f = write(tmp_path, data)
    ok = write(tmp_path, copy.deepcopy(good_spec("movie11")), "movie11")
    assert main([str(f), str(ok)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert sorted(lines) == sorted([
        f"{f}: c_1: description: mentions s_7 but the trajectory has only s_0..s_2",
        f"{f}: c_2: type: must be one of invariant, ordering, achievement (got 'gate')",
    ])


def test_validate_warning_does_not_fail(tmp_path, capsys):
    data = good_spec()
    data["commitments"][1]["description"] = "Escape in the end."  # no node mention left in c_1
    f = write(tmp_path, data)
    assert main([str(f)]) == 0
    assert capsys.readouterr().out.strip() == (f"{f}: c_1: description: warning: achievement commitment "
                                               "mentions no trajectory node (no derived node link)")
    assert validate_paths([f]) == []


def test_validate_missing_path_and_usage(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main([str(missing)]) == 1
    assert capsys.readouterr().out.strip() == f"{missing}: (document): (file): no such file or directory"
    assert main([]) == 2


def test_validate_directory_with_index(tmp_path):
    (tmp_path / "specs").mkdir()
    write(tmp_path / "specs", good_spec("movie01"), "movie01")
    (tmp_path / "index.yaml").write_text("specs: [movie01, movie01, movie05]\n", encoding="utf-8")
    problems = validate_paths([tmp_path])
    assert {(p.record_id, p.field) for p in problems} == {("movie01", "specs[1]"), ("movie05", "specs")}


def test_spec_ids_select_the_run_specs_and_unknown_ids_are_named(tmp_path):
    """`ncp.spec_ids` picks exactly those specs (evaluation order kept) for episodes and extraction;
    without it a run takes the first n in evaluation order; an unknown id fails naming it."""
    from assets.ncp.specs import run_specs
    from wse_platform.config import NCPConfig
    from wse_platform.ncp.spec import NCP_DATASET_DIR, load_specs
    from wse_platform.ncp.stats import spec_rows
    from wse_platform.warehouse import Warehouse

    specs, _ = load_specs(NCP_DATASET_DIR)
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_table("ncp_specs", spec_rows(specs[:4]))
    first, third = specs[0].spec_id, specs[2].spec_id
    assert [s.spec_id for s in run_specs(wh, NCPConfig(), 2)] == [first, specs[1].spec_id]
    picked = run_specs(wh, NCPConfig(spec_ids=[third, first]), 1)
    assert [s.spec_id for s in picked] == [first, third]      # evaluation order, not list order
    with pytest.raises(ValueError, match="movie_nope"):
        run_specs(wh, NCPConfig(spec_ids=["movie_nope"]), 1)
