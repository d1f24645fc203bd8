"""Generic DraCor TEI parser: cast, segments (acts/scenes/configurations), speeches, stage directions.

Why generic: DraCor corpora encode structure differently (Shakespeare and
Strindberg use acts with scenes, RusDraCor Chekhov has `configuration`
segments inside acts, Ibsen has bare acts, some plays have scenes without acts,
King Lear nests an act div inside act 4, Hamlet has an `sp` without `@who`,
SweDraCor ids are prefixed and non-ASCII while its stage/relation markup uses
unprefixed ids). The parser flattens any of these into one ordered list of
events, each assigned to its innermost segment, so snapshot location and
co-presence work the same way everywhere.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

TEI_NS = "http://www.tei-c.org/ns/1.0"
NS = {"t": TEI_NS}
XML_ID = "{http://www.w3.org/XML/1998/namespace}id"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
SEGMENT_TYPES = ("scene", "configuration")

# ISO 639 codes found in DraCor headers -> BCP-47 tags we use.
LANGUAGE_TAGS = {
    "eng": "en", "en": "en", "rus": "ru", "ru": "ru", "swe": "sv", "sv": "sv",
    "nob": "nb", "nor": "nb", "nb": "nb", "no": "nb", "da-no": "nb", "dan": "da", "da": "da",
    "ger": "de", "deu": "de", "de": "de", "fre": "fr", "fra": "fr", "fr": "fr", "ita": "it", "it": "it",
    "spa": "es", "es": "es", "zh": "zh", "zho": "zh", "chi": "zh",
}


class TEIError(ValueError):
    """Unusable TEI input; the message names the file (and element when known)."""


def _text(el: etree._Element) -> str:
    return " ".join("".join(el.itertext()).split())


def _text_without_stage(el: etree._Element) -> str:
    """Spoken text of an `sp`: all text except speaker labels and stage directions (their tails stay)."""
    parts: list[str] = []

    def walk(node: etree._Element) -> None:
        if isinstance(node.tag, str) and _local(node) not in ("stage", "speaker"):
            if node.text:
                parts.append(node.text)
            for child in node:
                walk(child)
        if node is not el and node.tail:
            parts.append(node.tail)

    walk(el)
    return " ".join(" ".join(parts).split())


@dataclass(frozen=True)
class CastMember:
    id: str
    name: str                       # first persName/name
    names: tuple[str, ...]          # every name variant (for matching in stage directions)
    sex: str | None
    is_group: bool
    description: str = ""           # from the printed cast list, when it links to this id
    declared: bool = True           # False: only seen as a speaker id, not in listPerson


@dataclass(frozen=True)
class Event:
    """One speech or stage direction, in document order."""

    position: int
    kind: str                       # "speech" | "stage"
    segment: int                    # index into Play.segments
    who: tuple[str, ...]            # resolved cast ids (speakers, or @who of a stage)
    text: str
    stage_type: str | None = None   # TEI @type of a stage (entrance, exit, setting...)
    speaker_label: str = ""         # printed speaker label (useful when @who is missing)
    in_speech: bool = False         # a stage direction inside an sp


@dataclass
class Segment:
    index: int
    act: int                        # 1-based act number in document order (synthetic 1 if no acts)
    act_label: str
    kind: str                       # "act" | "scene" | "configuration" | "body"
    number_in_act: int              # 1-based position among the act's segments
    label: str                      # e.g. "Act 1, Scene 2" heads joined
    setting: str = ""               # the act's opening stage direction
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Relation:
    name: str
    a: str
    b: str
    directed: bool


@dataclass
class Play:
    path: Path
    play_id: str
    title: str
    language: str                   # BCP-47
    cast: dict[str, CastMember]     # insertion order = listPerson order
    segments: list[Segment]
    events: list[Event]
    relations: list[Relation]
    set_text: str = ""              # front/set: where the play takes place
    unresolved_refs: tuple[str, ...] = ()

    @property
    def n_acts(self) -> int:
        return len({s.act for s in self.segments})

    def segments_of_act(self, act: int) -> list[Segment]:
        return [s for s in self.segments if s.act == act]

    def speakers(self) -> set[str]:
        return {w for e in self.events if e.kind == "speech" for w in e.who}


# ---------------------------------------------------------------- parsing
def parse_tei(path: str | Path) -> Play:
    path = Path(path)
    try:
        tree = etree.parse(str(path), etree.XMLParser(remove_comments=True, resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as err:
        raise TEIError(f"{path}: malformed XML: {err}") from None
    except OSError as err:
        raise TEIError(f"{path}: cannot read: {err}") from None
    root = tree.getroot()
    if etree.QName(root).namespace != TEI_NS:
        raise TEIError(f"{path}: root element {root.tag!r} is not in the TEI namespace")
    body = root.find(".//t:text//t:body", NS)
    if body is None:
        body = root.find(".//t:body", NS)
    if body is None:
        raise TEIError(f"{path}: no text/body element")

    cast = _parse_cast(root, path)
    _attach_cast_descriptions(root, cast)
    resolver = _IdResolver(cast)
    segments, events = _parse_body(body, cast, resolver, path)
    if not any(e.kind == "speech" for e in events):
        raise TEIError(f"{path}: no sp (speech) elements in the body")
    relations = _parse_relations(root, resolver)
    title_el = root.find(".//t:titleStmt/t:title[@type='main']", NS)
    if title_el is None:
        title_el = root.find(".//t:titleStmt/t:title", NS)
    title = _text(title_el) if title_el is not None else path.stem
    set_el = root.find(".//t:front//t:set", NS)
    return Play(
        path=path,
        play_id=root.get(XML_ID) or path.stem,
        title=title,
        language=_language(root),
        cast=cast,
        segments=segments,
        events=events,
        relations=relations,
        set_text=_text(set_el) if set_el is not None else "",
        unresolved_refs=tuple(sorted(resolver.unresolved)),
    )


def _language(root: etree._Element) -> str:
    candidates = [root.get(XML_LANG)]
    text_el = root.find("t:text", NS)
    if text_el is not None:
        candidates.append(text_el.get(XML_LANG))
    candidates += [l.get("ident") for l in root.findall(".//t:langUsage/t:language", NS)]
    for c in candidates:
        if c and c.lower() in LANGUAGE_TAGS:
            return LANGUAGE_TAGS[c.lower()]
    for c in candidates:
        if c:
            return c.split("-")[0].lower()
    return "und"


def _parse_cast(root: etree._Element, path: Path) -> dict[str, CastMember]:
    cast: dict[str, CastMember] = {}
    lp = root.find(".//t:teiHeader/t:profileDesc/t:particDesc/t:listPerson", NS)
    if lp is None:
        return cast
    for el in lp.iter(f"{{{TEI_NS}}}person", f"{{{TEI_NS}}}personGrp"):
        pid = el.get(XML_ID)
        if not pid:
            raise TEIError(f"{path}: a {etree.QName(el).localname} in particDesc/listPerson has no xml:id")
        names: list[str] = []
        for n in el.iter(f"{{{TEI_NS}}}persName", f"{{{TEI_NS}}}name"):
            t = _text(n)
            if t and t not in names:
                names.append(t)
        if not names:
            names = [pid]
        cast[pid] = CastMember(
            id=pid, name=names[0], names=tuple(names), sex=el.get("sex"),
            is_group=etree.QName(el).localname == "personGrp",
        )
    return cast


def _attach_cast_descriptions(root: etree._Element, cast: dict[str, CastMember]) -> None:
    """Printed cast list entries (castItem) give a native-language role description."""
    resolver = _IdResolver(cast)
    for item in root.iterfind(".//t:front//t:castList//t:castItem", NS):
        refs = [item.get("sameAs") or item.get("corresp") or ""]
        refs += [p.get("ref") or "" for p in item.iterfind(".//t:persName", NS)]
        text = re.sub(r"\s+([,.;:])", r"\1", _text(item)).strip(" .,")
        pid = next((r for r in (resolver.resolve(x) for x in refs if x) if r), None)
        if pid is None:  # RusDraCor: plain text items; match by name at the start
            low = text.casefold()
            pid = next((c.id for c in cast.values() if any(n.casefold() in low[: len(n) + 40] for n in c.names if len(n) >= 3)), None)
        if pid and not cast[pid].description:
            m = cast[pid]
            cast[pid] = CastMember(m.id, m.name, m.names, m.sex, m.is_group, text, m.declared)


class _IdResolver:
    """Maps `#ref`s from @who/@active/@passive/@mutual to cast ids.

    Exact id first; then case-insensitive; then a unique id that ends with the
    ref (SweDraCor `spLaura` vs `#Laura`); then a unique name match.
    """

    def __init__(self, cast: dict[str, CastMember]):
        self.cast = cast
        self.unresolved: set[str] = set()

    def resolve(self, ref: str) -> str | None:
        r = ref.strip().lstrip("#")
        if not r:
            return None
        if r in self.cast:
            return r
        folded = r.casefold()
        hits = [i for i in self.cast if i.casefold() == folded]
        if len(hits) != 1:
            hits = [i for i in self.cast if i.endswith(r) and len(i) - len(r) <= 3]
        if len(hits) != 1:
            hits = [c.id for c in self.cast.values() if any(n.casefold() == folded for n in c.names)]
        if len(hits) == 1:
            return hits[0]
        self.unresolved.add(r)
        return None

    def resolve_all(self, refs: str | None) -> tuple[str, ...]:
        out: list[str] = []
        for ref in (refs or "").split():
            pid = self.resolve(ref)
            if pid and pid not in out:
                out.append(pid)
        return tuple(out)


def _local(el: etree._Element) -> str:
    tag = el.tag
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""   # "{ns}name" (Clark notation) or "name"


def _parse_body(body: etree._Element, cast: dict[str, CastMember], resolver: _IdResolver,
                path: Path) -> tuple[list[Segment], list[Event]]:
    """Flatten the body into events, each assigned to its innermost scene/configuration.

    Acts are the outermost `div[@type=act]` (a nested act div, as in King Lear
    act 4, stays part of its parent). Events directly in an act that also has
    scenes (e.g. the act's opening stage direction) join the act's next scene.
    """
    def head(div: etree._Element | None) -> str:
        h = div.find("t:head", NS) if div is not None else None
        return _text(h) if h is not None else ""

    getpath = body.getroottree().getpath  # XPaths are stable keys (id() of lxml proxies is not)
    raw: list[tuple[etree._Element, str, etree._Element | None, str | None, etree._Element | None]] = []
    for el in body.iter(f"{{{TEI_NS}}}sp", f"{{{TEI_NS}}}stage"):
        # (ancestors by local name, any namespace, as `_local` reads them: lxml's "{*}name" filter walks them in C;
        # issue 24: the plays are parsed on the command's path to WSE-bench's first request)
        if _local(el) == "stage" and next(el.iterancestors("{*}stage"), None) is not None:
            continue  # nested stage (e.g. a sound cue inside an entrance): part of its parent
        divs = list(el.iterancestors("{*}div"))
        acts = [a for a in divs if a.get("type") == "act"]
        act = acts[-1] if acts else None
        # innermost scene/configuration; an act div nested in another act is a mis-typed subdivision
        seg_div = next((a for a in divs if (
            a.get("type") in SEGMENT_TYPES or (a.get("type") == "act" and act is not None and a is not act
                                                and getpath(a) != getpath(act)))), None)
        raw.append((el, getpath(act) if act is not None else "body", act,
                    getpath(seg_div) if seg_div is not None else None, seg_div))
    if not raw:
        raise TEIError(f"{path}: the body has no speeches or stage directions")

    # Attach act-level events to a neighbouring scene of the same act (next one, else previous).
    seg_keys: list[str] = []
    seg_divs: dict[str, etree._Element | None] = {}
    nearest: list[list] = [[None, None] for _ in raw]   # per event: the next / previous event of its act in a scene
    for order, side in ((range(len(raw) - 1, -1, -1), 0), (range(len(raw)), 1)):
        seen: dict[str, tuple] = {}
        for i in order:
            nearest[i][side] = seen.get(raw[i][1])
            if raw[i][3] is not None:
                seen[raw[i][1]] = raw[i]
    for i, (el, akey, act, skey, sdiv) in enumerate(raw):
        if skey is None:
            nxt, prv = nearest[i]
            pick = nxt or prv
            skey, sdiv = (pick[3], pick[4]) if pick else (akey, None)
        seg_keys.append(skey)
        seg_divs.setdefault(skey, sdiv)

    segments: list[Segment] = []
    seg_index: dict[str, int] = {}
    act_number: dict[str, int] = {}
    per_act: dict[str, int] = {}
    events: list[Event] = []
    for (el, akey, act, _, _), skey in zip(raw, seg_keys):
        if skey not in seg_index:
            if akey not in act_number:
                act_number[akey] = len(act_number) + 1
            n = per_act[akey] = per_act.get(akey, 0) + 1
            sdiv = seg_divs[skey]
            alabel = (head(act) or f"{act_number[akey]}").rstrip(" .")
            kind = ("scene" if sdiv.get("type") == "act" else sdiv.get("type")) if sdiv is not None else (
                "act" if act is not None else "body")
            shead = head(sdiv).rstrip(" .") if sdiv is not None else ""
            label = f"{alabel}, {shead}" if shead else alabel  # unlabelled configurations: the act
            first_stage = next(iter(act.iter(f"{{{TEI_NS}}}stage")), None) if act is not None else None
            seg_index[skey] = len(segments)
            segments.append(Segment(
                index=len(segments), act=act_number[akey], act_label=alabel, kind=kind, number_in_act=n,
                label=" ".join(label.split()), setting=_text(first_stage) if first_stage is not None else "",
            ))
        seg = seg_index[skey]
        if _local(el) == "sp":
            who_raw = el.get("who")
            who = resolver.resolve_all(who_raw)
            spk = el.find("t:speaker", NS)
            label = _text(spk).strip(" .:") if spk is not None else ""
            for ref in (who_raw or "").split():  # speaker id missing from listPerson: keep as undeclared cast
                r = ref.lstrip("#")
                if r and resolver.resolve(r) is None:
                    cast[r] = CastMember(r, label or r, (label or r,), None, False, "", declared=False)
                    resolver.unresolved.discard(r)
                    who = who + (r,)
            events.append(Event(position=len(events), kind="speech", segment=seg, who=who,
                                text=_text_without_stage(el), speaker_label=label))
        else:
            events.append(Event(
                position=len(events), kind="stage", segment=seg, who=resolver.resolve_all(el.get("who")),
                text=_text(el), stage_type=el.get("type"),
                in_speech=next(el.iterancestors("{*}sp"), None) is not None,
            ))
        segments[seg].events.append(events[-1])
    return segments, events


def _parse_relations(root: etree._Element, resolver: _IdResolver) -> list[Relation]:
    """Relation markup anywhere in the file (particDesc, back matter) between cast members."""
    out: list[Relation] = []
    seen: set[tuple[str, str, str]] = set()
    for rel in root.iter(f"{{{TEI_NS}}}relation"):
        name = rel.get("name") or rel.get("type") or "related"
        if name == "wikidata" or (rel.get("type") == "other"):
            continue  # metadata links and "talks about" mentions are not relationships
        pairs: list[tuple[str, str, bool]] = []
        mutual = resolver.resolve_all(rel.get("mutual"))
        for i, a in enumerate(mutual):
            for b in mutual[i + 1:]:
                pairs.append((a, b, False))
        for a in resolver.resolve_all(rel.get("active")):
            for b in resolver.resolve_all(rel.get("passive")):
                if a != b:
                    pairs.append((a, b, True))
        for a, b, directed in pairs:
            key = (name, a, b)
            if key not in seen:
                seen.add(key)
                out.append(Relation(name=name, a=a, b=b, directed=directed))
    return out


# ---------------------------------------------------------------- snapshots
@dataclass(frozen=True)
class SnapshotRule:
    """Where a play is frozen: act (1-based), optional segment number within the act, and a marker.

    Exactly one marker: the first speech of a character, the first stage
    direction whose @who names a character (an entrance), or the first stage
    direction matching a regular expression. The snapshot is the event that
    matches (inclusive): everything up to it is the world's past.
    """

    act: int
    segment: int | None = None
    after_first_speech_of: str | None = None
    after_entrance_of: str | None = None
    after_stage_matching: str | None = None

    def __post_init__(self) -> None:
        markers = [self.after_first_speech_of, self.after_entrance_of, self.after_stage_matching]
        if sum(m is not None for m in markers) != 1:
            raise ValueError(f"snapshot rule needs exactly one marker: {self}")


class SnapshotNotFound(TEIError):
    pass


@dataclass(frozen=True)
class Snapshot:
    position: int                    # index of the marker event in Play.events (inclusive)
    segment: Segment
    present: tuple[str, ...]         # cast ids on stage at the snapshot (cast order)


def locate_snapshot(play: Play, rule: SnapshotRule) -> Snapshot:
    segs = play.segments_of_act(rule.act)
    if not segs:
        raise SnapshotNotFound(f"{play.path}: act {rule.act} not found (the play has {play.n_acts} acts)")
    if rule.segment is not None:
        segs = [s for s in segs if s.number_in_act == rule.segment]
        if not segs:
            raise SnapshotNotFound(f"{play.path}: act {rule.act} has no segment {rule.segment}")
    for target in (rule.after_first_speech_of, rule.after_entrance_of):
        if target is not None and target not in play.cast:
            raise SnapshotNotFound(f"{play.path}: snapshot rule names unknown character id {target!r}")
    pattern = re.compile(rule.after_stage_matching) if rule.after_stage_matching else None
    for seg in segs:
        for ev in seg.events:
            hit = (
                (rule.after_first_speech_of and ev.kind == "speech" and rule.after_first_speech_of in ev.who)
                or (rule.after_entrance_of and ev.kind == "stage" and rule.after_entrance_of in ev.who)
                or (pattern is not None and ev.kind == "stage" and pattern.search(ev.text))
            )
            if hit:
                return Snapshot(position=ev.position, segment=seg, present=present_at(play, seg, ev.position))
    raise SnapshotNotFound(f"{play.path}: snapshot marker not found for rule {rule}")


def _memo(play: Play) -> dict:
    """Per-play results of `_mentioned`'s patterns and `_movements` (a play's text and cast do not change once
    parsed; `present_at` re-reads every stage direction of a segment for each speech, `world_from_play` calls
    it for every speech: ~60 % of the WSE source run). Reset if the cast object is replaced."""
    stamp = (play.language, id(play.cast), len(play.cast))
    memo = play.__dict__.get("_tei_memo")
    if memo is None or memo["stamp"] != stamp:
        patterns = []
        for c in play.cast.values():   # one pattern per member: any of its names of >= 3 characters
            names = [re.escape(n) for n in c.names if len(n) >= 3]
            if names:
                patterns.append((c.id, re.compile(rf"(?<!\w)(?:{'|'.join(names)})(?!\w)", flags=re.IGNORECASE)))
        memo = {"stamp": stamp, "patterns": patterns, "movements": {}}
        play.__dict__["_tei_memo"] = memo
    return memo


def _mentioned(play: Play, text: str) -> list[str]:
    return [cid for cid, pattern in _memo(play)["patterns"] if pattern.search(text)]


# Stage directions without @who: sentence-level movement cues per language. An
# entrance cue wins over an exit cue ("går ind i stuen" enters the on-stage room).
ENTRANCE_CUES = {
    "en": r"\benters?\b|\bre-?enters?\b",
    "nb": r"\bkommer\b|\bind i stuen\b|\bviser .* ind\b",
    "da": r"\bkommer\b|\bind i stuen\b",
    "sv": r"\bkommer\b|\bin från\b|\binkommer\b|\bträder in\b",
    "ru": r"\bвход(ит|ят)\b|\bпоказываются\b|\bпоявля|\bидут\b|\bвозвращ",
}
EXIT_CUES = {
    "en": r"\bexits?\b|\bexeunt\b",
    "nb": r"\bgår\b|\bgaar\b",
    "da": r"\bgår\b|\bgaar\b",
    "sv": r"\bgår\b|\butgår\b",
    "ru": r"\bуход(ит|ят)\b|\bуходя\b|\bвыход(ит|ят)\b",
}
RECENCY_WINDOW = 80  # events; in an act without scenes, who spoke or was named this recently is on stage


def _movements(play: Play, text: str) -> tuple[list[str], list[str]]:
    """(entering/present, leaving) cast ids named in a stage direction, sentence by sentence (once per text)."""
    done = _memo(play)["movements"]
    if text not in done:
        done[text] = _movements_of(play, text)
    enter, leave = done[text]
    return list(enter), list(leave)


def _movements_of(play: Play, text: str) -> tuple[list[str], list[str]]:
    enter, leave = [], []
    ent, ext = ENTRANCE_CUES.get(play.language), EXIT_CUES.get(play.language)
    for sentence in re.split(r"(?<=[.;!?])\s+", text):
        named = _mentioned(play, sentence)
        if not named:
            continue
        if ext and re.search(ext, sentence, flags=re.IGNORECASE) and not (ent and re.search(ent, sentence, flags=re.IGNORECASE)):
            leave += named
        else:
            enter += named
    return enter, leave


def present_at(play: Play, seg: Segment, position: int) -> tuple[str, ...]:
    """Cast on stage in `seg` at event `position`.

    Speakers and @who-entrances so far in the segment join; @who exits leave;
    stage directions without @who move the characters they name (per-language
    entrance/exit cues). A `configuration` segment is by definition one fixed
    set of characters, so all its speakers count. In a long act without scenes
    (Ibsen) only characters active in the last RECENCY_WINDOW events count.
    """
    last_seen: dict[str, int] = {}
    for ev in seg.events:
        if ev.position > position:
            if seg.kind == "configuration" and ev.kind == "speech":
                for i in ev.who:
                    last_seen.setdefault(i, position)
            continue
        if ev.kind == "speech":
            for i in ev.who:
                last_seen[i] = ev.position
        elif ev.who:
            if (ev.stage_type or "").startswith("exit"):
                for i in ev.who:
                    last_seen.pop(i, None)
            elif not ev.in_speech or ev.stage_type in ("entrance", "presence"):
                for i in ev.who:
                    last_seen[i] = ev.position
        else:
            enter, leave = _movements(play, ev.text)
            for i in leave:
                last_seen.pop(i, None)
            for i in enter:
                last_seen[i] = ev.position
    if seg.kind in ("act", "body"):
        last_seen = {i: p for i, p in last_seen.items() if position - p <= RECENCY_WINDOW}
    order = list(play.cast)
    return tuple(sorted(last_seen, key=order.index))


def segment_presence(play: Play, seg: Segment, until: int | None = None) -> tuple[str, ...]:
    """Everyone who is on stage at some point of `seg` up to event `until` (co-presence unit)."""
    ids: list[str] = []
    for ev in seg.events:
        if until is not None and ev.position > until:
            break
        cands = ev.who if ev.who else (_mentioned(play, ev.text) if ev.kind == "stage" else ())
        for i in cands:
            if i not in ids:
                ids.append(i)
    if until is not None and seg.kind == "configuration" and seg.events and seg.events[0].position <= until:
        for i in present_at(play, seg, until):  # a configuration's speakers share the stage throughout
            if i not in ids:
                ids.append(i)
    order = list(play.cast)
    return tuple(sorted(ids, key=order.index))
