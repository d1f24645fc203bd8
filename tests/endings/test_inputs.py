"""Inputs at the paper's shapes and scale: free-text ideas, JSONL/CSV corpora, the prose check
(issue 14 item 14) and linear-time position selection on a 50k-word story (item 13)."""
from __future__ import annotations

import csv
import json

import pytest
import yaml

from wse_platform.endings.corpus import load_corpus, prose_problem
from wse_platform.endings.ideas import IdeasError, load_ideas
from wse_platform.metrics.endings import join_sentences, select_positions, split_sentences


def _prose(n_sentences: int, tag: str = "") -> str:
    return " ".join(f"The keeper {tag}counted boat number {i} as it passed the harbour wall at dusk."
                    for i in range(n_sentences))


# ---- ideas -------------------------------------------------------------------------------

def test_ideas_are_free_text_with_optional_metadata(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("A reference. It has two sentences.", encoding="utf-8")
    p = tmp_path / "ideas.yaml"
    p.write_text(yaml.safe_dump({"ideas": [
        "Just one sentence of an idea.",
        {"id": "long", "text": "Line one.\n\nA second paragraph with constraints.", "genre": "noir", "source": "me",
         "reference": {"title": "Ref", "file": "ref.txt"}},
        {"id": "old", "genre": "fable", "characters": ["a heron", "an otter"], "setting": "a river"},
    ]}), encoding="utf-8")
    ideas, _ = load_ideas(p)
    assert [i.id for i in ideas] == ["idea_000", "long", "old"]
    assert ideas[0].text == "Just one sentence of an idea." and ideas[0].metadata == {}
    assert ideas[1].render() == "Line one.\n\nA second paragraph with constraints."   # verbatim
    assert ideas[1].metadata == {"genre": "noir", "source": "me"}
    assert ideas[1].reference.mode == "full_text" and ideas[1].reference.file == str(ref)
    assert ideas[2].text == "Genre: fable\nCharacters: a heron; an otter\nSetting: a river"


def test_ideas_jsonl_and_errors(tmp_path):
    p = tmp_path / "ideas.jsonl"
    p.write_text(json.dumps({"id": "eq03", "prompt": "Write a story about an actor in a bookshop."}) + "\n"
                 + json.dumps("A bare string idea.") + "\n", encoding="utf-8")
    ideas, _ = load_ideas(p)
    assert [(i.id, i.text) for i in ideas] == [("eq03", "Write a story about an actor in a bookshop."),
                                              ("idea_001", "A bare string idea.")]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"ideas": [{"id": "x", "text": "ok"}, {"id": "x", "text": "dup"}]}),
                   encoding="utf-8")
    with pytest.raises(IdeasError, match=r"ideas\[1\]\.id: duplicate id 'x'"):
        load_ideas(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"ideas": [{"id": "e", "genre": ""}]}), encoding="utf-8")
    with pytest.raises(IdeasError, match="'e'.*empty idea"):
        load_ideas(empty)


# ---- corpora ------------------------------------------------------------------------------

def test_jsonl_corpus_with_columns_and_metadata(tmp_path):
    p = tmp_path / "tmas.jsonl"
    recs = [{"sid": f"t{i}", "story": _prose(60, f"n{i} "), "writer": f"A{i}", "name": f"T{i}", "split": "test"}
            for i in range(3)]
    recs.append({"sid": "t3", "story": ""})
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\nnot json\n", encoding="utf-8")
    load = load_corpus(p, "tmas", "amateur (curated)", 500, 5000,
                       columns={"text_column": "story", "id_column": "sid", "title_column": "name",
                                "author_column": "writer", "metadata_columns": ["split"]})
    assert [s.story_id for s in load.stories] == ["human:tmas/t0", "human:tmas/t1", "human:tmas/t2"]
    s0 = load.stories[0]
    assert (s0.title, s0.author, s0.quality_tier, s0.metadata, s0.included) == \
        ("T0", "A0", "amateur (curated)", {"split": "test"}, True)
    reasons = sorted(p.reason for p in load.problems)
    assert reasons == ["line 5: not JSON (Expecting value)", "no text in column 'story'"]


