"""`load_yaml`'s bound on nodes (issue 24: the memoised alias-expanding count was ~15 % of `load_specs`'
CPU on the NCP specs, which have no alias). Text without an anchor or without an alias composes to a
tree and is counted by a plain walk; text with both still goes through the memoised, cycle-refusing count."""
from __future__ import annotations

import pytest
import yaml

from wse_platform import inputs
from wse_platform.inputs import YAMLTooLarge, load_yaml

LOADERS = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])


@pytest.mark.parametrize("loader", LOADERS)
def test_text_without_aliases_is_counted_without_the_memo(monkeypatch, loader):
    def memo(*_a, **_k):
        raise AssertionError("the memoised count ran on a document that cannot have an alias")
    monkeypatch.setattr(inputs, "_expanded_size", memo)
    doc = "a: [1, 2, {b: 'R&D'}]\nc: {d: e}\n"
    assert load_yaml(doc, loader=loader) == {"a": [1, 2, {"b": "R&D"}], "c": {"d": "e"}}
    assert load_yaml("x: '*bold*'\n", loader=loader) == {"x": "*bold*"}


@pytest.mark.parametrize("loader", LOADERS)
def test_a_large_document_without_aliases_is_still_refused(loader):
    doc = "[" + ", ".join(["x"] * 1_000) + "]"
    assert len(load_yaml(doc, loader=loader, max_nodes=1_001)) == 1_000  # the sequence + 1,000 scalars
    with pytest.raises(YAMLTooLarge, match="aliases expand the document to more than 1,000 nodes"):
        load_yaml(doc, loader=loader, max_nodes=1_000)
    mapping = "\n".join(f"k{i}: {{a: [1, 2]}}" for i in range(200))  # 1 + 200 * (key, map, a, seq, 1, 2) = 1,201
    load_yaml(mapping, loader=loader, max_nodes=1_201)
    with pytest.raises(YAMLTooLarge):
        load_yaml(mapping, loader=loader, max_nodes=1_200)


@pytest.mark.parametrize("loader", LOADERS)
def test_documents_with_aliases_keep_the_expanded_count(loader):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
           "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    with pytest.raises(YAMLTooLarge, match="aliases expand"):
        load_yaml(bomb, loader=loader, max_nodes=1_000)
    with pytest.raises(YAMLTooLarge, match="contains it"):
        load_yaml("r: &r {loop: *r}\n", loader=loader)
    assert load_yaml(bomb, loader=loader)["c"][9][9][9] == "x"
