"""Corpus loader: bad files reported by name and skipped, word-range filter with reasons."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wse_platform.config import DATA_DIR
from wse_platform.endings.corpus import CorpusError, count_words, load_corpus

SHIPPED = DATA_DIR / "stories" / "public_domain"
META = {"title": "T", "author": "A", "source": "S", "license": "L"}


def _words(n: int) -> str:
    """n whitespace words of prose: sentences of 10 words ("W0 w1 ... w9. W10 ...")."""
    return " ".join(("W" if i % 10 == 0 else "w") + str(i) + ("." if i % 10 == 9 else "") for i in range(n))


def _corpus(tmp_path: Path, files: dict[str, bytes], entries: dict[str, dict]) -> Path:
    folder = tmp_path / "c"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "corpus.yaml").write_text(yaml.safe_dump(
        {"corpus": "mine", "quality_tier": "amateur", "stories": entries}), encoding="utf-8")
    return folder


def test_shipped_corpus_loads_every_file_and_filters_by_words():
    load = load_corpus(SHIPPED)
    assert load.problems == []
    assert load.corpus == "public_domain" and load.quality_tier == "human"
    by_file = {s.file: s for s in load.stories}
    assert len(by_file) == 8
    # word counts as in data/SOURCES.md (whitespace words)
    assert by_file["story_of_an_hour.txt"].n_words == 1010
    assert by_file["the_overcoat.txt"].n_words == 11013
    for name in ("the_overcoat.txt", "lady_with_the_dog.txt", "yellow_wallpaper.txt"):
        s = by_file[name]
        assert not s.included and s.exclusion_reason.startswith("too long")
    assert {s.file for s in load.included} == {
        "araby.txt", "gift_of_the_magi.txt", "story_of_an_hour.txt", "tell_tale_heart.txt", "the_necklace.txt"}
    assert by_file["araby.txt"].title == "Araby" and by_file["araby.txt"].author == "James Joyce"


def test_word_range_is_configurable_and_reasons_name_the_limit():
    load = load_corpus(SHIPPED, min_words=1500, max_words=2100)
    by_file = {s.file: s for s in load.stories}
    assert by_file["story_of_an_hour.txt"].exclusion_reason == "too short: 1010 words < min_words 1500"
    assert by_file["araby.txt"].exclusion_reason == "too long: 2329 words > max_words 2100"
    assert {s.file for s in load.included} == {"gift_of_the_magi.txt", "tell_tale_heart.txt"}


def test_bad_files_are_reported_by_name_and_skipped(tmp_path):
    folder = _corpus(tmp_path, {
        "good.txt": _words(600).encode(),
        "latin1.txt": "caf\xe9 ".encode("latin-1") * 600,
        "empty.txt": b"  \n\n ",
        "nometa.txt": _words(600).encode(),
        "partial.txt": _words(600).encode(),
        "short.txt": _words(20).encode(),
    }, {
        "good.txt": META, "latin1.txt": META, "empty.txt": META, "short.txt": META,
        "partial.txt": {"title": "P", "author": ""},
        "ghost.txt": META,
    })
    load = load_corpus(folder)
    problems = {p.file: p.reason for p in load.problems}
    assert set(problems) == {"latin1.txt", "empty.txt", "nometa.txt", "partial.txt", "ghost.txt"}
    assert problems["latin1.txt"].startswith("not UTF-8")
    assert problems["empty.txt"] == "empty file"
    assert "no metadata entry" in problems["nometa.txt"]
    assert "['author', 'source', 'license']" in problems["partial.txt"]
    assert "no such file" in problems["ghost.txt"]
    # the good file survives the bad ones; the short one is kept as an excluded row
    assert [(s.file, s.included) for s in load.stories] == [("good.txt", True), ("short.txt", False)]
    good = load.stories[0]
    assert (good.story_id, good.corpus, good.quality_tier, good.n_words) == ("human:mine/good", "mine", "amateur", 600)


def test_config_name_and_tier_override_metadata(tmp_path):
    folder = _corpus(tmp_path, {"a.txt": _words(700).encode()}, {"a.txt": META})
    load = load_corpus(folder, name="renamed", quality_tier="pro")
    assert load.stories[0].story_id == "human:renamed/a" and load.stories[0].quality_tier == "pro"


def test_cap_is_a_seeded_random_sample_not_the_shortest(tmp_path):
    names = [f"s{i:02d}.txt" for i in range(12)]
    folder = _corpus(tmp_path, {n: _words(600 + 50 * i).encode() for i, n in enumerate(names)},
                     {n: META for n in names})
    picks = {seed: frozenset(s.file for s in load_corpus(folder, max_stories=3, seed=seed).included)
             for seed in range(8)}
    assert all(len(p) == 3 for p in picks.values())
    assert picks[0] == frozenset(s.file for s in load_corpus(folder, max_stories=3, seed=0).included)  # fixed seed
    assert len(set(picks.values())) > 1                         # the seed matters
    assert any(p != {"s00.txt", "s01.txt", "s02.txt"} for p in picks.values())   # never "the shortest n"
    load = load_corpus(folder, max_stories=3, seed=0)
    out = [s for s in load.stories if not s.included]
    assert len(out) == 9 and all(s.exclusion_reason == "not in the random sample of 3 (seed 0)" for s in out)


def test_missing_metadata_file_or_folder_is_a_clear_error(tmp_path):
    (tmp_path / "x.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(CorpusError, match="corpus.yaml"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_count_words_is_whitespace_split():
    assert count_words("a  b\n\nc\td ") == 4
