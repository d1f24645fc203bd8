"""DraCor TEI parsing: the seven shipped plays, a synthetic play of another shape, bad input."""
from __future__ import annotations

import pytest

from wse_platform.config import DATA_DIR
from wse_platform.wse.tei import (
    SnapshotNotFound, SnapshotRule, TEIError, locate_snapshot, parse_tei, present_at, segment_presence,
)
from wse_platform.wse.worlds import DRACOR_PLAYS

DRACOR = DATA_DIR / "dracor"
RULES = {p.file: p.rule for p in DRACOR_PLAYS}

# file, language, acts, segments per act, min cast, must be on stage at snapshot, must not be
PLAYS = [
    ("ibsdracor/et-dukkehjem.xml", "nb", 3, [1, 1, 1], 9, {"NORA", "BARNEPIGEN"}, {"HELMER", "RANK", "FRULINDE"}),
    ("rusdracor/chekhov-djadja-vanja.xml", "ru", 4, [9, 13, 12, 13], 9,
     {"serebrjakov", "sonja", "elena_andreevna", "vojnitskij"}, {"marija_vasilevna"}),
    ("rusdracor/chekhov-tri-sestry.xml", "ru", 4, [22, 23, 21, 20], 13,
     {"Andrej", "Olga", "Irina", "Masha", "Vershinin"}, {"Natasha", "Kulygin"}),
    ("rusdracor/chekhov-vishnevyi-sad.xml", "ru", 4, [22, 10, 22, 20], 12,
     {"LjubovAndreevna", "Anja", "Varja", "Gaev"}, {"Jasha"}),
    ("shakedracor/hamlet.xml", "en", 5, [5, 2, 4, 7, 2], 30,
     {"Claudius_Ham", "Gertrude_Ham", "Hamlet_Ham", "Polonius_Ham", "Laertes_Ham"}, {"Horatio_Ham", "Ophelia_Ham"}),
    ("shakedracor/king-lear.xml", "en", 5, [5, 4, 7, 7, 3], 25,
     {"Lear_Lr", "Goneril_Lr", "Regan_Lr", "Cordelia_Lr", "Kent_Lr", "Gloucester_Lr"}, {"Fool_Lr", "Oswald_Lr"}),
    ("swedracor/strindberg-fadren.xml", "sv", 3, [9, 5, 8], 9,      # opening of Act I (paper Table 2)
     {"spRyttmästarn", "spPastorn"}, {"spLaura", "spBertha", "spDoktorÖstermark"}),
]


@pytest.fixture(scope="module")
def plays():
    return {f: parse_tei(DRACOR / f) for f, *_ in PLAYS}


@pytest.mark.parametrize("file,lang,n_acts,per_act,min_cast,on_stage,off_stage", PLAYS)
def test_shipped_play_structure_and_snapshot(plays, file, lang, n_acts, per_act, min_cast, on_stage, off_stage):
    play = plays[file]
    assert play.language == lang
    assert len(play.cast) >= min_cast
    assert play.n_acts == n_acts
    assert [len(play.segments_of_act(a)) for a in range(1, n_acts + 1)] == per_act
    assert sum(e.kind == "speech" for e in play.events) > 300
    snap = locate_snapshot(play, RULES[file])
    assert snap.segment.act == 1
    present = set(snap.present)
    assert on_stage <= present, f"missing on stage: {on_stage - present}"
    assert not (off_stage & present), f"should be off stage: {off_stage & present}"


def test_chekhov_segments_are_configurations_and_ibsen_bare_acts(plays):
    assert {s.kind for s in plays["rusdracor/chekhov-djadja-vanja.xml"].segments} == {"configuration"}
    assert {s.kind for s in plays["ibsdracor/et-dukkehjem.xml"].segments} == {"act"}
    assert {s.kind for s in plays["shakedracor/hamlet.xml"].segments} == {"scene"}


def test_hamlet_speech_without_who_is_kept(plays):
    anonymous = [e for e in plays["shakedracor/hamlet.xml"].events if e.kind == "speech" and not e.who]
    assert len(anonymous) == 1  # Hamlet 4.5: an offstage voice, no @who and no speaker label
    assert "Let her come in" in anonymous[0].text
    assert "A noise within" not in anonymous[0].text  # the inline stage direction is not speech


