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
