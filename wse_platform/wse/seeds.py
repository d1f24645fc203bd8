"""EpisodeSeeds: five-character casts cut out of the InitialWorlds, with opening, options and schedule.

Selection algorithm (`build_episode_seeds`), fully deterministic:

1. Quotas. `n` is split evenly over the three source families (42 -> 14 each;
   any remainder goes to families in FAMILY_ORDER), and a family's quota evenly
   over its worlds in world order (DraCor: 14 / 7 plays = 2 per play).
2. Candidates per world. Every 5-subset of the world's individual characters
   (TEI person groups are excluded) whose relationship graph is connected is a
   self-contained cast; rotating each member into the player role gives the
   candidates. If any candidate's player is in the world's `focus_ids` (on stage
   at the snapshot / in the opening scene), only those are kept, so the opening
   can start from the source's scene.
3. Focal players first: only candidates whose player has been chosen the
   fewest times so far in this world stay eligible (so with F possible players
   nobody plays more than ceil(quota / F) seeds).
4. Relationship structure. Each candidate falls in a density bin by its number
   of edges among the 10 possible pairs: sparse (4-5, tree-like), medium (6-7),
   dense (8-10). The k-th pick of a world targets the world's available bins in
   turn (sparse, medium, dense, sparse, ...); if no eligible candidate is in
   the target bin, any bin is allowed.
5. Among those, the candidate with the smallest key wins:
   (times its player was already chosen in this world, times this exact cast
   was already chosen, minus the number of focus characters in the cast,
   summed prior use of its cast members, SHA-256 of seed|world|player|cast).
   The first two spread focal players and casts; the hash is the seeded
   tie-break and does not depend on PYTHONHASHSEED or set order.
6. Output order interleaves families (FAMILY_ORDER) and, inside DraCor, plays,
   so every prefix is family-balanced (`demo_subset`).

Openings and the three initial actions are made from the world data with
per-language templates (en, nb, ru, sv, zh); no model is involved. The choice
schedule is a seeded uniform sequence over option positions {0, 1, 2}.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from itertools import combinations

from wse_platform.wse.world import CAST_SIZE, PAPER_HORIZON, EpisodeSeed, InitialWorld, SeedCharacter

FAMILY_ORDER: tuple[str, ...] = ("smallville", "dracor", "itp")
DEFAULT_SEED = 20240601
DENSITY_BINS = (("sparse", 4, 5), ("medium", 6, 7), ("dense", 8, 10))
MAX_LOCATIONS_KEPT = 10


class SeedSelectionError(ValueError):
    pass


@dataclass(frozen=True)
class Candidate:
    world_id: str
    cast: tuple[str, ...]      # sorted by world character order
    player: str
    n_edges: int
    n_focus: int

    @property
    def density_bin(self) -> str:
        return next(name for name, lo, hi in DENSITY_BINS if lo <= self.n_edges <= hi)


def _sha(*parts: object) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def enumerate_candidates(world: InitialWorld) -> list[Candidate]:
    """All connected five-character casts x player rotations (deterministic order)."""
    ids = [c.id for c in world.characters if not c.is_group]
    index = {cid: i for i, cid in enumerate(ids)}
    adj = [0] * len(ids)
    for r in world.relationships:
        if r.a in index and r.b in index:
            adj[index[r.a]] |= 1 << index[r.b]
            adj[index[r.b]] |= 1 << index[r.a]
    focus = {index[i] for i in world.focus_ids if i in index}
    out: list[Candidate] = []
    bits = [1 << i for i in range(len(ids))]
    for combo in combinations(range(len(ids)), CAST_SIZE):
        mask = 0
        for i in combo:
            mask |= bits[i]
        # connectivity by flood fill on bitmasks
        seen, frontier = bits[combo[0]], bits[combo[0]]
        while frontier:
            nxt = 0
            for i in combo:
                if frontier & bits[i]:
                    nxt |= adj[i] & mask
            frontier = nxt & ~seen
            seen |= nxt
        if seen != mask:
            continue
        n_edges = sum((adj[i] & mask).bit_count() for i in combo) // 2
        n_focus = sum(1 for i in combo if i in focus)
        cast = tuple(ids[i] for i in combo)
        for i in combo:
            out.append(Candidate(world.world_id, cast, ids[i], n_edges, n_focus))
    if focus:
        focused = [c for c in out if index[c.player] in focus]
        if focused:
            return focused
    return out


def _select(world: InitialWorld, quota: int, seed: int) -> list[Candidate]:
    pool = enumerate_candidates(world)
    if len(pool) < quota:
        raise SeedSelectionError(
            f"world {world.world_id}: only {len(pool)} connected five-character cast/player candidates, need {quota}")
    # (issue 24: on the command's path to its first request, as the source run) per candidate once: its bin,
    # its hash key; "not chosen yet" a flag per value instead of a scan of the chosen list (same picks)
    bin_of = [c.density_bin for c in pool]
    bins = [name for name, _, _ in DENSITY_BINS if name in bin_of]
    chosen: list[Candidate] = []
    player_uses: dict[str, int] = {}
    cast_uses: dict[tuple[str, ...], int] = {}
    member_uses: dict[str, int] = {}
    keys = [_sha(seed, world.world_id, c.player, "+".join(c.cast)) for c in pool]
    taken = [False] * len(pool)
    alike: dict[Candidate, list[int]] = {}   # equal candidates (none in practice) leave the pool together
    for j, c in enumerate(pool):
        alike.setdefault(c, []).append(j)
    for k in range(quota):
        target = bins[k % len(bins)]
        remaining = [j for j in range(len(pool)) if not taken[j]]
        least = min(player_uses.get(pool[j].player, 0) for j in remaining)
        fresh = [j for j in remaining if player_uses.get(pool[j].player, 0) == least]  # players spread first
        in_bin = [j for j in fresh if bin_of[j] == target] or fresh
        best = pool[min(in_bin, key=lambda j: (
            player_uses.get(pool[j].player, 0), cast_uses.get(pool[j].cast, 0), -pool[j].n_focus,
            sum(member_uses.get(m, 0) for m in pool[j].cast), keys[j]))]
        chosen.append(best)
        for j in alike[best]:
            taken[j] = True
        player_uses[best.player] = player_uses.get(best.player, 0) + 1
        cast_uses[best.cast] = cast_uses.get(best.cast, 0) + 1
        for m in best.cast:
            member_uses[m] = member_uses.get(m, 0) + 1
    return chosen


def family_quotas(worlds: list[InitialWorld], n: int) -> dict[str, int]:
    """Seeds per world: n split evenly over families, then over each family's worlds."""
    families = [f for f in FAMILY_ORDER if any(w.source_family == f for w in worlds)]
    if not families:
        raise SeedSelectionError("no worlds given")
    quotas: dict[str, int] = {}
    for fi, fam in enumerate(families):
        fam_n = n // len(families) + (1 if fi < n % len(families) else 0)
        members = [w for w in worlds if w.source_family == fam]
        for wi, w in enumerate(members):
            quotas[w.world_id] = fam_n // len(members) + (1 if wi < fam_n % len(members) else 0)
    return quotas


