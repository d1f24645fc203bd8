"""Story pipelines through the real client with a scripted backend: step order, shared
context, ablation, short-story regeneration and recorded failures; plus the ideas file."""
from __future__ import annotations

import json

import pytest
import yaml

from wse_platform.config import DATA_DIR, settings_from_dict
from wse_platform.endings.pipelines import (IdeasError, PipelineOptions, load_ideas, pipeline_steps, run_pipeline,
                                            story_rows)
from wse_platform.llm import LLMClient, ScriptedBackend

LONG_STORY = "Once the tide turned, Ines climbed the stairs. " * 10  # 470 characters
PLAN = json.dumps({"beats": [
    {"narrative_function": f"fn{i}", "revealed": f"rev{i}", "withheld": f"wh{i}",
     "tension_mechanism": f"tm{i}", "stakes": f"st{i}"} for i in range(4)]})
REF_BEATS = json.dumps({"beats": [{"action": f"refact{i}", "technique": f"reftech{i}", "memorable": f"refmem{i}"}
                                  for i in range(7)]})
ADAPTED = json.dumps({"beats": [{"action": f"newact{i}", "technique": f"newtech{i}", "memorable": f"newmem{i}"}
                                for i in range(7)]})


@pytest.fixture
def ideas():
    loaded, root = load_ideas(DATA_DIR / "story_ideas.yaml")
    return loaded, root


def _client(tmp_path, script):
    settings = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "models": {}})
    backend = ScriptedBackend(script)
    return LLMClient(settings, backends={"gen": backend}, progress=False), backend


def _user(call) -> str:
    return call.messages[-1]["content"]


def _opts(**kw):
    return PipelineOptions(model="gen", **kw)


def test_shipped_ideas_file(ideas):
    loaded, root = ideas
    assert len(loaded) >= 12
    assert len({i.id for i in loaded}) == len(loaded)
    modes = {i.reference.mode for i in loaded}
    assert modes == {"title", "full_text"}  # both warm-up modes are exercised
    for i in loaded:
        if i.reference.mode == "full_text":
            assert (root / i.reference.file).is_file()


def test_bad_ideas_file_names_file_idea_and_field(tmp_path):
    p = tmp_path / "ideas.yaml"
    p.write_text(yaml.safe_dump({"ideas": [
        {"id": "ok", "genre": "g", "characters": ["a"], "setting": "s"},
        {"id": "broken", "characters": ["a"], "setting": "s"}]}), encoding="utf-8")
    with pytest.raises(IdeasError) as err:
        load_ideas(p)
    msg = str(err.value)
    assert str(p) in msg and "ideas.1.genre" in msg and "'broken'" in msg


def test_vanilla_writes_from_the_idea(tmp_path, ideas):
    client, backend = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    [ctx] = run_pipeline(client, ideas[0][:1], "vanilla", _opts(), reference_root=ideas[1])
    assert [c.role for c in backend.calls] == ["endings.story_vanilla"]
    assert "Genre: literary mystery" in _user(backend.calls[0])
    assert ctx.story == LONG_STORY.strip() and ctx.failure is None


def test_beats_plan_then_story_and_the_plan_reaches_the_writer(tmp_path, ideas):
    client, backend = _client(tmp_path, {"endings.beats_plan": PLAN, "endings.story_from_beats": LONG_STORY})
    [ctx] = run_pipeline(client, ideas[0][:1], "beats", _opts(), reference_root=ideas[1])
    assert [c.role for c in backend.calls] == ["endings.beats_plan", "endings.story_from_beats"]
    plan_prompt, write_prompt = _user(backend.calls[0]), _user(backend.calls[1])
    assert "Ines" in plan_prompt and "Ines" in write_prompt  # the idea is in every step
    assert "tension mechanism: tm3" in write_prompt and "withheld: wh0" in write_prompt
    assert backend.calls[0].json_schema is not None  # the plan is schema-constrained JSON
    assert [s.step for s in ctx.steps] == ["plan", "write"]
    assert ctx.beats[2]["narrative_function"] == "fn2"


