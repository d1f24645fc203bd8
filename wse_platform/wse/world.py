"""Common, self-contained world and episode-seed schemas of WSE-bench.

Every source family (DraCor plays, Smallville personas, our Bianjing-1100 world)
is converted into one `InitialWorld`; an `EpisodeSeed` is a five-character cast
cut out of a world plus everything the 12 architectures must share (opening,
three first options, choice schedule). Both are plain pydantic models so they
round-trip through the warehouse as JSON (`model_dump(mode="json")` /
`model_validate_json`). Field names are a contract with the simulation and
judging code: extend, never rename.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SourceFamily = Literal["dracor", "smallville", "itp"]
SOURCE_FAMILIES: tuple[str, ...] = ("itp", "smallville", "dracor")
PAPER_HORIZON = 20
CAST_SIZE = 5  # 1 player + 4 NPCs


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorldTime(_Model):
    """Relative time: day 0 is the snapshot day; `label` names it in source terms."""

    day: int = 0
    label: str                       # e.g. "Act I, Scene 2" / "2023-02-13 00:00" / "元符三年正月十五"
    clock: str | None = None         # "HH:MM" when the source fixes it (Smallville), else None
    calendar_date: str | None = None  # ISO date when the source has one


class Character(_Model):
    id: str
    name: str
    description: str
    condition: str                   # state at the snapshot (health, mood, situation)
    location: str
    sex: str | None = None           # as given by the source (MALE/FEMALE/UNKNOWN), if any
    is_group: bool = False           # a TEI personGrp (e.g. "Servants")


class Relationship(_Model):
    """An undirected relationship between two characters (ids sorted: a < b)."""

    a: str
    b: str
    description: str
    kind: str = "co_presence"        # co_presence | tei_relation | text_mention | authored
    weight: int = 1                  # evidence strength (shared scenes, mentions...)

    @model_validator(mode="after")
    def _ordered(self) -> "Relationship":
        if self.a == self.b:
            raise ValueError(f"relationship of {self.a!r} with itself")
        if self.a > self.b:
            raise ValueError(f"relationship ids must be ordered a < b, got {self.a!r} > {self.b!r}")
        return self


class Fact(_Model):
    id: str
    text: str
    about: list[str] = Field(default_factory=list)  # character ids it concerns; [] = the whole world


class InitialWorld(_Model):
    world_id: str
    title: str
    source_family: SourceFamily
    source_ref: str                  # file path (repo-relative) + snapshot rule / dataset id
    language: str                    # BCP-47: nb, ru, en, sv, zh
    setting: str                     # one-paragraph description of the place and moment
    time: WorldTime
    characters: list[Character]
    relationships: list[Relationship]
    facts: list[Fact]
    locations: list[str]
    snapshot: str = ""               # where in the source the world is frozen (for humans)
    focus_ids: list[str] = Field(default_factory=list)  # characters in the scene at the start (player candidates)

    @model_validator(mode="after")
    def _consistent_ids(self) -> "InitialWorld":
        ids = [c.id for c in self.characters]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"world {self.world_id}: duplicate character ids {dupes}")
        known = set(ids)
        stray = [i for i in self.focus_ids if i not in known] + [
            i for f in self.facts for i in f.about if i not in known]
        if stray:
            raise ValueError(f"world {self.world_id}: focus/fact ids name unknown characters {sorted(set(stray))}")
        for r in self.relationships:
            for end in (r.a, r.b):
                if end not in known:
                    raise ValueError(f"world {self.world_id}: relationship {r.a}–{r.b} names unknown character {end!r}")
        return self

    def character(self, char_id: str) -> Character:
        for c in self.characters:
            if c.id == char_id:
                return c
        raise KeyError(f"world {self.world_id}: no character {char_id!r}")

    def relationships_within(self, ids: list[str] | set[str]) -> list[Relationship]:
        keep = set(ids)
        return [r for r in self.relationships if r.a in keep and r.b in keep]


class SeedCharacter(Character):
    role: Literal["player", "npc"]


class EpisodeSeed(_Model):
    """One episode start shared by every architecture and model."""

    seed_id: str
    world_id: str
    world_title: str
    source_family: SourceFamily
    language: str
    player_id: str
    npc_ids: list[str]
    cast: list[SeedCharacter]        # player first, then NPCs in npc_ids order
    relationships: list[Relationship]  # only between cast members
    facts: list[Fact]
    locations: list[str]
    setting: str
    time: WorldTime
    opening: str                     # native-language opening narration
    initial_actions: list[str]       # the player's three options at step 1
    choice_schedule: list[int]       # option position (0..2) chosen at step t = index t-1
    selection: dict[str, Any] = Field(default_factory=dict)  # why this cast was picked (density, rank...)

    @field_validator("npc_ids")
    @classmethod
    def _four_npcs(cls, v: list[str]) -> list[str]:
        if len(v) != CAST_SIZE - 1 or len(set(v)) != len(v):
            raise ValueError(f"need {CAST_SIZE - 1} distinct NPC ids, got {v}")
        return v

    @field_validator("initial_actions")
    @classmethod
    def _three_actions(cls, v: list[str]) -> list[str]:
        if len(v) != 3 or any(not a.strip() for a in v):
            raise ValueError(f"need exactly 3 non-empty initial actions, got {v}")
        return v

    @field_validator("choice_schedule")
    @classmethod
    def _schedule(cls, v: list[int]) -> list[int]:
        if len(v) < PAPER_HORIZON or any(x not in (0, 1, 2) for x in v):
            raise ValueError(f"choice schedule needs >= {PAPER_HORIZON} values in {{0,1,2}}, got {v}")
        return v

    @model_validator(mode="after")
    def _cast_matches(self) -> "EpisodeSeed":
        expected = [self.player_id, *self.npc_ids]
        got = [c.id for c in self.cast]
        if got != expected:
            raise ValueError(f"seed {self.seed_id}: cast order {got} != player + npcs {expected}")
        if [c.role for c in self.cast] != ["player"] + ["npc"] * len(self.npc_ids):
            raise ValueError(f"seed {self.seed_id}: cast roles must be player then npc")
        keep = set(expected)
        for r in self.relationships:
            if r.a not in keep or r.b not in keep:
                raise ValueError(f"seed {self.seed_id}: relationship {r.a}–{r.b} leaves the cast")
        return self

    # ---- views ---------------------------------------------------------
    @property
    def player(self) -> SeedCharacter:
        return self.cast[0]

    @property
    def npcs(self) -> list[SeedCharacter]:
        return self.cast[1:]

    def character(self, char_id: str) -> SeedCharacter:
        for c in self.cast:
            if c.id == char_id:
                return c
        raise KeyError(f"seed {self.seed_id}: no cast member {char_id!r}")

    def start_world(self) -> dict[str, Any]:
        """The seed's self-contained start state (the 'InitialWorld' an agent or judge sees).

        Carries no source family, source reference or selection bookkeeping, so it
        can be shown to judges without revealing the condition.
        """
        return {
            "title": self.world_title,
            "setting": self.setting,
            "time": self.time.model_dump(mode="json"),
            "characters": [c.model_dump(mode="json", exclude={"is_group"}) for c in self.cast],
            "relationships": [r.model_dump(mode="json", include={"a", "b", "description"}) for r in self.relationships],
            "facts": [f.model_dump(mode="json", include={"id", "text"}) for f in self.facts],
            "locations": list(self.locations),
        }

    def judge_view(self) -> dict[str, Any]:
        """Blinded view for judges: start world, language, opening, first options.

        Never includes model, architecture, source family, seed/selection internals.
        """
        return {
            "language": self.language,
            "initial_world": self.start_world(),
            "opening": self.opening,
            "initial_actions": list(self.initial_actions),
        }
