"""What determines each asset's output, as short fingerprints.

These fingerprints are the data versions of the config source assets: a generation cell's
version changes exactly when its model's backend id / revision / quantization / sampling,
the prompts of the roles it uses, the architecture's code or the scale profile change; a
judge configuration's version changes when its model, prompt version/wording or count change.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from wse_platform.config import REPO_ROOT, Settings
from wse_platform.prompts import SHIPPED_DIR, get_prompt

# Prompt roles that belong to judging (everything else in a benchmark's prompt folder generates).
JUDGE_ROLES = {
    "wse": {"consistency_judge", "richness_judge"},
    "endings": {"judge", "rubric"},   # the rubric judge has its own fingerprint (endings_rubric_version)
}
NCP_GENERATION_PREFIXES = ("player", "narrator", "memory")
NCP_EXTRACTION_PREFIXES = ("extract",)
ENDINGS_FORECAST_ROLES = {"forecast"}

# Domain code whose change alters generated outputs (architecture code versions).
GENERATION_CODE = {
    "wse": ["wse_platform/wse/simulate.py", "wse_platform/wse/agents.py", "wse_platform/wse/reducer.py",
            "wse_platform/wse/schemas.py", "wse_platform/wse/seeds.py", "wse_platform/wse/architecture.py"],
    "ncp": ["wse_platform/ncp/episode.py", "wse_platform/ncp/memory.py", "wse_platform/ncp/ledger.py",
            "wse_platform/ncp/schemas.py", "wse_platform/ncp/audit.py", "wse_platform/ncp/prompter.py",
            "wse_platform/ncp/render.py", "wse_platform/ncp/ref_format.py", "wse_platform/ncp/ref_schemas.py",
            "wse_platform/ncp/state.py", "wse_platform/ncp/roles.py", "wse_platform/ncp/hiagent.py",
            "wse_platform/ncp/hiagent_ref.py", "wse_platform/ncp/tokens.py"],
    "endings": ["wse_platform/endings/pipelines.py", "wse_platform/endings/forecast.py"],
}
JUDGE_CODE = {
    "wse": ["wse_platform/wse/judges.py"],
    "ncp": ["wse_platform/ncp/episode.py", "wse_platform/ncp/reaudit.py", "wse_platform/ncp/audit.py",
            "wse_platform/ncp/prompter.py", "wse_platform/ncp/render.py", "wse_platform/ncp/ref_format.py",
            "wse_platform/ncp/ref_schemas.py"],
    "endings": ["wse_platform/endings/judge.py"],
}


_CAPTURED: ContextVar[list | None] = ContextVar("wse_fingerprint_parts", default=None)
MAX_CHANGES = 12  # lines in a "what changed" summary
CHANGES_META = "changed"  # config asset materialization metadata: what changed since its previous version
INPUTS_META = "inputs"    # ... and everything its fingerprint hashed (compared with the next version)
_FP = re.compile(r"[0-9a-f]{16}")


_MEMO: ContextVar[dict | None] = ContextVar("wse_fingerprint_memo", default=None)


@contextlib.contextmanager
def memoized() -> Iterator[None]:
    """Within this block, file and prompt hashes are computed once per argument list: for computing
    many partitions' fingerprints at once (`status_replay`: 444 cells), while the files stay put."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def _memo(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def inner(*args: Any) -> Any:
        memo = _MEMO.get()
        if memo is None:
            return fn(*args)
        key = json.dumps([fn.__name__, args], default=str)
        if key not in memo:
            memo[key] = fn(*args)
        return copy.deepcopy(memo[key])
    return inner


def fingerprint(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str)
    captured = _CAPTURED.get()
    if captured is not None:  # `with_inputs` is asking what was hashed
        captured.append(json.loads(blob))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def with_inputs(version_fn: Callable[..., str], *args: Any) -> tuple[str, list]:
    """`version_fn(*args)` and everything its fingerprints hashed (nested ones included), as JSON
    values: recorded next to a config version so a later change can say what changed."""
    token = _CAPTURED.set([])
    try:
        version = version_fn(*args)
        parts = _CAPTURED.get() or []
    finally:
        _CAPTURED.reset(token)
    return version, parts