def build_episode_seeds(worlds: list[InitialWorld], n: int = 42, seed: int = DEFAULT_SEED,
                        schedule_length: int = PAPER_HORIZON) -> list[EpisodeSeed]:
    """Exactly `n` seeds (42 = 14 ITP + 14 Smallville + 14 DraCor, 2 per play), family-interleaved."""
    if schedule_length < PAPER_HORIZON:
        raise SeedSelectionError(f"schedule_length must be >= {PAPER_HORIZON}")
    ids = [w.world_id for w in worlds]
    if len(set(ids)) != len(ids):
        raise SeedSelectionError(f"duplicate world ids in {ids}")
    quotas = family_quotas(worlds, n)
    per_world: dict[str, list[EpisodeSeed]] = {}
    for w in worlds:
        picks = _select(w, quotas[w.world_id], seed) if quotas[w.world_id] else []
        per_world[w.world_id] = [
            make_seed(w, cand, f"{w.world_id}-{k + 1:02d}", seed, schedule_length) for k, cand in enumerate(picks)]
    return _interleave(worlds, per_world)


def _interleave(worlds: list[InitialWorld], per_world: dict[str, list[EpisodeSeed]]) -> list[EpisodeSeed]:
    by_family: dict[str, list[EpisodeSeed]] = {}
    for fam in FAMILY_ORDER:
        members = [per_world[w.world_id] for w in worlds if w.source_family == fam]
        merged: list[EpisodeSeed] = []
        for r in range(max((len(m) for m in members), default=0)):
            merged += [m[r] for m in members if r < len(m)]
        by_family[fam] = merged
    out: list[EpisodeSeed] = []
    for r in range(max((len(v) for v in by_family.values()), default=0)):
        out += [by_family[f][r] for f in FAMILY_ORDER if r < len(by_family[f])]
    return out


