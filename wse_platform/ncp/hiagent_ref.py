"""The reference HiAgent's prompt module, read at run time from a checkout of NLP2CT/NCP-Bench.

With `ncp.reference` set, the `memory` narrator sends what the reference method's modules send:
nothing of theirs is shipped. Their texts are Python strings, so the files are *parsed* (Python's
`ast`, never imported or executed) for the pieces the reference method uses:

- `hiagent_prompts.py`: the HiAgent instruction that opens every prompt (`HIAGENT_SUFFIX`), the
  control output-format section (`_HIAGENT_OUTPUT_FORMAT`) that replaces the narrator prompt's own
  output-format section (between the two headings named in `_replace_output_format_section`), and
  the summary request (`build_hiagent_summary_messages`: system text, user f-string, empty-trajectory text);
- `config.py`: `HiAgentRuntimeConfig` (memory size, token budget, summary cap, retrieve depth, system message);
- `narrator.py`: the initial observation and the observation written for each player input;
- `core.py`: the marker of actions left out of summarised trajectories and the tokenizer's model name.

The narrator prompt itself is the reference HiAgent's prompt file (`reference.PROMPT_FILES`
"hiagent_narrator"), filled like the baseline narrator's with the HiAgent fallbacks. Answers are
read in the method's line format (`Subgoal:` / `Action:`, `Action: retrieve(<ids>)`).
"""
from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from wse_platform.ncp.memory import ACTION, MemoryTexts

HIAGENT_DIR = "reference-methods/hiagent/src/ncpbench_reference_hiagent"
MODULE_FILES = {"prompts": f"{HIAGENT_DIR}/hiagent_prompts.py", "config": f"{HIAGENT_DIR}/config.py",
                "narrator": f"{HIAGENT_DIR}/narrator.py", "core": f"{HIAGENT_DIR}/core.py"}
CONFIG_FIELDS = {"memory_size": int, "max_input_tokens": int, "summary_max_chars": int,
                 "max_retrieve_depth": int, "system_message": str}


class ModuleError(ValueError):
    pass


@dataclass(frozen=True)
class HiAgentModule:
    instruction: str          # opens every control prompt
    output_format: str        # replaces the narrator prompt's output-format section
    section_start: str        # heading of the section it replaces
    section_end: str          # heading that follows that section
    system_message: str       # the control request's system turn
    summary_system: str       # the summary request's system turn
    summary_user: str         # str.format template: {trajectory_text}, {subgoal_text}
    empty_trajectory: str     # {trajectory_text} of an empty trajectory
    texts: MemoryTexts

    def turn_prompt(self, filled_template: str, memory_text: str, ends_with_subgoal: bool) -> str:
        """The control prompt: instruction, the narrator prompt with the control output format, the memory."""
        query = "\n\n".join(s for s in (self.instruction, self._with_format(filled_template).strip()) if s) + "\n"
        return query + "\n" + memory_text + (f"\n{ACTION}: " if ends_with_subgoal else "")

    def _with_format(self, prompt: str) -> str:
        start = prompt.find(self.section_start)
        if start == -1:
            return f"{prompt.rstrip()}\n\n{self.output_format}\n"
        end = prompt.find(self.section_end, start)
        if end == -1:
            return f"{prompt[:start].rstrip()}\n\n{self.output_format}\n"
        return f"{prompt[:start].rstrip()}\n\n{self.output_format}\n\n{prompt[end:].lstrip()}"

    def summary_messages(self, subgoal: str, trajectory: str) -> list[dict[str, str]]:
        user = self.summary_user.format(trajectory_text=trajectory or self.empty_trajectory, subgoal_text=subgoal)
        return [{"role": "system", "content": self.summary_system}, {"role": "user", "content": user}]


# ---- the answers, in the method's line format ---------------------------------------------------

# `retrieve(` ids `)`: each id digits, optionally after `s` and/or `_` (case-insensitive), comma-separated
_RETRIEVE = re.compile(r"retrieve\(\s*(s?_?\d+(?:\s*,\s*s?_?\d+)*)\s*\)", re.IGNORECASE)


def retrieve_ids(action: str) -> list[int]:
    """The subgoal numbers of the first `retrieve(1, s_2, ...)` in the action ([] when there is none)."""
    m = _RETRIEVE.search(action or "")
    return [int(part.strip().lstrip("sS").removeprefix("_")) for part in m.group(1).split(",")] if m else []


