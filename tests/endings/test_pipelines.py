"""Story pipelines through the real client with a scripted backend, asserting on the requests
the backend receives: the vanilla single user turn, the threaded warm-up / adaptation / writing
conversation, the seeded reference draw, ablation, short-story regeneration, the word-range
filter on generated stories, and the prompts-directory override."""
from __future__ import annotations

import json

import pytest

from wse_platform.config import DATA_DIR, settings_from_dict
from wse_platform.endings.ideas import Reference, StoryIdea, load_ideas
from wse_platform.endings.pipelines import (PipelineOptions, draw_reference, pipeline_steps, run_pipeline,
                                            story_rows)
from wse_platform.llm import LLMClient, ScriptedBackend

LONG_STORY = "Once the tide turned, Ines climbed the stairs. " * 10  # 470 characters, 80 words
WARMUP = "Beat 1: the action... the technique... why it stays. The trick: withholding."
PLAN = "1. Function: setup. Revealed: the torn page. Withheld: who tore it. Tension: a question. Stakes: rising."
IDEA = StoryIdea("lh", "A keeper and her nephew close a lighthouse; one logbook page is missing.")
POOL = (Reference("The Lottery", "Shirley Jackson"), Reference("The Yellow Wallpaper", "Charlotte Perkins Gilman"),
        Reference("Omelas", "Ursula K. Le Guin"))


def _client(tmp_path, script):
    settings = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "models": {}})
    backend = ScriptedBackend(script)
    return LLMClient(settings, backends={"gen": backend}, progress=False), backend


def _opts(**kw):
    return PipelineOptions(model="gen", reference_pool=kw.pop("reference_pool", POOL), set_key="gen:gen:x", **kw)


def test_shipped_ideas_are_free_text():
    ideas, _ = load_ideas(DATA_DIR / "story_ideas.yaml")
    assert len(ideas) >= 10 and len({i.id for i in ideas}) == len(ideas)
    assert ideas[0].id == "lighthouse_ledger" and "Nobody dies on the page." in ideas[0].text
    assert ideas[0].metadata == {"genre": "literary mystery"}        # structured fields = metadata only
    assert any(i.id.startswith("idea_") and not i.metadata for i in ideas)   # a plain-string idea


def test_vanilla_is_one_user_turn_with_the_idea_verbatim(tmp_path):
    client, backend = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    [ctx] = run_pipeline(client, [IDEA], "vanilla", _opts())
    [call] = backend.calls
    assert call.role == "endings.story_vanilla"
    assert call.messages == [{"role": "user", "content": IDEA.text}]     # no system message, nothing added
    assert ctx.story == LONG_STORY.strip() and ctx.failure is None


def test_warmup_adapt_write_is_one_threaded_conversation(tmp_path):
    client, backend = _client(tmp_path, {"endings.warmup_title": WARMUP, "endings.warmup_adapt": PLAN,
                                         "endings.story_from_beats": LONG_STORY})
    [ctx] = run_pipeline(client, [IDEA], "warmup_beats", _opts(plan_beats=6))
    warm, adapt, write = backend.calls
    assert [c.role for c in backend.calls] == ["endings.warmup_title", "endings.warmup_adapt",
                                               "endings.story_from_beats"]
    # step 0: free text over the beat questions and the narrative-trick question, title mode
    [w] = warm.messages
    assert w["role"] == "user" and ctx.reference.label in w["content"]
    for must in ("7 scene-level beats", "concrete action", "narrative technique", "memorable", "narrative trick"):
        assert must in w["content"]
    assert warm.json_schema is None                                  # free text, not JSON
    # step 1: the thread so far, then the adaptation turn (thick plan fields, exact beat count)
    assert adapt.messages[:2] == [w, {"role": "assistant", "content": WARMUP}]
    a = adapt.messages[2]["content"]
    assert WARMUP in a and IDEA.text in a and "exactly 6 beats" in a
    for must in ("narrative function", "told", "held back", "tension", "stakes"):
        assert must in a
    # step 2: system stresses tension, then the whole thread, then the writing turn with the plan
    assert write.messages[0]["role"] == "system" and "tension" in write.messages[0]["content"]
    assert write.messages[1:5] == [*adapt.messages, {"role": "assistant", "content": PLAN}]
    assert PLAN in write.messages[5]["content"] and "without any commentary" in write.messages[5]["content"]
    assert len(write.messages) == 6
    rows = story_rows([ctx], "gen:gen:warmup_beats", "gen", "warmup_beats", same_model_judge=False, min_words=10)
    assert json.loads(rows[0]["beats_json"]) == PLAN and json.loads(rows[0]["reference_beats_json"]) == WARMUP
    assert rows[0]["reference_mode"] == "title" and rows[0]["included"]