def _leaves(value: Any, path: tuple[str, ...], out: dict[tuple[str, ...], Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, (*path, str(k)), out)
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            _leaves(v, (*path, f"[{i}]"), out)
    else:
        out[path] = value


def _flat(inputs: list) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for parts in inputs:  # one list per fingerprint; its first part names it ("ncp-gen", ...)
        tag = str(parts[0]) if parts and isinstance(parts[0], str) else "?"
        for i, part in enumerate(parts[1:], start=1):
            _leaves(part, (tag, f"[{i}]"), out)
    return out


def describe_changes(old: list | None, new: list) -> list[str]:
    """Readable lines `fingerprint › key: old → new` for what differs between two `with_inputs`
    records (at most MAX_CHANGES, then how many more)."""
    if old is None:
        return ["(the previous version did not record its inputs)"]
    a, b = _flat(old), _flat(new)
    lines: list[str] = []
    for path in sorted(set(a) | set(b)):
        old_v, new_v = a.get(path, "(absent)"), b.get(path, "(absent)")
        if old_v == new_v:
            continue
        keys = [p for p in path[1:] if not p.startswith("[")]
        if not keys and _FP.fullmatch(str(old_v)) and _FP.fullmatch(str(new_v)):
            continue  # a nested fingerprint: its own inputs are listed under its name
        line = f"{path[0]} › {'.'.join(keys[-2:]) or path[-1]}: {_short(old_v)} → {_short(new_v)}"
        if line not in lines:  # e.g. one model playing two roles
            lines.append(line)
    more = len(lines) - MAX_CHANGES
    return lines[:MAX_CHANGES] + ([f"... and {more} more"] if more > 0 else [])


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def input_sha(path: Path) -> str:
    """Hash of a configured input file for a version, read safely (never a FIFO, never above the
    size limit: those hash as their refusal, so the version still changes and the asset reports it)."""
    if not path.exists():
        return "absent"
    h = hashlib.sha256()
    problem = hash_input(h, path)
    return f"unreadable:{hashlib.sha256(problem.encode()).hexdigest()[:8]}" if problem else h.hexdigest()[:16]


def hash_input(h: Any, path: Path) -> str | None:
    """Feed the bytes of input file `path` into hash `h`, streamed; the reason when it may not be read."""
    from wse_platform.inputs import InputFileError, input_chunks
    try:
        for chunk in input_chunks(path):
            h.update(chunk)
    except (InputFileError, OSError) as err:
        return str(err)
    return None


@_memo
def file_hash(rel: str) -> str:
    path = REPO_ROOT / rel
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "absent"


@_memo
def _prompt_names(bench: str, version: str = "v1") -> list[str]:
    return sorted(p.name[: -len(f".{version}.md")] for p in (SHIPPED_DIR / bench).glob(f"*.{version}.md"))


@_memo
def prompt_shas(bench: str, names: list[str], version: str, prompts_dir: str | None) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = get_prompt(f"{bench}.{name}", version, prompts_dir).sha
        except Exception as err:  # a missing prompt must still change the version, not crash status
            out[name] = f"missing:{type(err).__name__}"
    return out


def _scale(settings: Settings, section: str) -> dict[str, Any]:
    sec = getattr(settings, section).model_dump()
    keys = {"wse": ["horizon", "n_seeds"], "ncp": ["t_max", "n_specs", "sampling", "player_model"],
            "endings": ["k", "position_stride", "max_positions_per_story", "ablate", "max_human_stories", "n_ideas", "story_sampling",
                        "forecast_sampling", "forecaster", "min_words", "max_words", "ideas_file",
                        "repeats", "reference_pool", "reference_seed", "plan_beats"]}[section]
    out = {k: sec.get(k) for k in keys} | {"profile": settings.profile}
    for key in ("spec_ids", "seed_ids"):  # only when set: older configs keep their versions
        if sec.get(key):
            out[key] = sec[key]
    return out


def wse_cell_version(settings: Settings, model: str, arch: str) -> str:
    gen = [n for n in _prompt_names("wse") if n not in JUDGE_ROLES["wse"]]
    return fingerprint("wse-gen", settings.model(model).identity(), arch, _scale(settings, "wse"),
                       settings.wse.sampling.model_dump(), prompt_shas("wse", gen, "v1", settings.prompts_dir),
                       settings.wse.budgets,
                       {f: file_hash(f) for f in GENERATION_CODE["wse"]})


def wse_judge_version(settings: Settings) -> str:
    judges = {}
    for role in ("consistency_judge", "richness_judge"):
        j = getattr(settings.wse, role)
        if j is not None:
            judges[role] = [j.model_dump(), [settings.model(m.model).identity() for m in j.members],
                            [prompt_shas("wse", [role], pv, settings.prompts_dir) for pv in j.prompt_versions]]
    return fingerprint("wse-judge", judges, settings.wse.budgets, {f: file_hash(f) for f in JUDGE_CODE["wse"]})


def ncp_cell_version(settings: Settings, model: str, arch: str) -> str:
    gen = [n for n in _prompt_names("ncp") if n.startswith(NCP_GENERATION_PREFIXES)]
    player = settings.ncp.player_model
    return fingerprint("ncp-gen", settings.model(model).identity(), arch, _scale(settings, "ncp"),
                       settings.model(player).identity() if player else None,
                       prompt_shas("ncp", gen, "v1", settings.prompts_dir),
                       # the in-loop auditor decides when an episode ends, so it shapes the transcript
                       ncp_auditor_version(settings),
                       {f: file_hash(f) for f in GENERATION_CODE["ncp"]},
                       *([ncp_reference_version(settings)] if settings.ncp.reference else []),
                       *([settings.ncp.narrator_trajectory] if settings.ncp.narrator_trajectory != "current_node"
                         else []),
                       *ncp_method_version(settings, arch))


def ncp_method_version(settings: Settings, arch: str) -> list[str]:
    """A plug-in narrator method's target and the hash of its module file (its code is the narrator)."""
    target = settings.ncp.narrator_methods.get(arch.partition("+")[0])
    if not target:
        return []
    import importlib.util
    try:
        spec = importlib.util.find_spec(target.partition(":")[0])
        origin = spec.origin if spec is not None else None
        code = hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:16] if origin else "absent"
    except (ImportError, ValueError, OSError) as err:
        code = f"unimportable:{type(err).__name__}"
    return [target, code]


