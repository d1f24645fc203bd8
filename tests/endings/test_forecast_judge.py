"""Forecast request shape, judge anchoring and truncation, the verdict rule, the
same-model refusal, and the prefix-reuse arithmetic."""
from __future__ import annotations

import json

import pytest

from wse_platform.config import ConfigError, settings_from_dict
from wse_platform.endings.forecast import (SplitStory, common_prefix_len, compute_positions, forecast_request,
                                           prefix_reuse_share, run_forecasts)
from wse_platform.endings.judge import judge_config_id, judge_request, parse_verdict, run_judging, truncate_words
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.llm.errors import LLMTransportError
from wse_platform.metrics.endings import whitespace_token_count

# 12 sentences of 10+ words each: every boundary has a long enough last sentence.
SENTENCES = [f"Sentence number {i} tells us that Mara walked further along the quiet shore." for i in range(12)]
TEXT = "\n\n".join(" ".join(SENTENCES[i:i + 3]) for i in range(0, 12, 3))  # 4 paragraphs


def _settings(tmp_path, **endings):
    models = {"f": {"backend": "litellm", "model_id": "openai/f"}, "j": {"backend": "litellm", "model_id": "openai/j"}}
    cfg = {"forecaster": "f", "judge": "j", "k": 3, **endings}
    return settings_from_dict({"cache_dir": str(tmp_path / "cache"), "models": models, "endings": cfg})


def _client(settings, f_script, j_script=None):
    fb, jb = ScriptedBackend(f_script), ScriptedBackend(j_script or {"endings.judge": "Y"})
    return LLMClient(settings, backends={"f": fb, "j": jb}, progress=False), fb, jb


def test_split_story_joins_sentences_with_one_space():
    story = SplitStory.of("s", TEXT)
    assert len(story.spans) == 12
    assert story.so_far(4) == " ".join(SENTENCES[:4])        # the paper's string: no paragraph breaks
    assert "\n" not in story.so_far(4)
    assert story.after(4) == " ".join(SENTENCES[4:]) and story.after(12) == ""
    with pytest.raises(ValueError, match="outside 1..12"):
        story.so_far(13)


def test_forecast_is_one_request_with_n_k_per_position(tmp_path):
    settings = _settings(tmp_path)
    story = SplitStory.of("s1", TEXT)
    # 12 equal sentences: shares 1/12..12/12; [0.1, 0.99] keeps sentences 2..11 → 10 positions, stride 3 → 4
    positions = compute_positions([story], "human:x", whitespace_token_count, 3, "f", "ws")
    assert [p["sentence_index"] for p in positions] == [2, 5, 8, 11]
    assert [p["position"] for p in positions] == [0, 1, 2, 3]
    assert positions[1]["revealed_share"] == pytest.approx(5 / 12)
    client, fb, _ = _client(settings, {"endings.forecast": ["End A.", "End B.", "End C."]})
    rows = run_forecasts(client, [story], positions, "human:x", "f", 3, settings.endings.forecast_sampling)
    assert len(fb.calls) == 4 and all(c.n == 3 for c in fb.calls)
    req = forecast_request(story, 2, 0, "f", 3, settings.endings.forecast_sampling)
    assert req.allow_truncated            # a prediction cut at the 150-token cap is kept, as in the paper
    s = fb.calls[0].sampling
    assert (s.temperature, s.top_p, s.max_tokens) == (1.2, 0.95, 150)
    for call, pos in zip(fb.calls, positions):
        system, user = call.messages[0], call.messages[-1]["content"]
        assert system["role"] == "system" and "story text only" in system["content"]
        assert len(call.messages) == 2
        i = pos["sentence_index"]
        head, so_far = user.split("STORY SO FAR:\n", 1)
        assert so_far == " ".join(SENTENCES[:i])             # the whole story so far, joined by one space
        assert "2 or 3 sentences" in head and "commentary, explanation or preamble" in head
        # the revealed share is counted on that same string
        assert pos["n_tokens_revealed"] == whitespace_token_count(so_far)
    assert len(rows) == 12
    assert [r["prediction"] for r in rows[:3]] == ["End A.", "End B.", "End C."]
    assert {r["sample_index"] for r in rows} == {0, 1, 2} and all(r["llm_call_id"] for r in rows)