def test_reference_is_drawn_per_story_with_a_seed(tmp_path):
    ids = [f"i{n}" for n in range(30)]
    a = [draw_reference(POOL, 7, "gen:m:warmup_beats", i) for i in ids]
    assert a == [draw_reference(POOL, 7, "gen:m:warmup_beats", i) for i in ids]    # reproducible
    assert len({r.title for r in a}) == 3                                          # varies across stories
    assert a != [draw_reference(POOL, 8, "gen:m:warmup_beats", i) for i in ids]    # the seed matters
    # a full-text reference puts the story's text in the warm-up turn
    text_file = tmp_path / "ref.txt"
    text_file.write_text("The river rose. Nobody left the house.", encoding="utf-8")
    client, backend = _client(tmp_path, {"endings.warmup_text": WARMUP, "endings.story_from_beats": LONG_STORY})
    run_pipeline(client, [IDEA], "warmup_beats", _opts(reference_pool=[Reference("R", None, str(text_file))]),
                 ablate=["adapt"])
    assert "The river rose. Nobody left the house." in backend.calls[0].messages[0]["content"]
    assert WARMUP in backend.calls[1].messages[-1]["content"]   # the warm-up beats reach the writer


def test_beats_plan_from_the_idea_alone_then_the_story(tmp_path):
    client, backend = _client(tmp_path, {"endings.beats_plan": PLAN, "endings.story_from_beats": LONG_STORY})
    [ctx] = run_pipeline(client, [IDEA], "beats", _opts())
    plan, write = backend.calls
    assert plan.messages == [{"role": "user", "content": plan.messages[0]["content"]}]
    assert IDEA.text in plan.messages[0]["content"] and "exactly" not in plan.messages[0]["content"]
    assert write.messages[1:3] == [plan.messages[0], {"role": "assistant", "content": PLAN}]
    assert [s.step for s in ctx.steps] == ["plan", "write"] and ctx.plan == PLAN


def test_ablation(tmp_path):
    assert pipeline_steps("beats", ["plan"]) == ("write",)
    assert pipeline_steps("warmup_beats", ["adapt"]) == ("extract", "write")
    assert pipeline_steps("warmup_beats", ["extract", "adapt"]) == ("write",)
    with pytest.raises(ValueError, match="needs step 'extract'"):
        pipeline_steps("warmup_beats", ["extract"])
    with pytest.raises(ValueError, match="no step"):
        pipeline_steps("vanilla", ["plan"])
    with pytest.raises(ValueError, match="cannot be ablated"):
        pipeline_steps("beats", ["write"])
    client, backend = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    run_pipeline(client, [IDEA], "beats", _opts(), ablate=["plan"])
    assert [c.role for c in backend.calls] == ["endings.story_vanilla"]


def test_short_story_is_discarded_and_regenerated(tmp_path):
    client, backend = _client(tmp_path, {"endings.story_vanilla": ["Too short.", "x" * 199, LONG_STORY]})
    [ctx] = run_pipeline(client, [IDEA], "vanilla", _opts(base_seed=10))
    assert len(backend.calls) == 3 and ctx.story == LONG_STORY.strip()
    assert ctx.discarded_lengths == [10, 199]
    assert [c.sampling.seed for c in backend.calls][1:] == [11, 12]


def test_always_short_becomes_a_recorded_failure(tmp_path):
    client, backend = _client(tmp_path, {"endings.story_vanilla": "Tiny."})
    ideas = [IDEA, StoryIdea("b", "Another idea.")]
    contexts = run_pipeline(client, ideas, "vanilla", _opts(max_story_attempts=2))
    assert len(backend.calls) == 4
    row = story_rows(contexts, "gen:gen:vanilla", "gen", "vanilla", same_model_judge=True)[0]
    assert row["included"] is False and row["text"] is None and row["same_model_judge"] is True
    assert json.loads(row["failure_json"])["step"] == "write"


def test_word_range_and_prose_filter_apply_to_generated_stories(tmp_path):
    client, _ = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    [ctx] = run_pipeline(client, [IDEA], "vanilla", _opts())
    [row] = story_rows([ctx], "gen:gen:vanilla", "gen", "vanilla", False, min_words=500, max_words=5000)
    assert row["included"] is False and row["exclusion_reason"] == "too short: 80 words < min_words 500"
    assert row["text"] == LONG_STORY.strip()                       # kept, with the reason
    ctx.story = "\x00" * 300
    [row] = story_rows([ctx], "gen:gen:vanilla", "gen", "vanilla", False, min_words=0)
    assert row["exclusion_reason"].startswith("not prose: 300 control character(s), e.g. U+0000")


def test_prompts_directory_override_replaces_a_prompt(tmp_path):
    override = tmp_path / "my_prompts" / "endings"
    override.mkdir(parents=True)
    (override / "story_vanilla.v1.md").write_text(
        "---\nrole: endings.story_vanilla\nversion: v1\n---\n## system\nHOUSE STYLE.\n\n## user\nIDEA >> ${idea}\n",
        encoding="utf-8")
    client, backend = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    run_pipeline(client, [IDEA], "vanilla", _opts(prompts_dir=str(tmp_path / "my_prompts")))
    assert backend.calls[0].messages == [{"role": "system", "content": "HOUSE STYLE."},
                                         {"role": "user", "content": f"IDEA >> {IDEA.text}"}]
