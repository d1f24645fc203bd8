from wse_platform.llm.backends.embedded import MAX_GRAMMAR_LENGTH, grammar_safe_schema


def test_long_caps_are_dropped_from_the_grammar_only():
    schema = {"type": "object", "properties": {
        "short": {"type": "string", "maxLength": 200},
        "long": {"type": "string", "maxLength": MAX_GRAMMAR_LENGTH + 1},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 5000}, "maxItems": 3},
    }}
    safe = grammar_safe_schema(schema)
    assert safe["properties"]["short"]["maxLength"] == 200
    assert "maxLength" not in safe["properties"]["long"]
    assert "maxLength" not in safe["properties"]["items"]["items"]
    assert safe["properties"]["items"]["maxItems"] == 3
    assert schema["properties"]["long"]["maxLength"] == MAX_GRAMMAR_LENGTH + 1  # input untouched


def test_string_cap_applies_to_free_strings_only():
    schema = {"type": "object", "properties": {
        "text": {"type": "string"},
        "short": {"type": "string", "maxLength": 50},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "n": {"type": "integer"},
    }}
    safe = grammar_safe_schema(schema, max_string_chars=300)
    assert safe["properties"]["text"]["maxLength"] == 300
    assert safe["properties"]["short"]["maxLength"] == 50
    assert "maxLength" not in safe["properties"]["kind"] and "maxLength" not in safe["properties"]["n"]
    assert "maxLength" not in grammar_safe_schema(schema)["properties"]["text"]