def test_king_lear_nested_act_div_stays_in_act_4(plays):
    lear = plays["shakedracor/king-lear.xml"]
    act4 = lear.segments_of_act(4)
    # Folger encodes IV.4 as <div type="act"> nested in act 4: it is a scene, not a sixth act
    assert [s.label for s in act4] == [f"ACT 4, Scene {i}" for i in range(1, 8)]
    assert lear.n_acts == 5


def test_swedish_non_ascii_ids_and_unprefixed_relation_refs(plays):
    fadren = plays["swedracor/strindberg-fadren.xml"]
    assert "spNöjd" in fadren.cast and "spDoktorÖstermark" in fadren.cast
    pairs = {(r.name, frozenset((r.a, r.b))) for r in fadren.relations}
    assert ("gift", frozenset({"spLaura", "spRyttmästarn"})) in pairs  # refs were "#Laura #Ryttmästarn"
    # stage @who="#Pastorn #Ryttmästarn" resolves to the sp-prefixed ids
    first = fadren.segments[0]
    assert {"spPastorn", "spRyttmästarn"} <= set(segment_presence(fadren, first))


def test_cast_descriptions_from_cast_list(plays):
    vanja = plays["rusdracor/chekhov-djadja-vanja.xml"]
    assert "врач" in vanja.cast["astrov"].description
    dollhouse = plays["ibsdracor/et-dukkehjem.xml"]
    assert "barnepige" in dollhouse.cast["BARNEPIGEN"].description
    assert dollhouse.cast["BARN"].is_group


SYNTHETIC = """<?xml version="1.0" encoding="UTF-8"?>
<TEI xmlns="http://www.tei-c.org/ns/1.0" xml:id="test000001" xml:lang="ger">
  <teiHeader>
    <fileDesc><titleStmt><title type="main">Der Prüfstein</title></titleStmt></fileDesc>
    <profileDesc><particDesc><listPerson>
      <person xml:id="anna" sex="FEMALE"><persName>Anna</persName></person>
      <person xml:id="bernd" sex="MALE"><persName>Bernd</persName></person>
      <person xml:id="cäcilie" sex="FEMALE"><persName>Cäcilie</persName></person>
      <personGrp xml:id="waechter" sex="MALE"><name>Die Wächter</name></personGrp>
      <listRelation><relation name="siblings" mutual="#anna #bernd"/></listRelation>
    </listPerson></particDesc></profileDesc>
  </teiHeader>
  <text><body>
    <div type="scene" n="1"><head>Erster Auftritt</head>
      <stage>Ein Marktplatz. Anna und Bernd.</stage>
      <sp who="#anna"><speaker>ANNA</speaker><p>Guten Morgen.</p></sp>
      <sp who="#bernd"><speaker>BERND</speaker><p>Morgen.</p><stage type="exit" who="#bernd">Geht ab.</stage></sp>
      <sp who="#anna #waechter"><speaker>ANNA und DIE WÄCHTER</speaker><p>Halt!</p></sp>
    </div>
    <div type="scene" n="2"><head>Zweiter Auftritt</head>
      <stage type="entrance" who="#cäcilie">Cäcilie tritt auf.</stage>
      <sp who="#cäcilie"><speaker>CÄCILIE</speaker><p>Wo ist Bernd?</p></sp>
      <sp who="#dora"><speaker>DORA</speaker><p>Ich bin nicht im Personenverzeichnis.</p></sp>
      <sp who="#anna"><speaker>ANNA</speaker><p>Fort.</p></sp>
    </div>
  </body></text>
</TEI>
"""