def ncp_reference_version(settings: Settings) -> str | None:
    """`ref-<commit>` of the `ncp.reference` checkout whose prompts are sent, or None."""
    if not settings.ncp.reference:
        return None
    from wse_platform.ncp.reference import ReferenceError, load
    try:
        return load(settings.ncp.reference).version
    except (ReferenceError, OSError) as err:  # an unusable checkout must still change the version, not crash status
        return f"ref-unusable:{type(err).__name__}"


def ncp_auditor_version(settings: Settings) -> str:
    a = settings.ncp.auditor
    if a is None:
        return "none"
    names = [n for n in _prompt_names("ncp", a.prompt_version)
             if not n.startswith(NCP_GENERATION_PREFIXES + NCP_EXTRACTION_PREFIXES)]
    return fingerprint("ncp-auditor", a.model_dump(), settings.model(a.model).identity(),
                       prompt_shas("ncp", names, a.prompt_version, settings.prompts_dir),
                       *([ncp_reference_version(settings)] if settings.ncp.reference else []))


def ncp_reaudit_version(settings: Settings) -> str:
    out = []
    for a in settings.ncp.reaudit_auditors:
        names = [n for n in _prompt_names("ncp", a.prompt_version)
                 if not n.startswith(NCP_GENERATION_PREFIXES + NCP_EXTRACTION_PREFIXES)]
        out.append([a.model_dump(), settings.model(a.model).identity(),
                    prompt_shas("ncp", names, a.prompt_version, settings.prompts_dir)])
    return fingerprint("ncp-reaudit", out, {f: file_hash(f) for f in JUDGE_CODE["ncp"]})


