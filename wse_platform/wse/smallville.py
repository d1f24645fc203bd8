"""Smallville (Generative Agents, `base_the_ville_n25`) personas -> one InitialWorld.

Characters come from each persona's `scratch.json`; relationships are derived
deterministically from the personas' own texts: first from texts naming one
another (full name or unique first name). Those mentions alone link only nine
of the 25 personas (families and housemates), leaving no connected five-person
cast, so two weaker text-derived ties follow: sharing a home building (the
`living_area` sector, e.g. the artists' co-living space or the college dorm)
and both texts naming the same public place of the map (Hobbs Cafe, Oak Hill
College...). The relationship `kind` and `weight` (3 per mention, 2 home,
1 place) keep the evidence visible; no model and no hand labelling is involved. The world
starts at the simulation's start time, 2023-02-13 00:00, which is why each
character's condition says whether they are asleep at midnight per their own
stated bedtime.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from wse_platform.wse.world import Character, Fact, InitialWorld, Relationship, WorldTime

START_DATE = "2023-02-13"
START_CLOCK = "00:00"
TEXT_FIELDS = ("innate", "learned", "currently", "lifestyle", "daily_plan_req", "living_area")
REQUIRED_FIELDS = ("name", "first_name", "last_name", "age", "innate", "learned", "currently",
                   "lifestyle", "living_area")  # daily_plan_req is empty for some personas


# Public places of the_ville map that persona texts refer to. A fixed list (the
# map is part of the source world), matched case-insensitively in persona texts.
PUBLIC_PLACES = (
    "Hobbs Cafe", "The Rose and Crown Pub", "Oak Hill College", "Harvey Oak Supply Store",
    "The Willow Market and Pharmacy", "Johnson Park",
)


class PersonaError(ValueError):
    """A persona file is unusable; the message names the file and field."""


def persona_id(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def load_personas(personas_dir: Path) -> list[dict]:
    files = sorted(personas_dir.glob("*/scratch.json"))
    if not files:
        raise PersonaError(f"{personas_dir}: no */scratch.json persona files")
    out = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise PersonaError(f"{f}: invalid JSON: {err}") from None
        for key in REQUIRED_FIELDS:
            if data.get(key) in (None, ""):
                raise PersonaError(f"{f}: persona {data.get('name', f.parent.name)!r}: missing field {key!r}")
        data["_file"] = str(f)
        out.append(data)
    return sorted(out, key=lambda d: d["name"])


def _bedtime_hour(lifestyle: str) -> int | None:
    """Hour (0-23) the persona goes to bed, from 'goes to bed around 11pm / midnight / 2am'."""
    m = re.search(r"bed around (midnight|\d{1,2})\s*(am|pm)?", lifestyle, flags=re.IGNORECASE)
    if not m:
        return None
    if m.group(1).lower() == "midnight":
        return 0
    h = int(m.group(1)) % 12
    return h + 12 if (m.group(2) or "").lower() == "pm" else h


def _asleep_at_midnight(lifestyle: str) -> bool | None:
    h = _bedtime_hour(lifestyle)
    if h is None:
        return None
    return h == 0 or h >= 17  # in bed by midnight; 1am/2am bedtimes are still awake


def _place(living_area: str) -> str:
    """'the Ville:Lin family's house:Eddy Lin's bedroom' -> "Eddy Lin's bedroom, Lin family's house, the Ville"."""
    return ", ".join(reversed([p.strip() for p in living_area.split(":") if p.strip()]))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?;])\s+", text) if s.strip()]


def _mentions(persona: dict, other: dict, first_name_unique: bool) -> list[str]:
    """Sentences of `persona`'s texts that name `other`."""
    names = [other["name"]] + ([other["first_name"]] if first_name_unique else [])
    pattern = re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r")(?![\w])")
    hits = []
    for field in TEXT_FIELDS:
        text = persona.get(field) or ""
        if field == "living_area":
            text = _place(text)
        for s in _sentences(str(text)):
            # the persona's own name is often followed by the other's first name in
            # "Tom and Jane Moreno's bedroom"-like strings, so match on the raw sentence
            if pattern.search(s):
                hits.append(s)
    return hits


