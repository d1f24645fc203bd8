"""`wse doctor`: says what to fix, never prints a key, moves a broken cache aside on request."""
from __future__ import annotations

from tests.conftest import write_config
from tests.llm.conftest import make_settings, needs_llama
from wse_platform.cli import main
from wse_platform.doctor import run_doctor
from wse_platform.llm.cache import ResponseCache

SECRET = "sk-doctor-test-NEVER-PRINT-41c9"


def _run(settings, **kw) -> tuple[int, str]:
    lines: list[str] = []
    rc = run_doctor(settings, print_fn=lines.append, **kw)
    return rc, "\n".join(lines)


@needs_llama
def test_doctor_checks_models_keys_and_never_prints_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_DOCTOR_KEY", SECRET)
    monkeypatch.delenv("WSE_DOCTOR_ABSENT", raising=False)
    settings = make_settings(tmp_path, remote={"backend": "litellm", "model_id": "openai/x",
                                               "api_base": "http://127.0.0.1:9/v1", "api_key_env": "WSE_DOCTOR_KEY"},
                             absent={"backend": "litellm", "model_id": "openai/y",
                                     "api_key_env": "WSE_DOCTOR_ABSENT"})
    rc, out = _run(settings)
    assert rc == 1 and SECRET not in out
    assert "[  ok] python" in out and "[  ok] model smollm2: GGUF" in out
    assert "$WSE_DOCTOR_KEY is set" in out and "[FAIL] model absent: key: $WSE_DOCTOR_ABSENT is NOT set" in out
    assert "[FAIL] model remote: not reachable" in out  # nothing listens on port 9
    smollm2 = next(line for line in out.splitlines() if line.startswith("[  ok] model smollm2: answered"))
    assert "reasoning: model default" in smollm2 and "honours JSON-schema output" in smollm2
    assert not (tmp_path / "cache" / ResponseCache.FILE_NAME).exists()  # doctor's calls use a private cache


def test_doctor_reports_and_moves_a_broken_cache(tmp_path, config_file, capsys):
    cfg = write_config(tmp_path)
    cache = tmp_path / "cache" / ResponseCache.FILE_NAME
    cache.parent.mkdir(parents=True)
    cache.write_text("not a database")
    assert main(["--config", str(cfg), "doctor", "--no-models"]) == 1
    out = capsys.readouterr().out
    assert f"[FAIL] llm cache: {cache} is not readable" in out and "--move-broken-cache" in out
    assert main(["--config", str(cfg), "doctor", "--no-models", "--move-broken-cache"]) == 0
    out = capsys.readouterr().out
    assert "moved aside" in out and not cache.exists()
    assert list(cache.parent.glob("responses.sqlite.broken-*"))
    assert main(["--config", str(cfg), "doctor", "--no-models"]) == 0