def endings_set_version(settings: Settings, set_key: str) -> str:
    gen = [n for n in _prompt_names("endings") if n not in JUDGE_ROLES["endings"]]
    model = set_key.split(":")[1] if set_key.startswith("gen:") else None
    corpus = None
    if set_key.startswith("human:"):
        name = set_key.split(":", 1)[1]
        corpus = next((c.model_dump() for c in settings.endings.corpora if c.name == name), None)
    return fingerprint("endings-gen", set_key, settings.model(model).identity() if model else corpus,
                       settings.model(settings.endings.forecaster).identity() if settings.endings.forecaster else None,
                       _scale(settings, "endings"), prompt_shas("endings", gen, "v1", settings.prompts_dir),
                       {f: file_hash(f) for f in GENERATION_CODE["endings"]})


def endings_judge_version(settings: Settings) -> str:
    e = settings.endings
    return fingerprint("endings-judge", e.judge, settings.model(e.judge).identity() if e.judge else None,
                       e.judge_prompt_version, e.judge_sampling.model_dump(), e.judge_constrained_choice,
                       e.repeats,
                       prompt_shas("endings", ["judge"], e.judge_prompt_version, settings.prompts_dir),
                       {f: file_hash(f) for f in JUDGE_CODE["endings"]})


def endings_rubric_version(settings: Settings) -> str:
    """The rubric judge's own fingerprint (model, sampling, band, prompt and rubric file), so a
    rubric change re-scores stories without marking story sets or Y/N verdicts stale."""
    r = settings.endings.rubric
    if r is None:
        return fingerprint("endings-rubric", None)
    path = settings.resolve_path(r.rubric_file) if r.rubric_file else REPO_ROOT / "wse_platform/endings/rubric.yaml"
    rubric_sha = input_sha(path)
    return fingerprint("endings-rubric", r.model_dump(), settings.model(r.model).identity(), rubric_sha,
                       prompt_shas("endings", ["rubric"], r.prompt_version, settings.prompts_dir),
                       {f: file_hash(f) for f in ("wse_platform/endings/rubric.py",)})


def code_version_of(*paths: str | Path) -> str:
    """Hash of source files (repo-relative or absolute) — an asset's code version."""
    return fingerprint([file_hash(str(Path(p).relative_to(REPO_ROOT)) if Path(p).is_absolute() else str(p))
                        for p in paths])


def _cell(pk: str | None) -> tuple[str, str]:
    """(model, arch) of a model × architecture partition key `arch|model` (Dagster orders the
    dimensions alphabetically; a MultiPartitionKey is that string)."""
    arch, model = str(pk).split("|", 1)
    return model, arch


# Config asset -> (partitions it has: a BenchmarkPartitions field or None, what it fingerprints,
# fingerprint(settings, partition key)). Dagster-free, so `wse status` can tell what a config edit
# changed without building the definitions (`status_replay`); `assets/versioning.py` builds the
# config assets from it.
CONFIG_FINGERPRINTS: dict[str, tuple[str | None, str, Callable[[Settings, str | None], str]]] = {
    "wse_cell_config": ("wse", "each WSE-bench cell's generation setup (model, prompts, architecture code, scale)",
                        lambda s, pk: wse_cell_version(s, *_cell(pk))),
    "wse_judge_config": (None, "the WSE-bench judge configuration (consistency and richness judges)",
                         lambda s, pk: wse_judge_version(s)),
    "ncp_cell_config": ("ncp", "each NCP-Bench cell's episode setup (narrator, player, in-loop auditor, prompts, "
                               "scale)", lambda s, pk: ncp_cell_version(s, *_cell(pk))),
    "ncp_reaudit_config": (None, "the NCP-Bench re-audit auditor configurations",
                           lambda s, pk: ncp_reaudit_version(s)),
    "endings_set_config": ("endings", "each 100-Endings story set's generation and forecasting setup",
                           lambda s, pk: endings_set_version(s, pk)),
    "endings_judge_config": (None, "the 100-Endings Y/N judge configuration",
                             lambda s, pk: endings_judge_version(s)),
    "endings_rubric_config": (None, "the 100-Endings rubric judge configuration",
                              lambda s, pk: endings_rubric_version(s)),
}
