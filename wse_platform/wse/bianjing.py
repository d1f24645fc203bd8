"""Load our own Bianjing-1100 world (ITP family) from `data/bianjing/world.json`.

The original ITP game world is not public, so the repository ships an authored
substitute (see `data/bianjing/README.md`). The file keeps Chinese text with an
English gloss per field; the InitialWorld uses the Chinese text (the world's
language is `zh`) so stories are generated natively. Validation errors name the
file, the record and the field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wse_platform.wse.world import Character, Fact, InitialWorld, Relationship, WorldTime

WORLD_FILE = "world.json"


class BianjingDataError(ValueError):
    pass


def _need(obj: Any, key: str, where: str, file: Path, kind: type = str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise BianjingDataError(f"{file}: {where}: missing field {key!r}")
    val = obj[key]
    if kind is str and not (isinstance(val, str) and val.strip()):
        raise BianjingDataError(f"{file}: {where}: field {key!r} must be a non-empty string")
    if kind is not str and not isinstance(val, kind):
        raise BianjingDataError(f"{file}: {where}: field {key!r} must be {kind.__name__}")
    return val


def _zh(obj: dict, key: str, where: str, file: Path) -> str:
    glossed = _need(obj, key, where, file, dict)
    _need(glossed, "en", f"{where}.{key}", file)
    return _need(glossed, "zh", f"{where}.{key}", file)


def build_bianjing_world(directory: Path) -> InitialWorld:
    file = directory / WORLD_FILE
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BianjingDataError(f"{file}: not found") from None
    except json.JSONDecodeError as err:
        raise BianjingDataError(f"{file}: invalid JSON: {err}") from None

    world = _need(data, "world", "top level", file, dict)
    locations = {}
    for i, loc in enumerate(_need(data, "locations", "top level", file, list)):
        where = f"locations[{i}]"
        locations[_need(loc, "id", where, file)] = _need(loc, "zh", where, file)
        _need(loc, "en", where, file)

    characters, focus = [], []
    for i, c in enumerate(_need(data, "characters", "top level", file, list)):
        where = f"characters[{i}] ({c.get('id', '?') if isinstance(c, dict) else '?'})"
        loc_id = _need(c, "location", where, file)
        if loc_id not in locations:
            raise BianjingDataError(f"{file}: {where}: field 'location' names unknown location {loc_id!r}")
        cid = _need(c, "id", where, file)
        characters.append(Character(
            id=cid, name=_zh(c, "name", where, file), description=_zh(c, "description", where, file),
            condition=_zh(c, "condition", where, file), location=locations[loc_id], sex=c.get("sex"),
        ))
        if _need(c, "in_opening_scene", where, file, bool):
            focus.append(cid)
    ids = {c.id for c in characters}

    relationships = []
    for i, r in enumerate(_need(data, "relationships", "top level", file, list)):
        where = f"relationships[{i}]"
        a, b = _need(r, "a", where, file), _need(r, "b", where, file)
        for end in (a, b):
            if end not in ids:
                raise BianjingDataError(f"{file}: {where}: unknown character id {end!r}")
        a, b = sorted((a, b))
        relationships.append(Relationship(a=a, b=b, description=_zh(r, "description", where, file), kind="authored", weight=1))

    facts = []
    for i, f in enumerate(_need(data, "facts", "top level", file, list)):
        where = f"facts[{i}]"
        about = _need(f, "about", where, file, list)
        stray = [x for x in about if x not in ids]
        if stray:
            raise BianjingDataError(f"{file}: {where}: field 'about' names unknown characters {stray}")
        facts.append(Fact(id=_need(f, "id", where, file), text=_zh(f, "text", where, file), about=about))

    return InitialWorld(
        world_id="itp_bianjing_1100",
        title=_zh(world, "title", "world", file),
        source_family="itp",
        source_ref="data/bianjing/world.json (our own construction; the ITP game world is not public)",
        language="zh",
        setting=_zh(world, "setting", "world", file),
        time=WorldTime(day=0, label=_zh(world, "time_label", "world", file)),
        characters=characters,
        relationships=relationships,
        facts=facts,
        locations=list(locations.values()),
        snapshot="authored opening: the Wang family teahouse at dawn on the Shangsi festival, 1100",
        focus_ids=focus,
    )