def test_synthetic_play_with_scenes_only(tmp_path):
    f = tmp_path / "pruefstein.xml"
    f.write_text(SYNTHETIC, encoding="utf-8")
    play = parse_tei(f)
    assert play.title == "Der Prüfstein" and play.language == "de"
    assert play.n_acts == 1 and [s.label for s in play.segments] == ["1, Erster Auftritt", "1, Zweiter Auftritt"]
    assert play.cast["waechter"].is_group and play.cast["waechter"].name == "Die Wächter"
    assert "dora" in play.cast and not play.cast["dora"].declared  # speaker missing from listPerson
    joint = [e for e in play.events if e.kind == "speech" and len(e.who) == 2]
    assert joint and joint[0].who == ("anna", "waechter")
    assert [(r.name, r.a, r.b) for r in play.relations] == [("siblings", "anna", "bernd")]
    # Bernd exits inside his speech; at Anna's "Halt!" Anna and the guards are on stage
    halt = joint[0].position
    assert present_at(play, play.segments[0], halt) == ("anna", "waechter")
    snap = locate_snapshot(play, SnapshotRule(act=1, after_stage_matching=r"tritt auf"))
    assert snap.segment.index == 1 and snap.present == ("cäcilie",)
    snap2 = locate_snapshot(play, SnapshotRule(act=1, segment=2, after_first_speech_of="anna"))
    assert set(snap2.present) == {"anna", "cäcilie", "dora"}


def test_snapshot_not_found_names_file(tmp_path):
    f = tmp_path / "pruefstein.xml"
    f.write_text(SYNTHETIC, encoding="utf-8")
    play = parse_tei(f)
    with pytest.raises(SnapshotNotFound, match="pruefstein.xml"):
        locate_snapshot(play, SnapshotRule(act=1, after_stage_matching=r"nie vorkommender Text"))
    with pytest.raises(SnapshotNotFound, match="act 3"):
        locate_snapshot(play, SnapshotRule(act=3, after_first_speech_of="anna"))
    with pytest.raises(ValueError):
        SnapshotRule(act=1)  # no marker


def test_malformed_xml_names_the_file(tmp_path):
    f = tmp_path / "kaputt.xml"
    f.write_text(SYNTHETIC.replace("</body>", ""), encoding="utf-8")
    with pytest.raises(TEIError, match="kaputt.xml"):
        parse_tei(f)


def test_non_tei_root_and_empty_body_rejected(tmp_path):
    f = tmp_path / "other.xml"
    f.write_text("<play><sp who='#a'/></play>", encoding="utf-8")
    with pytest.raises(TEIError, match="other.xml.*TEI namespace"):
        parse_tei(f)
    g = tmp_path / "empty.xml"
    g.write_text(SYNTHETIC.split("<text>")[0] + "<text><body><div type='act'/></body></text></TEI>", encoding="utf-8")
    with pytest.raises(TEIError, match="empty.xml"):
        parse_tei(g)


def test_names_in_stage_directions_match_the_per_name_search(plays):
    """`_mentioned`'s one pattern per cast member (names joined) finds exactly what a search per name of >= 3
    characters finds, on every stage direction of the shipped plays (the source run's speed-up, issue 24)."""
    import re

    from wse_platform.wse.tei import _mentioned

    def per_name(play, text):
        return [c.id for c in play.cast.values()
                if any(len(n) >= 3 and re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text, flags=re.IGNORECASE)
                       for n in c.names)]

    checked = 0
    for play in plays.values():
        for ev in play.events:
            if ev.kind == "stage":
                assert _mentioned(play, ev.text) == per_name(play, ev.text), (play.path, ev.text)
                checked += 1
    assert checked > 1000


def test_stage_directions_are_read_once_per_play(plays, monkeypatch):
    """`present_at` at every speech of an unsegmented act (as `worlds._on_stage_groups` calls it) reads each
    stage direction's text once, not once per speech after it (quadratic: most of the WSE source run)."""
    import re

    from wse_platform.wse import tei

    play = parse_tei(DRACOR / "ibsdracor/et-dukkehjem.xml")   # a fresh play: no results kept yet
    seg = play.segments[0]
    expected = [tei.present_at(plays["ibsdracor/et-dukkehjem.xml"], seg_, ev.position)
                for seg_ in plays["ibsdracor/et-dukkehjem.xml"].segments[:1] for ev in seg_.events if ev.kind == "speech"]
    reads: list[str] = []
    original = tei._mentioned
    monkeypatch.setattr(tei, "_mentioned", lambda p, text: reads.append(text) or original(p, text))
    got = [tei.present_at(play, seg, ev.position) for ev in seg.events if ev.kind == "speech"]
    assert got == expected
    sentences = sum(len(re.split(r"(?<=[.;!?])\s+", ev.text))
                    for ev in seg.events if ev.kind == "stage" and not ev.who)
    assert 0 < len(reads) <= sentences