def demo_subset(seeds: list[EpisodeSeed], n: int) -> list[EpisodeSeed]:
    """First `n` seeds taking families in turn (FAMILY_ORDER), keeping each family's order."""
    queues = {f: [s for s in seeds if s.source_family == f] for f in FAMILY_ORDER}
    out: list[EpisodeSeed] = []
    while len(out) < min(n, len(seeds)):
        for f in FAMILY_ORDER:
            if queues[f] and len(out) < n:
                out.append(queues[f].pop(0))
    return out


# ---------------------------------------------------------------- seed text
TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "intro": "{time}. {place}.", "you": "You are {name}: {desc}. Right now: {cond}.",
        "here": "Here with you: {names}.", "away": "Elsewhere: {names}.", "recent": "{fact}",
        "talk": "Speak to {npc} about what is on your mind.",
        "ask": "Ask {npc} plainly what is really going on.",
        "go": "Go to {loc} to find {npc}.",
        "think": "Step aside and think over your situation alone.",
        "call": "Send for {npc} and ask them to join you.",
        "sep": ", ",
    },
    "nb": {
        "intro": "{time}. {place}.", "you": "Du er {name}: {desc}. Akkurat nå: {cond}.",
        "here": "Her sammen med deg: {names}.", "away": "Andre steder: {names}.", "recent": "{fact}",
        "talk": "Snakk med {npc} om det som ligger deg på hjertet.",
        "ask": "Spør {npc} rett ut hva som egentlig foregår.",
        "go": "Gå dit {npc} er: {loc}.",
        "think": "Trekk deg litt tilbake og tenk over situasjonen alene.",
        "call": "Send bud etter {npc} og be om å få snakke med vedkommende.",
        "sep": ", ",
    },
    "ru": {
        "intro": "{time}. {place}.", "you": "Вы — {name}: {desc}. Сейчас: {cond}.",
        "here": "Рядом с вами: {names}.", "away": "В другом месте: {names}.", "recent": "{fact}",
        "talk": "Обратиться к собеседнику: «{npc}, мне нужно с вами поговорить».",
        "ask": "Спросить прямо: «{npc}, что здесь на самом деле происходит?»",
        "go": "Отправиться туда, где сейчас {npc}: {loc}.",
        "think": "Отойти в сторону и наедине обдумать своё положение.",
        "call": "Послать за собеседником: «Пусть {npc} придёт сюда!»",
        "sep": ", ",
    },
    "sv": {
        "intro": "{time}. {place}.", "you": "Du är {name}: {desc}. Just nu: {cond}.",
        "here": "Här med dig: {names}.", "away": "På annat håll: {names}.", "recent": "{fact}",
        "talk": "Tala med {npc} om det som ligger dig på hjärtat.",
        "ask": "Fråga {npc} rakt ut vad som egentligen pågår.",
        "go": "Gå dit där {npc} är: {loc}.",
        "think": "Dra dig undan och tänk igenom din situation i ensamhet.",
        "call": "Skicka bud efter {npc} och be att få tala med hen.",
        "sep": ", ",
    },
    "zh": {
        "intro": "{time}。{place}", "you": "你是{name}：{desc}此刻：{cond}",
        "here": "和你在一起的有：{names}。", "away": "不在这里的有：{names}。", "recent": "{fact}",
        "talk": "找{npc}谈谈你的心事。",
        "ask": "直接问{npc}：到底发生了什么事？",
        "go": "去{loc}找{npc}。",
        "think": "独自走到一旁，好好想想眼下的处境。",
        "call": "派人去请{npc}过来说话。",
        "sep": "、",
    },
}


