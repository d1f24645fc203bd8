"""Input files stay inside what the config names, are regular files, and are bounded (issue 23, item 10).

Found: an ideas file's `reference.file` that was absolute or climbed out with `../` sent
/etc/hostname to the model; a symlink in a stories folder was read and sent; an excluded input's
text was stored in `endings_stories.text`; a FIFO as an ideas, prompt or corpus file hung the
command; a 2 GB input was read whole; a 20,000-row JSONL corpus with `sample: 5` ran the prose
check on every row. All readers now go through `wse_platform/inputs.py`.
"""
from __future__ import annotations

import json
import os
import threading

import pytest
import yaml

from wse_platform.endings import corpus as corpus_mod
from wse_platform.endings.corpus import load_corpus, story_rows
from wse_platform.endings.ideas import IdeasError, load_ideas

META = {"title": "T", "author": "A", "source": "S", "license": "L"}
HANG_S = 10


def _prose(n: int, tag: str = "") -> str:
    return " ".join(f"The keeper {tag}counted boat number {i} as it passed the harbour wall at dusk." for i in range(n))


def _no_hang(fn, fifo):
    """Run `fn` in a thread; if it is still blocked after HANG_S, unblock the FIFO (open it for
    writing, then close it) and fail: the reader must never wait on a pipe."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            box["error"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_S)
    if t.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(HANG_S)
        pytest.fail(f"reading {fifo} blocked on the FIFO for {HANG_S} s")
    return box


def _ideas_with_reference(tmp_path, file: str):
    folder = tmp_path / "ideas"
    folder.mkdir(exist_ok=True)
    p = folder / "ideas.yaml"
    p.write_text(yaml.safe_dump({"ideas": [{"id": "a", "text": "An idea.",
                                            "reference": {"title": "R", "file": file}}]}), encoding="utf-8")
    return p


# ---- containment -----------------------------------------------------------------------------

def test_reference_file_absolute_is_refused_naming_it(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hostname-secret", encoding="utf-8")
    with pytest.raises(IdeasError) as err:
        load_ideas(_ideas_with_reference(tmp_path, str(secret)))
    assert "reference.file" in str(err.value) and str(secret) in str(err.value) and "absolute" in str(err.value)


def test_reference_file_climbing_out_is_refused_naming_it(tmp_path):
    (tmp_path / "secret.txt").write_text("hostname-secret", encoding="utf-8")
    with pytest.raises(IdeasError) as err:
        load_ideas(_ideas_with_reference(tmp_path, "../secret.txt"))
    msg = str(err.value)
    assert "reference.file" in msg and "outside" in msg and str(tmp_path / "secret.txt") in msg, msg


def test_reference_file_symlink_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.txt").write_text("hostname-secret", encoding="utf-8")
    p = _ideas_with_reference(tmp_path, "ref.txt")
    (p.parent / "ref.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(IdeasError, match="symlink to .*outside"):
        load_ideas(p)
    p = _ideas_with_reference(tmp_path, "refs/ref.txt")        # inside the folder: still read
    (p.parent / "refs").mkdir()
    (p.parent / "refs" / "ref.txt").write_text("A reference. Two sentences.", encoding="utf-8")
    [idea], _ = load_ideas(p)
    assert idea.reference.file == str(p.parent / "refs" / "ref.txt")


def _folder_corpus(tmp_path, files: dict[str, str]):
    folder = tmp_path / "stories"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "corpus.yaml").write_text(yaml.safe_dump({"corpus": "c", "stories": {
        n: META for n in [*files, "leak.txt", "pipe.txt", "huge.txt"]}}), encoding="utf-8")
    return folder


def test_symlink_out_of_a_stories_folder_is_never_read(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:SECRETHASH:19000:0:99999:7:::\n" * 200, encoding="utf-8")
    folder = _folder_corpus(tmp_path, {"ok.txt": _prose(60)})
    (folder / "leak.txt").symlink_to(secret)
    load = load_corpus(folder, min_words=10)
    assert [s.file for s in load.stories] == ["ok.txt"]
    problem = next(p for p in load.problems if p.file == "leak.txt")
    assert "outside" in problem.reason and str(secret) in problem.reason
    assert "SECRETHASH" not in json.dumps(story_rows(load, "human:c", False))


def test_excluded_inputs_store_no_text(tmp_path):
    folder = _folder_corpus(tmp_path, {"ok.txt": _prose(60), "short.txt": _prose(3, "SHORTMARK "),
                                       "binary.txt": "\x01\x02 BINMARK " * 300})
    rows = {r["file"]: r for r in story_rows(load_corpus(folder, min_words=100), "human:c", False)}
    assert rows["ok.txt"]["included"] and rows["ok.txt"]["text"]
    assert not rows["short.txt"]["included"] and rows["short.txt"]["text"] is None
    assert rows["binary.txt"]["exclusion_reason"].startswith("not prose") and rows["binary.txt"]["text"] is None


# ---- regular files only ------------------------------------------------------------------------

def test_fifo_as_ideas_file_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "ideas.yaml"
    os.mkfifo(fifo)
    box = _no_hang(lambda: load_ideas(fifo), fifo)
    assert isinstance(box.get("error"), IdeasError) and "FIFO" in str(box["error"]), box


def test_fifo_as_corpus_file_is_refused_without_hanging(tmp_path):
    from wse_platform.endings.corpus import CorpusError

    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    box = _no_hang(lambda: load_corpus(fifo, "c"), fifo)
    assert isinstance(box.get("error"), CorpusError) and "FIFO" in str(box["error"]), box


def test_fifo_in_a_stories_folder_is_a_named_problem(tmp_path):
    folder = _folder_corpus(tmp_path, {"ok.txt": _prose(60)})
    os.mkfifo(folder / "pipe.txt")
    box = _no_hang(lambda: load_corpus(folder, min_words=10), folder / "pipe.txt")
    load = box["value"]
    assert any(p.file == "pipe.txt" and "FIFO" in p.reason for p in load.problems)


def test_fifo_as_prompt_file_is_refused_without_hanging(tmp_path):
    from wse_platform.prompts import PromptError, clear_cache, get_prompt

    (tmp_path / "endings").mkdir()
    fifo = tmp_path / "endings" / "judge.v9.md"
    os.mkfifo(fifo)
    clear_cache()
    box = _no_hang(lambda: get_prompt("endings.judge", "v9", str(tmp_path)), fifo)
    clear_cache()
    assert isinstance(box.get("error"), PromptError) and "FIFO" in str(box["error"]), box


def test_prompt_file_symlinked_out_of_the_prompts_folder_is_refused(tmp_path):
    from wse_platform.prompts import SHIPPED_DIR, PromptError, clear_cache, get_prompt

    user = tmp_path / "prompts"
    (user / "endings").mkdir(parents=True)
    (user / "endings" / "judge.v1.md").symlink_to(SHIPPED_DIR / "endings" / "judge.v1.md")
    clear_cache()
    try:
        with pytest.raises(PromptError, match="outside"):
            get_prompt("endings.judge", "v1", str(user))
    finally:
        clear_cache()


def test_fifo_as_ncp_spec_is_a_problem_not_a_hang(tmp_path):
    from wse_platform.ncp.spec import load_spec_file

    fifo = tmp_path / "movie1.yaml"
    os.mkfifo(fifo)
    box = _no_hang(lambda: load_spec_file(fifo), fifo)
    spec, problems = box["value"]
    assert spec is None and "FIFO" in problems[0].message


# ---- size ----------------------------------------------------------------------------------------

def test_oversized_inputs_are_refused_before_reading(tmp_path):
    from wse_platform import inputs

    big = tmp_path / "ideas.yaml"
    with big.open("wb") as fh:                      # sparse: no disk space, no read needed
        fh.truncate(inputs.MAX_INPUT_BYTES + 1)
    with pytest.raises(IdeasError) as err:
        load_ideas(big)
    assert "larger than the limit of 64 MiB" in str(err.value) and str(big) in str(err.value)
    folder = _folder_corpus(tmp_path, {"ok.txt": _prose(60)})
    with (folder / "huge.txt").open("wb") as fh:
        fh.truncate(inputs.MAX_INPUT_BYTES + 1)
    load = load_corpus(folder, min_words=10)
    assert any(p.file == "huge.txt" and "larger than the limit" in p.reason for p in load.problems)


# ---- cheap filters first ---------------------------------------------------------------------

def test_large_jsonl_with_a_sample_checks_prose_only_on_the_sample(tmp_path, monkeypatch):
    p = tmp_path / "big.jsonl"
    with p.open("w", encoding="utf-8") as fh:
        for i in range(2000):
            words = 20 if i % 2 else 120           # half of them outside the word range
            fh.write(json.dumps({"id": f"s{i}", "text": _prose(words // 15 + 2, f"n{i} ")}) + "\n")
    calls = []
    real = corpus_mod.prose_problem
    monkeypatch.setattr(corpus_mod, "prose_problem", lambda t: calls.append(1) or real(t))
    load = load_corpus(p, "big", min_words=100, max_words=5000, max_stories=5, seed=3)
    assert len(load.included) == 5 and len(calls) == 5
    kept = [s for s in load.stories if s.text]
    assert kept == load.included                    # only what is kept holds its text
    # a drawn story that is not prose is replaced by a further draw from the same seeded generator
    p = tmp_path / "c.jsonl"
    with p.open("w", encoding="utf-8") as fh:
        for i in range(10):
            text = ("\x01 bad " * 150) if i < 5 else _prose(10, f"n{i} ")
            fh.write(json.dumps({"id": f"s{i}", "text": text}) + "\n")
    load = load_corpus(p, "c", min_words=100, max_words=5000, max_stories=4, seed=1)
    assert len(load.included) == 4 and all(real(s.text) is None for s in load.included)
    again = load_corpus(p, "c", min_words=100, max_words=5000, max_stories=4, seed=1)
    assert [s.story_id for s in again.included] == [s.story_id for s in load.included]   # seeded