class RefHiAgentStep(BaseModel):
    """`Action: <text>` or `Subgoal: <line>` + `Action: <text>` (the action may run over several lines)."""

    subgoal: str | None = None
    action: str

    @classmethod
    def from_text(cls, text: str) -> "RefHiAgentStep":
        lines = text.strip().splitlines()
        if not lines:
            raise ValueError("the answer is empty")
        first = lines[0].strip()
        subgoal = None
        if not first.startswith(f"{ACTION}:"):
            if not first.startswith("Subgoal:"):
                raise ValueError("the answer must start with 'Action:' or 'Subgoal:'")
            subgoal = first[len("Subgoal:"):].strip()
            if not subgoal:
                raise ValueError("the subgoal is empty")
            if len(lines) < 2 or not lines[1].strip().startswith(f"{ACTION}:"):
                raise ValueError("a subgoal line must be followed by an 'Action:' line")
            first, lines = lines[1].strip(), lines[1:]
        action = "\n".join((first[len(ACTION) + 1:].strip(), *lines[1:])).strip()
        if not action:
            raise ValueError("the action is empty")
        return cls(subgoal=subgoal, action=action)

    def decision(self) -> tuple[str | None, str | None, list[int] | None]:
        """(subgoal, narration, retrieve ids): ids [] for a retrieve the method cannot read."""
        if self.action.lower().startswith("retrieve("):
            return self.subgoal, None, retrieve_ids(self.action)
        return self.subgoal, self.action, None


class RefSummaryLine(BaseModel):
    """A summary answer: non-empty, exactly one line."""

    summary: str

    @classmethod
    def from_text(cls, text: str) -> "RefSummaryLine":
        text = text.strip()
        if not text:
            raise ValueError("the summary is empty")
        if len(text.splitlines()) != 1:
            raise ValueError("the summary must be exactly one line")
        return cls(summary=text)


# ---- reading the module files -----------------------------------------------------------------