def _tmpl(language: str) -> dict[str, str]:
    if language not in TEMPLATES:
        raise SeedSelectionError(f"no opening templates for language {language!r} (have {sorted(TEMPLATES)})")
    return TEMPLATES[language]


def _end(text: str, language: str) -> str:
    text = text.strip()
    return text.rstrip("。.") if language != "zh" else text


def make_seed(world: InitialWorld, cand: Candidate, seed_id: str, seed: int,
              schedule_length: int = PAPER_HORIZON) -> EpisodeSeed:
    t = _tmpl(world.language)
    by_id = {c.id: c for c in world.characters}
    npc_ids = [i for i in cand.cast if i != cand.player]
    rels = world.relationships_within(cand.cast)
    player = by_id[cand.player]

    def tie(npc: str) -> int:
        return max((r.weight for r in rels if {r.a, r.b} == {npc, cand.player}), default=0)

    # NPC order: those in the player's place first, then strongest tie, then world order (deterministic)
    npc_ids.sort(key=lambda i: (by_id[i].location != player.location, -tie(i), cand.cast.index(i)))
    cast = [SeedCharacter(**player.model_dump(), role="player")]
    cast += [SeedCharacter(**by_id[i].model_dump(), role="npc") for i in npc_ids]

    keep = set(cand.cast)
    facts = [f for f in world.facts if not f.about or keep & set(f.about)]
    locations = list(world.locations)
    if len(locations) > MAX_LOCATIONS_KEPT:
        locations = [l for l in locations if any(l in c.location or c.location in l for c in cast)]

    here = [by_id[i].name for i in npc_ids if by_id[i].location == player.location]
    away = [i for i in npc_ids if by_id[i].location != player.location]
    parts = [t["intro"].format(time=world.time.label, place=_end(world.setting, world.language)),
             t["you"].format(name=player.name, desc=_end(player.description, world.language),
                             cond=_end(player.condition, world.language))]
    if here:
        parts.append(t["here"].format(names=t["sep"].join(here)))
    if away:
        parts.append(t["away"].format(names=t["sep"].join(by_id[i].name for i in away)))
    recent = [f for f in facts if f.id.startswith(("recent_", "last_line"))]
    if recent:
        parts.append(t["recent"].format(fact=recent[-1].text))
    joiner = "" if world.language == "zh" else " "
    opening = joiner.join(p.strip() for p in parts if p.strip())

    first, second = by_id[npc_ids[0]].name, by_id[npc_ids[1]].name
    if away:
        go_npc = by_id[away[0]]
        if go_npc.location in world.locations:  # a named place: go there
            third = t["go"].format(loc=_end(go_npc.location, world.language), npc=go_npc.name)
        else:  # off stage somewhere unnamed (DraCor): have them called in
            third = t["call"].format(npc=go_npc.name)
    else:
        third = t["think"]
    actions = [t["talk"].format(npc=first), t["ask"].format(npc=second), third]

    rng = random.Random(int(_sha(seed, seed_id, "choice_schedule")[:16], 16))
    schedule = [rng.randrange(3) for _ in range(schedule_length)]
    return EpisodeSeed(
        seed_id=seed_id, world_id=world.world_id, world_title=world.title, source_family=world.source_family,
        language=world.language, player_id=cand.player, npc_ids=npc_ids, cast=cast,
        relationships=rels, facts=facts, locations=locations, setting=world.setting, time=world.time,
        opening=opening, initial_actions=actions, choice_schedule=schedule,
        selection={"n_edges": cand.n_edges, "density": round(cand.n_edges / 10, 2), "density_bin": cand.density_bin,
                   "n_focus_in_cast": cand.n_focus, "selection_seed": seed},
    )
