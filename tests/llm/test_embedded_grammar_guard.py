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