def test_k_empty_forecasts_are_k_ns_recorded_per_sample_without_judging(tmp_path):
    settings = _settings(tmp_path)
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 10, "f", "ws")
    assert len(positions) == 1
    # every sample empty: each is its own model failure, counted as an N as the paper counts an empty
    # answer (a provider down is no result at all: LLMTransportError, issue 23 item 7)
    client, fb, jb = _client(settings, {"endings.forecast": ""})
    preds = run_forecasts(client, [story], positions, "human:x", "f", 3, settings.endings.forecast_sampling)
    assert len(preds) == 3 and all(p["sample_error"] == "empty_output" and not p["prediction"] for p in preds)
    assert fb.n_calls == 1                                   # one n=K request, never redrawn
    verdicts = run_judging(client, [story], positions, preds, settings)
    assert jb.n_calls == 0
    assert [v["verdict"] for v in verdicts] == ["N"] * 3


def test_judge_prompt_is_anchored_in_both_blocks_and_continuation_truncated(tmp_path):
    long_tail = " ".join(f"Then Mara counted wave number {i} and said nothing at all." for i in range(300))
    text = SENTENCES[0] + " " + SENTENCES[1] + " " + long_tail  # continuation after sentence 2: 3,300 words
    story = SplitStory.of("s", text)
    req = judge_request(story, 2, 0, 0, "Mara finds the boat.", "j", _settings(tmp_path).endings.judge_sampling)
    system, user = req.messages[0]["content"], req.messages[-1]["content"]
    # the leniency rule of the system prompt
    assert "small details" in system and "order of events" in system
    assert "fundamentally different" in system
    cont = user.split("[CONTINUATION STARTS]\n", 1)[1].split("\n[CONTINUATION ENDS]", 1)[0]
    pred = user.split("[PREDICTION STARTS]\n", 1)[1].split("\n[PREDICTION ENDS]", 1)[0]
    anchor = SENTENCES[1]
    assert user.count(anchor) == 2                                  # the anchor opens both blocks
    assert pred == f"{anchor} Mara finds the boat."
    assert cont.startswith(f"{anchor} Then Mara counted wave number 0 ")
    body = cont[len(anchor) + 1:]
    assert len(body.split()) == 2000                                # truncated to 2,000 words
    assert body.endswith("wave number 181 and said nothing")
    assert user.rstrip().endswith("Verdict:") and "single letter, Y or N" in user   # one-letter cue
    assert req.choices is None and req.n == 1                       # free decoding by default
    assert req.allow_truncated            # the 10-token cap is part of the protocol: the first character decides
    assert (req.sampling.temperature, req.sampling.max_tokens) == (0.0, 10)
    constrained = judge_request(story, 2, 0, 0, "x", "j", _settings(tmp_path).endings.judge_sampling,
                                constrained=True)
    assert constrained.choices == ["Y", "N"]


def test_judge_prompt_states_the_lenient_either_or_rule_and_nothing_stricter(tmp_path):
    """Appendix C.5: Y when ANY of same characters / similar events / matching emotional arc holds;
    details, wording, order do not matter; N only for a fundamentally different outcome. No clause
    asking for the outcome itself to match (stricter than the paper, it lowers every Y-rate)."""
    story = SplitStory.of("s", TEXT)
    req = judge_request(story, 2, 0, 0, "Mara finds the boat.", "j", _settings(tmp_path).endings.judge_sampling)
    system, user = req.messages[0]["content"], req.messages[-1]["content"]
    # the either/or leniency: three alternatives joined by "or", each enough for Y
    assert "the same characters take part, events of a similar kind happen, or the emotional arc is the same" \
        in system
    assert "Say N only when" in system and "say N only when" in user
    assert "similar characters involved, similar kinds of events, or a matching emotional arc" in user
    for text in (system, user):
        low = text.lower()
        assert "core outcome" not in low and "outcome matches" not in low and "what counts is" not in low