def _places_named(persona: dict) -> set[str]:
    text = " ".join(str(persona.get(f) or "") for f in TEXT_FIELDS).casefold()
    return {pl for pl in PUBLIC_PLACES if pl.casefold().removeprefix("the ") in text}


def build_smallville_world(root: Path, source_ref: str = "data/smallville/personas") -> InitialWorld:
    personas = load_personas(root / "personas")
    first_counts: dict[str, int] = {}
    for p in personas:
        first_counts[p["first_name"]] = first_counts.get(p["first_name"], 0) + 1

    characters = []
    facts = []
    locations: list[str] = []
    for p in personas:
        cid = persona_id(p["name"])
        asleep = _asleep_at_midnight(p["lifestyle"])
        home = _place(p["living_area"])
        state = {True: "asleep at home (it is midnight and they are usually in bed by then)",
                 False: "still awake at home at midnight (they usually go to bed later)",
                 None: "at home at midnight"}[asleep]
        characters.append(Character(
            id=cid, name=p["name"],
            description=f"{p['name']}, age {p['age']}; {p['innate']}. {p['learned']}",
            condition=f"{state}. {p['currently']}",
            location=home,
        ))
        routine = " ".join(x for x in (p.get("daily_plan_req") or "", p["lifestyle"]) if x)
        facts.append(Fact(id=f"routine_{cid}", text=routine, about=[cid]))
        for loc in (home, _place(":".join(p["living_area"].split(":")[:2]))):
            if loc not in locations:
                locations.append(loc)

    relationships = []
    places = {p["name"]: _places_named(p) for p in personas}
    for i, a in enumerate(personas):
        for b in personas[i + 1:]:
            ida, idb = sorted([persona_id(a["name"]), persona_id(b["name"])])
            ab = _mentions(a, b, first_counts[b["first_name"]] == 1)
            ba = _mentions(b, a, first_counts[a["first_name"]] == 1)
            if ab or ba:
                evidence = list(dict.fromkeys(ab + ba))
                relationships.append(Relationship(
                    a=ida, b=idb, kind="text_mention", weight=3 * (len(ab) + len(ba)),
                    description=" / ".join(evidence[:3]),
                ))
                continue
            home_a, home_b = a["living_area"].split(":")[:2], b["living_area"].split(":")[:2]
            if home_a == home_b:
                relationships.append(Relationship(
                    a=ida, b=idb, kind="shared_home", weight=2,
                    description=f"{a['name']} and {b['name']} both live at {home_a[-1]}.",
                ))
                continue
            shared = [pl for pl in PUBLIC_PLACES if pl in places[a["name"]] and pl in places[b["name"]]]
            if shared:
                relationships.append(Relationship(
                    a=ida, b=idb, kind="shared_place", weight=1,
                    description=f"{a['name']} and {b['name']} both frequent {', '.join(shared)}.",
                ))
    relationships.sort(key=lambda r: (r.a, r.b))
    facts.insert(0, Fact(id="start_time", text=f"The simulation starts on Monday {START_DATE} at {START_CLOCK} in the town of the Ville."))
    return InitialWorld(
        world_id="smallville",
        title="The Ville",
        source_family="smallville",
        source_ref=source_ref,
        language="en",
        setting="The Ville, a small town with a college, a cafe, a pub, a supply store, a park and family homes; "
                "it is the night of Sunday to Monday, 13 February 2023, the day before Valentine's Day.",
        time=WorldTime(day=0, label=f"{START_DATE} {START_CLOCK}", clock=START_CLOCK, calendar_date=START_DATE),
        characters=characters,
        relationships=relationships,
        facts=facts,
        locations=locations,
        snapshot="start of base_the_ville_n25 (2023-02-13 00:00:00)",
        focus_ids=[c.id for c in characters],
    )