def test_csv_corpus_and_seeded_sample(tmp_path):
    p = tmp_path / "wp.csv"
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["id", "text", "prompt"])
        w.writeheader()
        for i in range(10):
            w.writerow({"id": f"w{i}", "text": _prose(50 + i, f"n{i} "), "prompt": f"prompt {i}"})
    a = load_corpus(p, "wp", "amateur", 500, 5000, 4, seed=1, columns={"id_column": "id",
                                                                         "metadata_columns": ["prompt"]})
    b = load_corpus(p, "wp", "amateur", 500, 5000, 4, seed=1, columns={"id_column": "id"})
    assert [s.story_id for s in a.included] == [s.story_id for s in b.included] and len(a.included) == 4
    assert a.stories[0].metadata == {"prompt": "prompt 0"}
    assert sum(1 for s in a.stories if s.exclusion_reason == "not in the random sample of 4 (seed 1)") == 6


def test_non_prose_is_rejected_with_the_reason_stored(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "nul.txt").write_bytes(b"\x00" * 605 + b" " + b"\x00 " * 604)   # valid UTF-8, 605+ "words"
    (folder / "list.txt").write_text(" ".join(f"item{i}" for i in range(700)), encoding="utf-8")
    (folder / "ok.txt").write_text(_prose(60), encoding="utf-8")
    meta = {"title": "T", "author": "A", "source": "S", "license": "L"}
    (folder / "corpus.yaml").write_text(yaml.safe_dump({"corpus": "c", "stories": {
        n: meta for n in ("nul.txt", "list.txt", "ok.txt")}}), encoding="utf-8")
    load = load_corpus(folder)
    by = {s.file: s for s in load.stories}
    assert by["nul.txt"].included is False
    assert by["nul.txt"].exclusion_reason.startswith("not prose: ") and "U+0000" in by["nul.txt"].exclusion_reason
    assert by["list.txt"].exclusion_reason == "not prose: 1 sentence(s), at least 2 needed"
    assert by["ok.txt"].included and load.problems == []
    assert prose_problem("Tabs\tand\nnewlines are fine. So is this.") is None
    assert prose_problem("12345. 67890.") == "no letters"


# ---- positions in linear time (issue 14 item 13) -----------------------------------------

class CountingTokenizer:
    """Whitespace tokens; records how many characters it was asked to tokenise."""

    def __init__(self, with_offsets: bool):
        self.chars = 0
        self.calls = 0
        if with_offsets:
            self.token_ends = self._ends

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return len(text.split())

    def _ends(self, text: str) -> list[int]:
        self.calls += 1
        self.chars += len(text)
        ends, pos = [], 0
        for word in text.split(" "):
            pos += len(word)
            if word:
                ends.append(pos)
            pos += 1
        return ends


@pytest.mark.parametrize("with_offsets", [True, False])
def test_position_selection_is_linear_on_a_50k_word_story(with_offsets):
    sentences = split_sentences(_prose(3700))            # 3,700 sentences, 51,800 words
    joined = join_sentences(sentences)
    assert len(joined.split()) > 50_000
    tok = CountingTokenizer(with_offsets)
    kept = select_positions(sentences, tok)
    # every prefix re-tokenised (the old way) would read ~ n/2 × the story: 1,700 × 300k characters
    assert tok.chars <= 2 * len(joined)
    assert tok.calls == (1 if with_offsets else len(sentences))
    # and the shares are exactly the per-prefix counts
    for p in kept[:: 500]:
        assert p.n_tokens_revealed == len(join_sentences(sentences[: p.index]).split())
        assert p.n_tokens_total == len(joined.split())
    assert 0.10 <= kept[0].revealed_share and kept[-1].revealed_share <= 0.99


def test_embedded_tokenizer_offsets_match_prefix_counts():
    pytest.importorskip("llama_cpp")
    from wse_platform.config import load_settings
    from wse_platform.endings.tokens import token_counter

    settings = load_settings()
    tok = token_counter(settings, settings.endings.forecaster)
    sentences = split_sentences("Nell kept the bakery open. “Will he come?” she asked — twice. Café lights, "
                                "naïve hopes: 3.5 hours later he did. The end came quietly, with rain.")
    ends = tok.token_ends(join_sentences(sentences))
    assert ends is not None and len(ends) == tok(join_sentences(sentences))
    for p in select_positions(sentences, tok, min_share=0.0, max_share=1.0, min_sent_words=0):
        direct = tok(join_sentences(sentences[: p.index]))
        assert abs(p.n_tokens_revealed - direct) <= 1    # one tokenisation vs each prefix on its own