def test_constrained_choice_is_opt_in_and_recorded_in_the_judge_id(tmp_path):
    assert judge_config_id(_settings(tmp_path)) == "endings.judge:j:v1:x1"
    s = _settings(tmp_path, judge_constrained_choice=True)
    assert judge_config_id(s) == "endings.judge:j:v1:x1:choice"
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 10, "f", "ws")
    client, _, jb = _client(s, {"endings.forecast": ["End A."]})
    preds = run_forecasts(client, [story], positions, "human:x", "f", 1, s.endings.forecast_sampling)
    run_judging(client, [story], positions, preds, s)
    assert jb.calls[0].choices == ["Y", "N"]


def test_truncate_words_keeps_spacing():
    assert truncate_words("a  b\nc d", 3) == "a  b\nc"
    assert truncate_words("a b", 5) == "a b"


@pytest.mark.parametrize("answer,verdict", [
    (" yes", "Y"), ("y", "Y"), ("No", "N"), ("", "N"), ("Yes!", "Y"), ("  n", "N"), ("Maybe", "N"),
    (None, "N"), ("\nY", "Y"), ("N. Yes", "N"),
])
def test_parse_verdict(answer, verdict):
    assert parse_verdict(answer) == verdict


def test_judging_end_to_end_with_scripted_answers(tmp_path):
    settings = _settings(tmp_path)
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 10, "f", "ws")

    def judge(call):  # answer depends on the prediction in the prompt
        user = call.messages[-1]["content"]
        if "End A." in user:
            return "Y"
        if "End B." in user:
            return "  yes, clearly"   # free decoding: the first-character rule reads Y
        if "End C." in user:
            return "Probably"         # anything not starting with Y is N
        return RuntimeError("judge offline")
    client, _, jb = _client(settings, {"endings.forecast": ["End A.", "End B.", "End C.", "End D."]}, judge)
    preds = run_forecasts(client, [story], positions, "human:x", "f", 4, settings.endings.forecast_sampling)
    with pytest.raises(LLMTransportError):  # a judge offline gives no verdict at all (issue 23 item 7)
        run_judging(client, [story], positions, preds, settings)
    verdicts = run_judging(client, [story], positions, preds[:3], settings)
    assert [v["verdict"] for v in verdicts] == ["Y", "Y", "N"]
    assert [v["choice_fallback"] for v in verdicts] == [False] * 3
    assert verdicts[1]["verdict_raw"] == "  yes, clearly"
    assert {v["judge_config_id"] for v in verdicts} == {"endings.judge:j:v1:x1"}
    assert all(v["same_model_judge"] is False for v in verdicts)


def test_config_refuses_judge_equal_to_forecaster_unless_allowed(tmp_path):
    with pytest.raises(ConfigError, match="judge must be a different model"):
        _settings(tmp_path, judge="f")
    allowed = _settings(tmp_path, judge="f", allow_same_model=True)
    assert allowed.endings.same_model_judge is True
    assert judge_config_id(allowed) == "endings.judge:f:v1:x1"
    assert _settings(tmp_path).endings.same_model_judge is False


def test_prefix_reuse_share_hand_computed():
    # prompts of 10, 14, 20 tokens; position 2 shares 8 with 1, position 3 shares 12 with 2
    assert prefix_reuse_share([10, 14, 20], [0, 8, 12]) == pytest.approx(20 / 44)
    assert prefix_reuse_share([], []) == 0.0
    assert common_prefix_len([1, 2, 3, 4], [1, 2, 9]) == 2
    with pytest.raises(ValueError):
        prefix_reuse_share([1, 2], [0])


