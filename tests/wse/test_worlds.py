"""The nine InitialWorlds: families, languages, snapshot content, Smallville and Bianjing loaders."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from wse_platform.config import DATA_DIR
from wse_platform.wse.bianjing import BianjingDataError, build_bianjing_world
from wse_platform.wse.smallville import PersonaError, build_smallville_world
from wse_platform.wse.world import InitialWorld
from wse_platform.wse.worlds import load_initial_worlds


@pytest.fixture(scope="module")
def worlds() -> dict[str, InitialWorld]:
    return {w.world_id: w for w in load_initial_worlds()}


def test_nine_worlds_three_families(worlds):
    fams = [w.source_family for w in worlds.values()]
    assert len(worlds) == 9
    assert fams.count("dracor") == 7 and fams.count("smallville") == 1 and fams.count("itp") == 1
    langs = {w.world_id: w.language for w in worlds.values()}
    assert langs["dracor_dukkehjem"] == "nb" and langs["dracor_fadren"] == "sv"
    assert langs["dracor_hamlet"] == "en" and langs["dracor_djadja_vanja"] == "ru"
    assert langs["smallville"] == "en" and langs["itp_bianjing_1100"] == "zh"


def test_worlds_round_trip_as_json(worlds):
    for w in worlds.values():
        blob = w.model_dump_json()
        assert InitialWorld.model_validate_json(blob) == w
        json.loads(blob)  # plain JSON for the warehouse column


def test_every_world_has_content(worlds):
    for w in worlds.values():
        ids = {c.id for c in w.characters}
        assert len(w.characters) >= 7, w.world_id
        assert w.relationships and w.facts and w.locations, w.world_id
        assert set(w.focus_ids) <= ids
        for c in w.characters:
            assert c.description and c.condition and c.location, (w.world_id, c.id)


def test_hamlet_world_frozen_at_court_scene(worlds):
    w = worlds["dracor_hamlet"]
    ids = {c.id for c in w.characters}
    assert "Ophelia_Ham" not in ids  # first appears in I.3, after the snapshot
    assert {"Horatio_Ham", "Ghost_Ham"} <= ids  # appeared in I.1
    assert "Hamlet_Ham" in w.focus_ids and "Horatio_Ham" not in w.focus_ids
    pairs = {(r.a, r.b) for r in w.relationships}
    assert ("Claudius_Ham", "Gertrude_Ham") in pairs
    assert ("Barnardo_Ham", "Horatio_Ham") in pairs  # co-present in I.1
    assert ("Hamlet_Ham", "Horatio_Ham") not in pairs  # not yet met on stage
    assert w.time.label == "ACT 1, Scene 2"
    horatio = next(c for c in w.characters if c.id == "Horatio_Ham")
    assert "not in the scene" in horatio.condition and "ACT 1, Scene 1" in horatio.condition


def test_relation_markup_enters_relationships(worlds):
    vanja = worlds["dracor_djadja_vanja"]
    rel = next(r for r in vanja.relationships if (r.a, r.b) == ("elena_andreevna", "serebrjakov"))
    assert rel.kind == "tei_relation" and "spouses" in rel.description
    assert re.search("[а-я]", rel.description)  # written in the play's language
    fadren = worlds["dracor_fadren"]
    rel = next(r for r in fadren.relationships if {r.a, r.b} == {"spLaura", "spRyttmästarn"})
    assert "gift" in rel.description


def test_fadren_starts_at_the_opening_of_act_one_with_the_household_at_home(worlds):
    """Paper §4 / Table 2: "Opening of Act I, with the Captain, Laura, and Bertha at home"."""
    w = worlds["dracor_fadren"]
    assert w.time.label == "Första Akten, FÖRSTA SCENEN"
    by_id = {c.id: c for c in w.characters}
    assert {"spRyttmästarn", "spLaura", "spBertha"} <= set(by_id)
    assert "spDoktorÖstermark" not in by_id and "spNöjd" not in by_id       # they arrive later
    assert by_id["spLaura"].condition.startswith("hemma") and "närvarande" in by_id["spRyttmästarn"].condition
    rel = next(r for r in w.relationships if {r.a, r.b} == {"spBertha", "spLaura"})
    assert "dotter" in rel.description or "mor" in rel.description


def test_dollhouse_location_from_act_setting(worlds):
    w = worlds["dracor_dukkehjem"]
    nora = next(c for c in w.characters if c.id == "NORA")
    assert nora.location.startswith("En hyggeligt og smagfuldt")
    assert "til stede" in nora.condition


def test_smallville_world(worlds):
    w = worlds["smallville"]
    assert len(w.characters) == 25
    assert w.time.calendar_date == "2023-02-13" and w.time.clock == "00:00"
    by_id = {c.id: c for c in w.characters}
    assert by_id["klaus_mueller"].condition.startswith("asleep")   # bed around 11pm
    assert by_id["hailey_johnson"].condition.startswith("still awake")  # bed around 2am
    kinds = {(r.a, r.b): r.kind for r in w.relationships}
    assert kinds[("john_lin", "mei_lin")] == "text_mention"
    assert kinds[("klaus_mueller", "wolfgang_schulz")] == "shared_home"  # both in the college dorm
    assert "smallville" not in w.title.lower()  # the title shown to judges must not name the family


def test_smallville_missing_field_is_named(tmp_path):
    src = DATA_DIR / "smallville" / "personas"
    dst = tmp_path / "personas"
    shutil.copytree(src / "Klaus Mueller", dst / "Klaus Mueller")
    f = dst / "Klaus Mueller" / "scratch.json"
    data = json.loads(f.read_text())
    del data["innate"]
    f.write_text(json.dumps(data))
    with pytest.raises(PersonaError, match=r"Klaus Mueller/scratch.json.*'innate'"):
        build_smallville_world(tmp_path)


def test_bianjing_world(worlds):
    w = worlds["itp_bianjing_1100"]
    assert len(w.characters) >= 10 and len(w.relationships) >= 10 and len(w.facts) >= 5
    assert all(re.search(r"[\u4e00-\u9fff]", c.description) for c in w.characters)
    readme = (DATA_DIR / "bianjing" / "README.md").read_text(encoding="utf-8")
    assert re.search(r"our\s+own\s+construction", readme.replace("*", ""))
    assert "fictional" in readme and "licensed with this repository" in " ".join(readme.split())


def test_bianjing_bad_record_is_named(tmp_path):
    data = json.loads((DATA_DIR / "bianjing" / "world.json").read_text(encoding="utf-8"))
    data["relationships"][3]["b"] = "nobody"
    (tmp_path / "world.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(BianjingDataError, match=r"world.json: relationships\[3\]: unknown character id 'nobody'"):
        build_bianjing_world(tmp_path)
    del data["characters"][2]["condition"]
    data["relationships"][3]["b"] = "wang_yue"
    (tmp_path / "world.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(BianjingDataError, match=r"characters\[2\] \(zhao_shizhong\): missing field 'condition'"):
        build_bianjing_world(tmp_path)
