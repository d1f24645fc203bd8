"""The authors' prompts, read at run time from a local checkout of NLP2CT/NCP-Bench (`ncp.reference`).

Nothing of the reference is shipped: the platform reads the prompt files from the user's checkout,
fills their `str.format` placeholders with the values the reference runner computes
(`ref_format.py`), and names the prompt version `ref-<commit>` (the checkout's git HEAD, or a hash
of the files when the folder is not a git checkout). `check()` lists what is wrong with a checkout
(missing file, placeholder set that differs from the one the runner fills). The reference HiAgent's
Python modules are read too (`hiagent_ref.py`): their texts are checked and loaded with the prompts.
"""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from wse_platform.ncp import hiagent_ref

# prompt key -> (path inside the checkout, the placeholders the reference runner fills)
PROMPT_FILES: dict[str, tuple[str, frozenset[str]]] = {
    "fact_update": ("src/ncpbench/prompts/fact_update.txt",
                    frozenset({"player_role", "pre_turn_facts", "response_text"})),
    "conflict_check": ("src/ncpbench/prompts/conflict_check.txt", frozenset({
        "player_role", "system_response_history", "user_input", "response_text", "pre_turn_facts",
        "candidate_fact_updates", "narrative_commitments", "trajectory_progress", "current_node"})),
    "conflict_double_check": ("src/ncpbench/prompts/conflict_double_check.txt", frozenset({
        "player_role", "system_response_history", "user_input", "response_text", "pre_turn_facts",
        "candidate_fact_updates", "narrative_commitments", "trajectory_progress", "current_node",
        "initial_conflicts_json"})),
    "trajectory_check": ("src/ncpbench/prompts/trajectory_check.txt",
                         frozenset({"player_role", "facts", "history_text", "current_node"})),
    "status_check": ("src/ncpbench/prompts/status_check.txt", frozenset({
        "player_role", "facts", "history_text", "trajectory_progress", "narrative_commitments"})),
    "opening": ("src/ncpbench/prompts/opening.txt",
                frozenset({"player_role", "current_node", "narrative_commitments", "pre_turn_facts"})),
    "natural_input": ("src/ncpbench/prompts/natural_input.txt", frozenset({"player_role", "history_text"})),
    "adversarial_input": ("src/ncpbench/prompts/adversarial_input.txt", frozenset({"player_role", "history_text"})),
    "baseline_narrator": (
        "reference-methods/baseline/src/ncpbench_reference_baseline/prompts/method_response_generate_user.txt",
        frozenset({"player_role", "current_node", "narrative_commitments", "pre_turn_facts", "pending_fact_updates",
                   "system_response_history", "user_input"})),
    "hiagent_narrator": (
        "reference-methods/hiagent/src/ncpbench_reference_hiagent/prompts/method_response_generate_user.txt",
        frozenset({"player_role", "current_node", "narrative_commitments", "pre_turn_facts", "pending_fact_updates",
                   "system_response_history", "user_input"})),
}


class ReferenceError(ValueError):
    pass


def placeholders(template: str) -> set[str]:
    """The `str.format` field names of a template (`{{`/`}}` are literal braces)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template)
            if name is not None and name != ""}


def _git_head(root: Path) -> str | None:
    """The commit the checkout's HEAD points at (loose ref or packed-refs), without running git."""
    git = root / ".git"
    if git.is_file():  # a worktree: "gitdir: <path>"
        target = git.read_text(encoding="utf-8").strip().removeprefix("gitdir:").strip()
        git = (root / target).resolve()
    head = git / "HEAD"
    if not head.is_file():
        return None
    value = head.read_text(encoding="utf-8").strip()
    if not value.startswith("ref:"):
        return value or None
    ref = value.removeprefix("ref:").strip()
    loose = git / ref
    if loose.is_file():
        return loose.read_text(encoding="utf-8").strip()
    packed = git / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    return None


@dataclass(frozen=True)
class ReferencePrompts:
    """The prompt texts of one reference checkout and their version."""

    root: str
    version: str                      # "ref-<commit[:12]>" or "ref-files-<sha[:12]>"
    texts: tuple[tuple[str, str], ...]  # (prompt key, template)
    hiagent: hiagent_ref.HiAgentModule | None = None  # the reference HiAgent's texts and settings

    def template(self, key: str) -> str:
        return dict(self.texts)[key]

    def fill(self, key: str, **values: str) -> list[dict[str, str]]:
        """One user message: the template with its placeholders filled, as the reference runner sends it."""
        return [{"role": "user", "content": self.template(key).format(**values)}]


def check(root: str | Path) -> list[str]:
    """Problems of a checkout, each naming the file and what is wrong (empty when usable)."""
    root = Path(root)
    if not root.is_dir():
        return [f"{root}: not a folder; give the path of a local checkout of NLP2CT/NCP-Bench"]
    problems = []
    for key, (rel, expected) in PROMPT_FILES.items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing (the reference's {key} prompt)")
            continue
        try:
            found = placeholders(path.read_text(encoding="utf-8"))
        except ValueError as err:
            problems.append(f"{path}: not a str.format template ({err})")
            continue
        if found != expected:
            extra, missing = sorted(found - expected), sorted(expected - found)
            problems.append(f"{path}: placeholders differ from the ones the reference runner fills "
                            f"(unexpected {extra}, missing {missing})")
    return problems + hiagent_ref.check(root)


def version_of(root: str | Path) -> str:
    root = Path(root)
    head = _git_head(root)
    if head:
        return f"ref-{head[:12]}"
    h = hashlib.sha256()
    for key, (rel, _) in sorted(PROMPT_FILES.items()):
        h.update(key.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    for key, rel in sorted(hiagent_ref.MODULE_FILES.items()):
        h.update(f"hiagent.{key}".encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return f"ref-files-{h.hexdigest()[:12]}"


@lru_cache(maxsize=8)
def _load(root: str, stamp: tuple) -> ReferencePrompts:
    problems = check(root)
    if problems:
        raise ReferenceError("ncp.reference: the checkout cannot be used:\n  " + "\n  ".join(problems)
                             + "\nFix: point ncp.reference at a checkout of NLP2CT/NCP-Bench (git clone "
                               "https://github.com/NLP2CT/NCP-Bench), or remove ncp.reference to use the "
                               "platform's own prompts.")
    texts = tuple((k, (Path(root) / rel).read_text(encoding="utf-8")) for k, (rel, _) in PROMPT_FILES.items())
    return ReferencePrompts(root=root, version=version_of(root), texts=texts, hiagent=hiagent_ref.read(root))


def load(root: str | Path) -> ReferencePrompts:
    """The checkout's prompts (re-read when a file changes)."""
    root = Path(root).resolve()
    files = [rel for rel, _ in PROMPT_FILES.values()] + list(hiagent_ref.MODULE_FILES.values())
    stamp = tuple((rel, (root / rel).stat().st_mtime_ns if (root / rel).exists() else None) for rel in files)
    return _load(str(root), stamp + (_git_head(root),))


def main(path: str) -> int:
    """`wse ncp reference check PATH`."""
    problems = check(path)
    if problems:
        print("ncp reference checkout NOT usable:")
        for p in problems:
            print(f"  - {p}")
        return 1
    ref = load(path)
    print(f"ncp reference checkout OK: {Path(path).resolve()} (prompt version {ref.version}, "
          f"{len(ref.texts)} prompt files, {len(hiagent_ref.MODULE_FILES)} HiAgent modules)")
    return 0
