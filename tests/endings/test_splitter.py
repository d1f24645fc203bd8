"""Sentence splitter and position filter, on hand-made texts with hand-computed results."""
import pytest

from wse_platform.metrics.endings import (
    Position,
    select_positions,
    sentence_spans,
    split_sentences,
    whitespace_token_count,
)


# ---- split_sentences ---------------------------------------------------------------------

def test_plain_terminal_punctuation():
    assert split_sentences("It rained. She waited! Why? Nobody came.") == [
        "It rained.", "She waited!", "Why?", "Nobody came."]


def test_mr_smith_splits_because_uppercase_follows():
    # The rule has no abbreviation exceptions: "Mr." + space + "S" is a boundary.
    assert split_sentences("Mr. Smith left.") == ["Mr.", "Smith left."]


def test_lowercase_after_period_is_not_a_boundary():
    assert split_sentences("Bring tools, e.g. the hammer. Then go.") == [
        "Bring tools, e.g. the hammer.", "Then go."]


def test_decimal_number_is_not_a_boundary():
    assert split_sentences("It was 3.5 times larger. We ran.") == ["It was 3.5 times larger.", "We ran."]


def test_straight_quotes_close_and_open():
    text = 'He said, "Run." "Why?" she asked. They ran.'
    assert split_sentences(text) == ['He said, "Run."', '"Why?" she asked.', "They ran."]


def test_curly_quotes_dialogue():
    text = "“Stop!” he yelled. “I can’t,” she said. ‘Fine.’ Then silence."
    # ‘Fine.’ is followed by a closing ’ then a capital: the closing mark stays attached.
    assert split_sentences(text) == ["“Stop!” he yelled.", "“I can’t,” she said. ‘Fine.’", "Then silence."]


def test_closing_parenthesis_and_opening_brackets():
    text = "He paused (was it over?) and smiled. (It was.) [Later] she left."
    assert split_sentences(text) == ["He paused (was it over?) and smiled.", "(It was.)", "[Later] she left."]


def test_question_mark_then_closing_paren_then_capital():
    assert split_sentences("She asked (why?) Then left.") == ["She asked (why?)", "Then left."]


def test_several_closing_marks_stay_with_sentence():
    assert split_sentences('He said "(go!)" Then we went.') == ['He said "(go!)"', "Then we went."]


def test_no_whitespace_no_split_and_lowercase_after_quote():
    assert split_sentences('"Go!"he said. "Go!" he said.') == ['"Go!"he said.', '"Go!" he said.']


def test_newlines_are_whitespace_and_text_is_trimmed():
    assert split_sentences("  First one.\n\nSecond one.\n") == ["First one.", "Second one."]


def test_digit_after_period_is_not_a_boundary():
    assert split_sentences("Chapter 1. 2 men came.") == ["Chapter 1. 2 men came."]


def test_empty_text():
    assert split_sentences("") == []
    assert split_sentences("   \n") == []


def test_spans_point_into_original_text():
    text = "One two.\n\nThree four! Five."
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == ["One two.", "Three four!", "Five."]
    assert text[: spans[1][1]] == "One two.\n\nThree four!"


# ---- select_positions --------------------------------------------------------------------

def _sentence(n_words: int, word: str = "w") -> str:
    return " ".join([word] * (n_words - 1) + [word + "."])


def test_share_bounds_are_inclusive():
    # 10 sentences of 10 words: prefix i reveals 10·i of 100 tokens → share i/10.
    sents = [_sentence(10) for _ in range(10)]
    pos = select_positions(sents, whitespace_token_count, min_share=0.10, max_share=0.90)
    assert [p.index for p in pos] == [1, 2, 3, 4, 5, 6, 7, 8, 9]  # 0.10 and 0.90 both kept
    assert pos[0].revealed_share == pytest.approx(0.10)
    assert pos[-1].revealed_share == pytest.approx(0.90)
    # Default max 0.99 drops the full story (share 1.0).
    pos = select_positions(sents, whitespace_token_count)
    assert [p.index for p in pos] == list(range(1, 10))


def test_share_just_below_minimum_is_dropped():
    # First sentence 9 of 100 tokens (share 0.09), but it is also short; make it long:
    sents = [_sentence(11), _sentence(10)] + [_sentence(79)]   # 11/100=0.11, 21/100=0.21, 1.0
    assert [p.index for p in select_positions(sents, whitespace_token_count)] == [1, 2]
    sents = [_sentence(10), _sentence(90)]                       # 0.10 kept, 1.0 dropped
    assert [p.index for p in select_positions(sents, whitespace_token_count, min_share=0.11)] == []
    assert [p.index for p in select_positions(sents, whitespace_token_count, min_share=0.10)] == [1]


def test_short_last_sentence_is_dropped():
    # Shares: 0.2, 0.29 (9-word sentence → dropped), 0.39, 1.0
    sents = [_sentence(20), _sentence(9), _sentence(10), _sentence(61)]
    pos = select_positions(sents, whitespace_token_count)
    assert [p.index for p in pos] == [1, 3]
    assert [p.revealed_share for p in pos] == pytest.approx([0.20, 0.39])
    assert pos[1] == Position(position=1, index=3, revealed_share=pytest.approx(0.39), n_tokens_revealed=39,
                              n_tokens_total=100, last_sentence=sents[2])
    assert pos[1].sentence_index == 3
    # exactly 10 words counts, 9 does not (MIN_SENT_WORDS = 10)
    assert [p.index for p in select_positions(sents, whitespace_token_count, min_sent_words=9)] == [1, 2, 3]


def test_injected_token_counter_is_used():
    sents = [_sentence(10), _sentence(10), _sentence(10)]
    chars = lambda text: len(text)  # noqa: E731 — a different "tokenizer": characters
    pos = select_positions(sents, chars, min_share=0.0, max_share=1.0)
    total = len(" ".join(sents))
    assert [p.n_tokens_revealed for p in pos] == [len(sents[0]), len(" ".join(sents[:2])), total]
    assert all(p.n_tokens_total == total for p in pos)


def test_stride_keeps_every_nth_kept_position_and_renumbers():
    sents = [_sentence(10) for _ in range(10)]
    pos = select_positions(sents, whitespace_token_count, stride=3)
    assert [p.index for p in pos] == [1, 4, 7]
    assert [p.position for p in pos] == [0, 1, 2]


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="stride"):
        select_positions(["a."], whitespace_token_count, stride=0)
    assert select_positions([], whitespace_token_count) == []