def _string(node: ast.AST | None) -> str | None:
    """A string literal, `"...".strip()`, or an f-string without fields."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "strip"
            and not node.args and not node.keywords):
        inner = _string(node.func.value)
        return inner.strip() if inner is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    return None


def _template(node: ast.AST | None) -> tuple[str, dict[str, str]] | None:
    """An f-string as a str.format template (`{name}` for a name or an attribute), with the
    fallback texts of `{x if x else '...'}` fields."""
    if not isinstance(node, ast.JoinedStr):
        return None
    parts, empties = [], {}
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value).replace("{", "{{").replace("}", "}}"))
            continue
        if not isinstance(v, ast.FormattedValue) or v.format_spec is not None or v.conversion != -1:
            return None
        expr = v.value
        if isinstance(expr, ast.IfExp) and _string(expr.orelse) is not None:
            empties[_name(expr.body) or ""] = _string(expr.orelse)  # type: ignore[assignment]
            expr = expr.body
        name = _name(expr)
        if name is None:
            return None
        parts.append("{" + name + "}")
    return "".join(parts), empties


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _assigned(scope: ast.AST | None, name: str) -> ast.AST | None:
    for n in ast.walk(scope) if scope is not None else []:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return n.value
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
            return n.value
    return None


def _keyword(tree: ast.AST, name: str) -> ast.AST | None:
    return next((k.value for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg == name),
                None)


def _parse(root: Path, problems: list[str]) -> dict[str, ast.Module]:
    trees = {}
    for key, rel in MODULE_FILES.items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing (the reference HiAgent's {key} module)")
            continue
        try:
            trees[key] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, ValueError) as err:
            problems.append(f"{path}: not readable Python ({err})")
    return trees


def _read(root: Path) -> tuple[HiAgentModule | None, list[str]]:
    problems: list[str] = []
    trees = _parse(root, problems)
    found: dict[str, Any] = {}
    empty = ast.Module(body=[], type_ignores=[])

    def need(key: str, file: str, what: str, value: object) -> None:
        if value is None and file in trees:  # a missing file is reported once, above
            problems.append(f"{root / MODULE_FILES[file]}: {what} not found (the reference HiAgent's {key})")
        found[key] = value

    prompts = trees.get("prompts", empty)
    replace = _function(prompts, "_replace_output_format_section")
    summary = _function(prompts, "build_hiagent_summary_messages")
    need("instruction", "prompts", "the string HIAGENT_SUFFIX", _string(_assigned(prompts, "HIAGENT_SUFFIX")))
    need("output_format", "prompts", "the string _HIAGENT_OUTPUT_FORMAT",
         _string(_assigned(prompts, "_HIAGENT_OUTPUT_FORMAT")))
    need("section_start", "prompts", "`marker` in _replace_output_format_section",
         _string(_assigned(replace, "marker")))
    need("section_end", "prompts", "`next_marker` in _replace_output_format_section",
         _string(_assigned(replace, "next_marker")))
    need("summary_system", "prompts", "`system_prompt` in build_hiagent_summary_messages",
         _string(_assigned(summary, "system_prompt")))
    user = _template(_assigned(summary, "user_prompt"))
    need("summary_user", "prompts", "the f-string `user_prompt` in build_hiagent_summary_messages", user)
    if user is not None:
        fields = {f for _, f, _, _ in string.Formatter().parse(user[0]) if f}
        if fields != {"trajectory_text", "subgoal_text"} or "trajectory_text" not in user[1]:
            problems.append(f"{root / MODULE_FILES['prompts']}: the summary prompt's fields are {sorted(fields)}, "
                            "expected trajectory_text (with its empty-trajectory text) and subgoal_text")
    config_cls = next((n for n in ast.walk(trees["config"])
                       if isinstance(n, ast.ClassDef) and n.name == "HiAgentRuntimeConfig"), None) \
        if "config" in trees else None
    config: dict[str, Any] = {}
    for name, kind in CONFIG_FIELDS.items():
        node = _assigned(config_cls, name)
        value = node.value if isinstance(node, ast.Constant) and isinstance(node.value, kind) else None
        need(name, "config", f"HiAgentRuntimeConfig.{name} ({kind.__name__} default)", value)
        config[name] = value
    narrator = trees.get("narrator", empty)
    need("init_obs", "narrator", "the init_obs= string", _string(_keyword(narrator, "init_obs")))
    obs = _template(_keyword(narrator, "state"))
    need("observation", "narrator", "the state= f-string with the player input", obs)
    if obs is not None and {f for _, f, _, _ in string.Formatter().parse(obs[0]) if f} != {"player_input"}:
        problems.append(f"{root / MODULE_FILES['narrator']}: the observation f-string must use only the player input")
    core = trees.get("core", empty)
    serialize = _function(core, "_serialize_history")
    marker = next((n.left.value for n in ast.walk(serialize) if isinstance(n, ast.Compare)
                   and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str)
                   and any(isinstance(op, ast.In) for op in n.ops)), None) if serialize is not None else None
    need("skip_marker", "core", "the skipped-action marker in _serialize_history", marker)
    tok = next((n.args[0].value for n in ast.walk(core) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "encoding_for_model"
                and n.args and isinstance(n.args[0], ast.Constant)), None)
    need("tokenizer_model", "core", "the encoding_for_model(...) model name", tok)
    if problems:
        return None, problems
    f: dict[str, Any] = {**found, **config}
    texts = MemoryTexts(init_obs=f["init_obs"], observation=f["observation"][0], skip_marker=marker,
                        memory_size=f["memory_size"], max_input_tokens=f["max_input_tokens"],
                        summary_max_chars=f["summary_max_chars"], max_retrieve_depth=f["max_retrieve_depth"],
                        tokenizer_model=tok)
    return HiAgentModule(instruction=f["instruction"], output_format=f["output_format"],
                         section_start=f["section_start"], section_end=f["section_end"],
                         system_message=f["system_message"], summary_system=f["summary_system"],
                         summary_user=f["summary_user"][0], empty_trajectory=f["summary_user"][1]["trajectory_text"],
                         texts=texts), []


def check(root: str | Path) -> list[str]:
    """Problems of the checkout's HiAgent modules, each naming the file and the missing piece."""
    return _read(Path(root))[1]


def read(root: str | Path) -> HiAgentModule:
    module, problems = _read(Path(root))
    if module is None:
        raise ModuleError("; ".join(problems))
    return module
