"""Build the nine WSE-bench InitialWorlds from the shipped source data.

DraCor plays are frozen at a snapshot point given by one declarative table
(`DRACOR_PLAYS`): act/segment plus a marker located in the TEI. Everything up to
the snapshot is the world's past: characters who have appeared, co-presence
relationships, TEI relation markup, the act's setting, the most recent stage
directions and line. Text fields are written in the play's language by small
per-language templates, so a world never mixes languages.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wse_platform.config import DATA_DIR
from wse_platform.wse.bianjing import build_bianjing_world
from wse_platform.wse.smallville import build_smallville_world
from wse_platform.wse.tei import Play, SnapshotRule, locate_snapshot, parse_tei, present_at, segment_presence
from wse_platform.wse.world import Character, Fact, InitialWorld, Relationship, WorldTime


@dataclass(frozen=True)
class PlaySource:
    world_id: str
    file: str                  # relative to DATA_DIR / "dracor"
    rule: SnapshotRule
    moment: str                # human description of the snapshot (documentation, English)
    location_hint: str | None = None  # native-language place when the act opens without a setting
    # characters of the cast list who are in the house at the snapshot although they have not yet
    # appeared (paper Table 2: The Father opens "with the Captain, Laura, and Bertha at home")
    at_home: tuple[str, ...] = ()


# The snapshot table: one row per play. Markers are located in the TEI; tests
# check each is found and that the expected characters are on stage.
DRACOR_PLAYS: tuple[PlaySource, ...] = (
    PlaySource("dracor_hamlet", "shakedracor/hamlet.xml",
               SnapshotRule(act=1, segment=2, after_entrance_of="Claudius_Ham"),
               "Act I Scene 2, after the court assembles at Elsinore",
               location_hint="A room of state in the castle of Elsinore, Denmark"),
    PlaySource("dracor_king_lear", "shakedracor/king-lear.xml",
               SnapshotRule(act=1, segment=1, after_first_speech_of="Lear_Lr"),
               "Act I Scene 1, King Lear announces the division of the kingdom; not yet resolved",
               location_hint="King Lear's palace in Britain, the throne room"),
    PlaySource("dracor_dukkehjem", "ibsdracor/et-dukkehjem.xml",
               SnapshotRule(act=1, after_stage_matching=r"Barnepigen går ind i stuen med børnene"),
               "Act I, after the nurse has brought the children upstairs and in"),
    PlaySource("dracor_djadja_vanja", "rusdracor/chekhov-djadja-vanja.xml",
               SnapshotRule(act=1, after_first_speech_of="serebrjakov"),
               "Act I, just after Serebryakov, Yelena and Sonya return from their walk"),
    PlaySource("dracor_tri_sestry", "rusdracor/chekhov-tri-sestry.xml",
               SnapshotRule(act=1, after_first_speech_of="Andrej"),
               "Act I, Irina's name-day gathering, after Andrei joins the guests"),
    PlaySource("dracor_vishnevyi_sad", "rusdracor/chekhov-vishnevyi-sad.xml",
               SnapshotRule(act=1, after_first_speech_of="LjubovAndreevna"),
               "Act I, immediately after the family's arrival in the nursery"),
    PlaySource("dracor_fadren", "swedracor/strindberg-fadren.xml",
               SnapshotRule(act=1, segment=1, after_first_speech_of="spRyttmästarn"),
               "Opening of Act I: the Captain (with the Pastor) at home; Laura, Bertha and the rest of "
               "the household are in the house, not yet in the room (paper Table 2)",
               at_home=("spLaura", "spBertha", "spSvärmodren", "spAmman", "spKalfaktorn")),
)

# Per-language phrases for DraCor world text (our own wording).
PHRASES: dict[str, dict[str, str]] = {
    "en": {"at_home": "at home, elsewhere in the house", "at_home_loc": "elsewhere in the house", "on_stage": "present in the scene", "off_stage": "not in the scene at the moment; last seen in {seg}",
           "offstage_loc": "elsewhere nearby, out of the scene", "shared": "{a} and {b} have already been on stage together (scenes: {n}; {segs})",
           "relation": "{a} and {b}: {name}", "just": "Most recently: {text}", "said": "{who} has just said: “{text}”",
           "character": "a character in {title}", "setting": "The play takes place here: {text}"},
    "nb": {"at_home": "hjemme, et annet sted i huset", "at_home_loc": "et annet sted i huset", "on_stage": "til stede i scenen", "off_stage": "ikke i scenen akkurat nå; sist sett i {seg}",
           "offstage_loc": "et annet sted i nærheten, utenfor scenen", "shared": "{a} og {b} har allerede vært på scenen sammen (opptrinn: {n}; {segs})",
           "relation": "{a} og {b}: {name}", "just": "Nettopp skjedd: {text}", "said": "{who} har nettopp sagt: «{text}»",
           "character": "en person i {title}", "setting": "Handlingen foregår her: {text}"},
    "ru": {"at_home": "дома, в другой комнате", "at_home_loc": "в другой комнате дома", "on_stage": "присутствует в сцене", "off_stage": "сейчас не в сцене; в последний раз появлялся(-ась): {seg}",
           "offstage_loc": "где-то поблизости, вне сцены", "shared": "{a} и {b} уже бывали на сцене вместе (сцен: {n}; {segs})",
           "relation": "{a} и {b}: {name}", "just": "Только что: {text}", "said": "{who} только что сказал(а): «{text}»",
           "character": "действующее лицо пьесы «{title}»", "setting": "Место действия: {text}"},
    "sv": {"at_home": "hemma, någon annanstans i huset", "at_home_loc": "någon annanstans i huset", "on_stage": "närvarande i scenen", "off_stage": "inte i scenen just nu; senast sedd i {seg}",
           "offstage_loc": "någon annanstans i närheten, utanför scenen", "shared": "{a} och {b} har redan varit på scenen tillsammans (scener: {n}; {segs})",
           "relation": "{a} och {b}: {name}", "just": "Nyss: {text}", "said": "{who} har just sagt: ”{text}”",
           "character": "en person i {title}", "setting": "Handlingen utspelar sig här: {text}"},
}
MAX_TEXT = 320      # characters kept from a stage direction / line
RECENT_STAGES = 3   # how many recent stage directions become facts


def _short(text: str, limit: int = MAX_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _first_sentences(text: str, limit: int = 160) -> str:
    out = ""
    for part in text.replace("–", ".").split(". "):
        cand = (out + ". " + part) if out else part
        if len(cand) > limit and out:
            break
        out = cand
    return _short(out.rstrip(". ") + ".", limit + 40)


def build_dracor_world(source: PlaySource, dracor_dir: Path | None = None) -> InitialWorld:
    dracor_dir = dracor_dir or DATA_DIR / "dracor"
    play = parse_tei(dracor_dir / source.file)
    return world_from_play(play, source, source_ref=f"data/dracor/{source.file}")


def world_from_play(play: Play, source: PlaySource, source_ref: str) -> InitialWorld:
    snap = locate_snapshot(play, source.rule)
    ph = PHRASES.get(play.language, PHRASES["en"])
    past_segments = [s for s in play.segments if s.index <= snap.segment.index]

    # who has appeared, where last, and co-presence counts up to the snapshot
    last_seg: dict[str, str] = {}
    shared: dict[tuple[str, str], list[str]] = {}
    for seg in past_segments:
        until = snap.position if seg.index == snap.segment.index else None
        ids = segment_presence(play, seg, until)
        for i in ids:
            last_seg[i] = seg.label
        # in long unsegmented acts, co-presence means being on stage at the same time
        groups = [ids] if seg.kind != "act" else _on_stage_groups(play, seg, until)
        seen_pairs = set()
        for group in groups:
            for x in range(len(group)):
                for y in range(x + 1, len(group)):
                    a, b = sorted((group[x], group[y]))
                    if (a, b) not in seen_pairs:
                        seen_pairs.add((a, b))
                        shared.setdefault((a, b), []).append(seg.label)
    order = list(play.cast)
    missing = [c for c in source.at_home if c not in play.cast]
    if missing:
        raise ValueError(f"{source.world_id}: at_home names {missing}, not in the cast list of {source.file}")
    at_home = [c for c in source.at_home if c not in last_seg]
    appeared = sorted([*last_seg, *at_home], key=order.index)
    present = set(snap.present)

    setting_text = snap.segment.setting if snap.segment.setting and not _is_entrance_only(play, snap.segment) else ""
    place = source.location_hint or (_first_sentences(setting_text) if setting_text else _short(play.set_text or play.title, 160))
    characters = []
    for cid in appeared:
        m = play.cast[cid]
        if cid in present:
            cond, loc = ph["on_stage"], place
            note = _last_own_stage(play, cid, snap.position)
            if note:
                cond = f"{cond}; {note}"
        elif cid in at_home:
            cond, loc = ph["at_home"], ph["at_home_loc"]
        else:
            cond = ph["off_stage"].format(seg=last_seg[cid])
            loc = ph["offstage_loc"]
        characters.append(Character(
            id=cid, name=m.name, description=m.description or f"{m.name}, {ph['character'].format(title=play.title)}",
            condition=cond, location=loc, sex=m.sex, is_group=m.is_group,
        ))
    known = set(appeared)
    names = {c.id: c.name for c in characters}

    rel_names: dict[tuple[str, str], list[str]] = {}
    for r in play.relations:
        if r.a in known and r.b in known:
            rel_names.setdefault(tuple(sorted((r.a, r.b))), []).append(r.name)
    relationships = []
    for pair in sorted(set(shared) | set(rel_names)):
        a, b = pair
        parts = []
        if pair in rel_names:
            parts += [ph["relation"].format(a=names[a], b=names[b], name=", ".join(dict.fromkeys(rel_names[pair])))]
        if pair in shared:
            segs = list(dict.fromkeys(shared[pair]))
            parts.append(ph["shared"].format(a=names[a], b=names[b], n=len(shared[pair]), segs="; ".join(segs[-3:])))
        relationships.append(Relationship(
            a=a, b=b, description=". ".join(parts),
            kind="tei_relation" if pair in rel_names else "co_presence",
            weight=len(shared.get(pair, [])) + 2 * len(rel_names.get(pair, [])),
        ))

    facts = []
    if play.set_text:
        facts.append(Fact(id="play_setting", text=_short(play.set_text)))
    if setting_text:
        facts.append(Fact(id="act_setting", text=ph["setting"].format(text=_short(setting_text))))
    recent = [e for e in play.events[: snap.position + 1]
              if e.kind == "stage" and not e.in_speech and e.segment == snap.segment.index and len(e.text) >= 25
              and e.text != setting_text]
    for k, ev in enumerate(recent[-RECENT_STAGES:]):
        about = [i for i in (ev.who or ()) if i in known]
        facts.append(Fact(id=f"recent_{k + 1}", text=ph["just"].format(text=_short(ev.text)), about=about))
    last_line = next((e for e in reversed(play.events[: snap.position + 1]) if e.kind == "speech" and e.who and e.text), None)
    if last_line is not None and last_line.who[0] in known:
        facts.append(Fact(id="last_line", about=[i for i in last_line.who if i in known],
                          text=ph["said"].format(who=names[last_line.who[0]], text=_short(last_line.text, 200))))

    return InitialWorld(
        world_id=source.world_id,
        title=play.title,
        source_family="dracor",
        source_ref=f"{source_ref} ({play.play_id}); snapshot: {source.rule}",
        language=play.language,
        setting=place,
        time=WorldTime(day=0, label=snap.segment.label),
        characters=characters,
        relationships=relationships,
        facts=facts,
        locations=[place],
        snapshot=source.moment,
        focus_ids=[i for i in snap.present if i in known],
    )


def _is_entrance_only(play: Play, seg) -> bool:
    """Folger acts open with 'Enter ...' rather than a setting."""
    first = next((e for e in seg.events if e.kind == "stage"), None)
    return first is not None and bool(first.who) and first.text == seg.setting


def _on_stage_groups(play: Play, seg, until: int | None) -> list[tuple[str, ...]]:
    """On-stage sets after each speech of an unsegmented act (co-presence at the same time)."""
    groups: list[tuple[str, ...]] = []
    for ev in seg.events:
        if until is not None and ev.position > until:
            break
        if ev.kind == "speech":
            g = present_at(play, seg, ev.position)
            if not groups or groups[-1] != g:
                groups.append(g)
    if until is not None:
        groups.append(present_at(play, seg, until))
    return groups


def _last_own_stage(play: Play, cid: str, position: int) -> str:
    """The last stage direction inside the character's own speech: a deterministic mood/action cue."""
    for ev in reversed(play.events[: position + 1]):
        if ev.kind == "speech" and cid in ev.who:
            # stage events inside this speech directly follow it in document order
            inner = []
            for e in play.events[ev.position + 1:]:
                if e.kind != "stage" or not e.in_speech:
                    break
                inner.append(e)
            return _short(inner[-1].text.strip("() ."), 120) if inner else ""
    return ""


def load_initial_worlds(data_dir: Path | None = None) -> list[InitialWorld]:
    """The nine worlds in a fixed order: Bianjing (ITP), Smallville, then the seven plays."""
    data_dir = data_dir or DATA_DIR
    worlds = [build_bianjing_world(data_dir / "bianjing"), build_smallville_world(data_dir / "smallville")]
    worlds += [build_dracor_world(src, data_dir / "dracor") for src in DRACOR_PLAYS]
    return worlds
