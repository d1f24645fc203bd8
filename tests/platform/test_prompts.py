import pytest

from wse_platform.prompts import PromptError, clear_cache, get_prompt


def write_prompt(d, bench, name, version, body):
    (d / bench).mkdir(parents=True, exist_ok=True)
    (d / bench / f"{name}.{version}.md").write_text(
        f"---\nrole: {bench}.{name}\nversion: {version}\n---\n{body}")


def test_render_and_missing_placeholder(tmp_path):
    clear_cache()
    write_prompt(tmp_path, "zz", "r", "v1", "## system\nYou are ${who}.\n## user\nSay {\"json\": ${x}}\n")
    p = get_prompt("zz.r", "v1", str(tmp_path))
    msgs = p.render(who="a judge", x=3)
    assert msgs == [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": 'Say {"json": 3}'}]
    with pytest.raises(PromptError, match="needs values for \\['x'\\]"):
        p.render(who="a judge")


def test_user_override_dir_wins_and_changes_sha(tmp_path):
    clear_cache()
    a, b = tmp_path / "a", tmp_path / "b"
    write_prompt(a, "zz", "r", "v1", "## user\none\n")
    write_prompt(b, "zz", "r", "v1", "## user\ntwo\n")
    pa, pb = get_prompt("zz.r", "v1", str(a)), get_prompt("zz.r", "v1", str(b))
    assert pa.sha != pb.sha and pb.render()[0]["content"] == "two"


def test_missing_prompt_and_bad_front_matter(tmp_path):
    clear_cache()
    with pytest.raises(PromptError, match="no prompt file"):
        get_prompt("zz.nothing", "v1", str(tmp_path))
    (tmp_path / "zz").mkdir()
    (tmp_path / "zz" / "bad.v1.md").write_text("no front matter")
    with pytest.raises(PromptError, match="front-matter"):
        get_prompt("zz.bad", "v1", str(tmp_path))


def _template_render(p, **values):
    """What `Prompt.render` produced before it split its sections once (string.Template per request)."""
    import string
    return [{"role": r, "content": string.Template(t).substitute({k: str(v) for k, v in values.items()})}
            for r, t in p.sections]


def test_render_is_string_template_substitute_for_every_shipped_prompt_and_edge_case():
    """The pre-split rendering gives string.Template's text: every shipped prompt (values holding `$`, `${..}`,
    braces, non-ASCII), `$$`, `$name` next to text, adjacent placeholders; an invalid `$` raises the same error."""
    from wse_platform.prompts import SHIPPED_DIR, Prompt, parse_prompt_file
    checked = 0
    for f in sorted(SHIPPED_DIR.rglob("*.md")):
        p = parse_prompt_file(f, root=SHIPPED_DIR)
        values = {k: f"<{k}: $x ${{y}} {{z}} $$ — é {i}>" for i, k in enumerate(sorted(p.placeholders()))}
        assert p.render(**values, unused=5) == _template_render(p, **values, unused=5), f
        checked += 1
    assert checked >= 20
    for sections in ((("system", "plain {text}"), ("user", "a $$ b $who c ${who}d $$$who ${x}${x}$x.")),
                     (("user", "cost: $$5, ${who}"),)):
        p = Prompt("zz.r", "v1", "inline", sections)
        values = {k: f"[{k} $y]" for k in p.placeholders()}
        assert p.render(**values) == _template_render(p, **values)
    bad = Prompt("zz.r", "v1", "inline", (("user", "ok ${who} then $ 1"),))
    with pytest.raises(ValueError, match="Invalid placeholder in string: line 1, col 16"):
        bad.render(who="x")
