"""Parsing of raw samples into outputs, with the error kind the failure records."""
from __future__ import annotations

from pydantic import BaseModel

from wse_platform.llm.validation import parse_choice, parse_json, parse_text, schema_of


class Fact(BaseModel):
    subject: str
    count: int


def test_json_bare_fenced_and_embedded_in_prose():
    assert parse_json('{"subject": "a", "count": 2}', Fact).value == Fact(subject="a", count=2)
    assert parse_json('```json\n{"subject": "b", "count": 1}\n```', Fact).value.subject == "b"
    assert parse_json('Sure! {"subject": "c", "count": 0} Hope it helps', Fact).value.subject == "c"


def test_json_error_kinds():
    assert parse_json("no braces here", Fact).error_kind == "invalid_json"
    assert parse_json('{"subject": "a", "count": ', Fact).error_kind == "invalid_json"
    bad = parse_json('{"subject": "a", "count": "many"}', Fact)
    assert bad.error_kind == "schema_violation" and "count" in bad.message
    assert parse_json("   ", Fact).error_kind == "empty_output"


def test_choice_matching_rules():
    assert parse_choice("Y", ["Y", "N"]).value == "Y"
    assert parse_choice(' "n". ', ["Y", "N"]).value == "N"
    assert parse_choice("Yes, clearly", ["Yes", "No"]).value == "Yes"
    assert parse_choice("N, because the ending differs", ["Y", "N"]).value == "N"
    assert parse_choice("Nope", ["Y", "N"]).error_kind == "invalid_choice"  # 'N' followed by a letter
    assert parse_choice("The answer is Y", ["Y", "N"]).error_kind == "invalid_choice"
    assert parse_choice("", ["Y", "N"]).error_kind == "empty_output"


def test_free_text_must_not_be_empty():
    assert parse_text("hello").value == "hello"
    assert parse_text(" \n ").error_kind == "empty_output"


def test_schema_is_computed_once_per_class():
    first, text = schema_of(Fact)
    again, text2 = schema_of(Fact)
    assert first is again and text == text2 and '"count"' in text


def test_raw_control_characters_inside_strings_are_accepted_verbatim():
    from pydantic import BaseModel

    from wse_platform.llm.validation import parse_json

    class Out(BaseModel):
        text: str

    parsed = parse_json('{"text": "line one\nline two"}', Out)
    assert parsed.ok and parsed.value.text == "line one\nline two"