def test_warmup_extract_adapt_write_threads_the_context(tmp_path, ideas):
    loaded, root = ideas
    full = next(i for i in loaded if i.reference.mode == "full_text" and i.reference.title == "The Story of an Hour")
    titled = next(i for i in loaded if i.reference.mode == "title")
    client, backend = _client(tmp_path, {"endings.warmup_extract": REF_BEATS, "endings.warmup_adapt": ADAPTED,
                                         "endings.story_from_beats": LONG_STORY})
    contexts = run_pipeline(client, [full, titled], "warmup_beats", _opts(), reference_root=root)
    roles = [c.role for c in backend.calls]
    assert roles == ["endings.warmup_extract"] * 2 + ["endings.warmup_adapt"] * 2 + ["endings.story_from_beats"] * 2
    ext_full, ext_title = _user(backend.calls[0]), _user(backend.calls[1])
    assert "But Richards was too late." in ext_full            # full-text mode gives the story
    assert titled.reference.title in ext_title and "not given here" in ext_title
    adapt = _user(backend.calls[2])
    assert "action: refact6" in adapt and full.genre in adapt  # reference beats + idea
    write = _user(backend.calls[4])
    assert "newact0" in write and "refact0" not in write       # the adapted beats, not the reference's
    rows = story_rows(contexts, "gen:gen:warmup_beats", "gen", "warmup_beats", same_model_judge=False)
    assert rows[0]["reference_mode"] == "full_text" and rows[1]["reference_mode"] == "title"
    assert json.loads(rows[0]["beats_json"])[0]["action"] == "newact0"
    assert json.loads(rows[0]["reference_beats_json"])[0]["action"] == "refact0"
    assert rows[0]["included"] and rows[0]["story_id"] == f"gen:gen:warmup_beats/{full.id}"


def test_ablation(tmp_path, ideas):
    assert pipeline_steps("beats", ["plan"]) == ("write",)
    assert pipeline_steps("warmup_beats", ["adapt"]) == ("extract", "write")
    assert pipeline_steps("warmup_beats", ["extract", "adapt"]) == ("write",)
    with pytest.raises(ValueError, match="needs step 'extract'"):
        pipeline_steps("warmup_beats", ["extract"])
    with pytest.raises(ValueError, match="no step"):
        pipeline_steps("vanilla", ["plan"])
    with pytest.raises(ValueError, match="cannot be ablated"):
        pipeline_steps("beats", ["write"])
    # beats without its plan = the vanilla prompt
    client, backend = _client(tmp_path, {"endings.story_vanilla": LONG_STORY})
    run_pipeline(client, ideas[0][:1], "beats", _opts(), ablate=["plan"], reference_root=ideas[1])
    assert [c.role for c in backend.calls] == ["endings.story_vanilla"]
    # warmup without adapt: the story follows the reference's own beats
    client, backend = _client(tmp_path, {"endings.warmup_extract": REF_BEATS, "endings.story_from_beats": LONG_STORY})
    run_pipeline(client, ideas[0][:1], "warmup_beats", _opts(), ablate=["adapt"], reference_root=ideas[1])
    assert [c.role for c in backend.calls] == ["endings.warmup_extract", "endings.story_from_beats"]
    assert "refact3" in _user(backend.calls[1])


def test_short_story_is_discarded_and_regenerated(tmp_path, ideas):
    client, backend = _client(tmp_path, {"endings.story_vanilla": ["Too short.", "x" * 199, LONG_STORY]})
    [ctx] = run_pipeline(client, ideas[0][:1], "vanilla", _opts(base_seed=10), reference_root=ideas[1])
    assert len(backend.calls) == 3
    assert ctx.story == LONG_STORY.strip()
    assert ctx.discarded_lengths == [10, 199]
    # each regeneration is a new request (else the cache would replay the short story)
    assert [c.sampling.seed for c in backend.calls][1:] == [11, 12]


def test_always_short_becomes_a_recorded_failure(tmp_path, ideas):
    client, backend = _client(tmp_path, {"endings.story_vanilla": "Tiny."})
    contexts = run_pipeline(client, ideas[0][:2], "vanilla", _opts(max_story_attempts=2), reference_root=ideas[1])
    assert len(backend.calls) == 4  # 2 ideas × 2 attempts
    for ctx in contexts:
        assert ctx.story is None and ctx.failure["error_kind"] == "story_too_short"
    row = story_rows(contexts, "gen:gen:vanilla", "gen", "vanilla", same_model_judge=True)[0]
    assert row["included"] is False and row["text"] is None and row["same_model_judge"] is True
    assert json.loads(row["failure_json"])["step"] == "write"


def test_invalid_plan_stops_that_idea_only(tmp_path, ideas):
    def script(call):
        if call.role == "endings.beats_plan":
            return "not json" if "Ines" in _user(call) else PLAN
        return LONG_STORY
    client, backend = _client(tmp_path, script)
    bad, good = run_pipeline(client, ideas[0][:2], "beats", _opts(), reference_root=ideas[1])
    assert bad.failure["step"] == "plan" and bad.failure["error_kind"] == "invalid_json" and bad.story is None
    assert good.story == LONG_STORY.strip()
    writes = [c for c in backend.calls if c.role == "endings.story_from_beats"]
    assert len(writes) == 1  # no story is written for the idea whose plan failed
