"""The response cache is durable and safe when several processes write it at once."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from wse_platform.llm.cache import ResponseCache, content_key

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from wse_platform.llm.cache import ResponseCache
    cache = ResponseCache(sys.argv[1])
    tag, n = sys.argv[2], int(sys.argv[3])
    (Path(sys.argv[1]) / f"ready-{tag}").touch()
    while not (Path(sys.argv[1]) / "go").exists():  # start writing together
        time.sleep(0.001)
    for i in range(n):
        cache.put(f"shared-{i}", {"texts": [f"shared {i}"], "tokens_in": i, "tokens_out": 1})
        cache.put(f"{tag}-{i}", {"texts": [f"{tag} {i}"], "tokens_in": i, "tokens_out": 2})
    print("ok")
""")


def test_content_key_is_canonical():
    assert content_key({"a": 1, "b": [1, 2]}) == content_key({"b": [1, 2], "a": 1})
    assert content_key("x", 1) != content_key("x", 2)


def test_two_processes_writing_same_and_different_keys(tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    n = 1500
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
             for tag in ("p1", "p2")]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{t}").exists() for t in ("p1", "p2")) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    cache = ResponseCache(tmp_path)
    assert cache.integrity_ok()
    assert len(cache) == 3 * n  # n shared keys stored once + n per process
    got = cache.get_many([f"shared-{i}" for i in range(n)] + [f"p1-{i}" for i in range(n)]
                         + [f"p2-{i}" for i in range(n)])
    assert got["shared-7"] == {"texts": ["shared 7"], "tokens_in": 7, "tokens_out": 1}
    assert got["p2-1499"]["texts"] == ["p2 1499"] and len(got) == 3 * n


def test_answers_survive_reopening(tmp_path: Path):
    c = ResponseCache(tmp_path)
    c.put("k", {"texts": ["t"], "tokens_in": 1, "tokens_out": 1})
    c.close()
    assert ResponseCache(tmp_path).get("k")["texts"] == ["t"]