@pytest.mark.parametrize("model_seed", [None, 0, 1, 7])
def test_repeats_never_share_a_seed_with_each_other_or_the_model_default(tmp_path, model_seed):
    """Table 7: every repeat draws fresh endings and fresh verdicts. With a model default seed of 1
    (and no role seed) repeat 0 runs with seed 1, so repeat 1 must not also run with seed 1 (that
    request would be repeat 0's: a cache hit, and a standard deviation of zero)."""
    models = {"f": {"backend": "litellm", "model_id": "openai/f", "sampling": {"seed": model_seed}},
              "j": {"backend": "litellm", "model_id": "openai/j", "sampling": {"seed": model_seed}}}
    settings = settings_from_dict({"cache_dir": str(tmp_path / "cache"), "models": models,
                                   "endings": {"forecaster": "f", "judge": "j", "k": 2, "repeats": 3}})
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 10, "f", "ws")
    # the same two endings in every repeat: only the seed can tell the repeats' judge requests apart
    client, fb, jb = _client(settings, {"endings.forecast": lambda call: ["End A.", "End B."]})
    preds = run_forecasts(client, [story], positions, "human:x", "f", 2, settings.endings.forecast_sampling,
                          repeats=3)
    assert fb.n_calls == 3 * len(positions)                  # no repeat was answered from another's cache entry
    assert len({c.seed for c in fb.calls}) == fb.n_calls
    verdicts = run_judging(client, [story], positions, preds, settings)
    assert len(verdicts) == len(preds)
    # a judge request per (position, sample) and repeat: repeats are distinct requests for the judge too
    assert jb.n_calls == len(preds) and len({(c.seed, c.messages[-1]["content"]) for c in jb.calls}) == jb.n_calls


def test_one_empty_prediction_among_k_is_an_n_of_that_sample_and_never_a_redraw(tmp_path):
    """Appendix C.5: an empty or malformed answer counts as a rejection. One empty sample of an
    n=K request neither fails the position nor makes the client redraw all K (which would favour
    batches without empty answers); it is recorded on its own row."""
    from wse_platform.endings.tables import build_no_rate
    import polars as pl
    settings = _settings(tmp_path)
    story = SplitStory.of("s1", TEXT)
    positions = compute_positions([story], "human:x", whitespace_token_count, 10, "f", "ws")
    client, fb, jb = _client(settings, {"endings.forecast": lambda call: ["End A.", "   ", "<think>hmm", "End D."]})
    preds = run_forecasts(client, [story], positions, "human:x", "f", 4, settings.endings.forecast_sampling)
    assert fb.n_calls == len(positions) == 1                  # answered once: no retry of the whole batch
    assert [p["sample_error"] for p in preds] == [None, "empty_output", "empty_output", None]
    assert [p["prediction"] for p in preds] == ["End A.", "", "<think>hmm", "End D."]
    assert all(p["failure_json"] is None for p in preds)
    verdicts = run_judging(client, [story], positions, preds, settings)
    assert jb.n_calls == 2                                     # only the two real predictions go to the judge
    assert [v["verdict"] for v in verdicts] == ["Y", "N", "N", "Y"]
    assert all(v["failure_json"] is None for v in verdicts)
    nr = build_no_rate(pl.DataFrame(verdicts), pl.DataFrame(positions)).row(0, named=True)
    assert (nr["n_samples"], nr["n_valid"], nr["n_yes"]) == (4, 4, 2) and nr["no_rate"] == pytest.approx(0.5)


def test_the_true_continuation_is_cut_once_per_story_and_position_not_once_per_ending(tmp_path, monkeypatch):
    """K = 100 judge requests per position, built early and again by the judging step, show the same
    truncated continuation: it is computed once per story and position (the word-by-word truncation
    of up to 2,000 words was 65 % of building a request, ~20 % of the CLI's CPU at K = 100); the
    requests are unchanged."""
    import wse_platform.endings.judge as J

    settings = _settings(tmp_path)
    story = SplitStory.of("s1", TEXT)
    expected = [judge_request(SplitStory.of("s1", TEXT), 2 + p, p, i, f"End {i}.", "j",
                              settings.endings.judge_sampling) for p in range(3) for i in range(5)]
    calls = []
    real = J.truncate_words
    monkeypatch.setattr(J, "truncate_words", lambda text, *a: calls.append(text) or real(text, *a))
    built = [judge_request(story, 2 + p, p, i, f"End {i}.", "j", settings.endings.judge_sampling)
             for _ in range(2) for p in range(3) for i in range(5)]
    assert len(calls) == 3                                   # one per position, not 2 x 3 x 5
    assert [r.model_dump() for r in built] == [r.model_dump() for r in expected] * 2
    assert story == SplitStory.of("s1", TEXT) and hash(story) == hash(SplitStory.of("s1", TEXT))
    assert story.sentence(3) == SENTENCES[2] and story.sentences == SENTENCES
