"""NCP-Bench narrative specifications: schema, checks and loader.

A spec is one interactive-narrative environment: the player role, the facts the
player holds at t = 0 (F0), the commitments the narrator must keep (C) and the
reference trajectory (R). The released files carry no structured commitment →
node link, so links are derived from the ``s_N`` mentions in a commitment's texts.

Two entry points:

* ``NarrativeSpec(**data)`` — programmatic construction (e.g. extraction output);
  raises ``ValueError`` on the first structural problem.
* ``load_spec_file`` / ``load_specs`` — files; collect *every* problem as a
  ``SpecProblem(file, record_id, field, message)`` so one bad file never stops
  the others from loading.

What is accepted is what the reference loader (NLP2CT/NCP-Bench `dataset.py`) accepts: ids
are any non-empty strings (a gap or break in the f_N / c_N / s_N sequence, or another id
form, is a warning), `negated` may be missing (false), any number of genres, empty lists
(no commitments...), keys the reference does not read (ignored, with a warning). Errors are
what it rejects: a missing or blank required text, a field of the wrong type, a duplicate id,
a commitment type outside invariant / ordering / achievement, `meta.id` unlike the file name.
One deliberate difference: a commitment that mentions a trajectory node the spec does not have
(`s_9` of 5 nodes) stays an error here (the reference does not read node mentions).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, PrivateAttr, StrictBool, StringConstraints,
                      ValidationError, model_validator)

from wse_platform.config import DATA_DIR
from wse_platform.inputs import InputFileError, load_yaml, read_input_text

NCP_DATASET_DIR = DATA_DIR / "ncp_bench" / "dataset"
COMMITMENT_TYPES: tuple[str, ...] = ("invariant", "ordering", "achievement")
ID_PREFIX = {"initial_facts": "f_", "commitments": "c_", "trajectory": "s_"}
SUBTITLE_SEPARATOR = "——"  # how the released titles join a subtitle

# `s_12`, also `S_12` (one released file capitalises it); `s_8's` still matches.
NODE_MENTION = re.compile(r"\b[sS]_(\d+)\b")
# `s_0 through s_5`, `s_0 to s_5`, `s_0–s_2`: a span covers every node in between.
NODE_SPAN = re.compile(r"\b[sS]_(\d+)\s*(?:through|to|thru|-|–|—)\s*[sS]_(\d+)\b")
COMMITMENT_TEXT_FIELDS = ("description", "satisfaction_condition", "violation_condition")



def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


# Non-empty text. Checked by a validator, not a regex, so the JSON schema stays usable for grammar-constrained
# decoding (llama.cpp only accepts anchored patterns).
Text = Annotated[str, StringConstraints(min_length=1), AfterValidator(_not_blank)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # keys the reference does not read are ignored


class SpecMeta(_Strict):
    id: Text
    title: Text
    genres: list[Text]  # [primary, secondary] in the release; another count is a warning
    player_role: Text


class InitialFact(_Strict):
    id: Text
    content: Text
    negated: StrictBool = False  # True: the fact starts inactive


class Commitment(_Strict):
    id: Text
    type: Literal["invariant", "ordering", "achievement"]
    description: Text
    satisfaction_condition: Text
    violation_condition: Text

    def mentions(self) -> dict[str, list[int]]:
        """Node indices mentioned per text field (in order of appearance, deduplicated)."""
        out: dict[str, list[int]] = {}
        for name in COMMITMENT_TEXT_FIELDS:
            seen: list[int] = []
            for m in NODE_MENTION.finditer(getattr(self, name)):
                if int(m.group(1)) not in seen:
                    seen.append(int(m.group(1)))
            out[name] = seen
        return out

    @property
    def node_mentions(self) -> list[str]:
        """Node ids written explicitly in any of the three texts, sorted by index."""
        idx = sorted({i for ids in self.mentions().values() for i in ids})
        return [f"s_{i}" for i in idx]

    @property
    def node_links(self) -> list[str]:
        """Derived commitment → node links: explicit mentions plus every node inside a written span."""
        idx = {int(s[2:]) for s in self.node_mentions}
        for name in COMMITMENT_TEXT_FIELDS:
            for m in NODE_SPAN.finditer(getattr(self, name)):
                a, b = sorted((int(m.group(1)), int(m.group(2))))
                idx.update(range(a, b + 1))
        return [f"s_{i}" for i in sorted(idx)]


class TrajectoryNode(_Strict):
    id: Text
    description: Text
    trigger_event: Text
    key_delta: Text


class NarrativeSpec(_Strict):
    meta: SpecMeta
    synopsis: Text
    initial_facts: list[InitialFact]
    commitments: list[Commitment]
    trajectory: list[TrajectoryNode]  # ordered

    _source_file: str | None = PrivateAttr(default=None)
    _eval_order: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_checks(self) -> "NarrativeSpec":
        problems = structural_problems(self)
        if problems:
            raise ValueError("; ".join(f"{rid}: {field}: {msg}" for rid, field, msg in problems))
        return self

    # ---- convenience ---------------------------------------------------------------
    @property
    def spec_id(self) -> str:
        return self.meta.id

    @property
    def primary_genre(self) -> str:
        return self.meta.genres[0] if self.meta.genres else "(no genre)"

    @property
    def display_title(self) -> str:
        return display_title(self.meta.title)

    @property
    def source_file(self) -> str | None:
        return self._source_file

    @property
    def eval_order(self) -> int | None:
        """Position in `index.yaml` (the fixed evaluation order), when loaded from a dataset."""
        return self._eval_order

    def with_origin(self, source_file: str | None, eval_order: int | None) -> "NarrativeSpec":
        """Attach where the spec came from (file, index position); not part of the spec's content."""
        self._source_file, self._eval_order = source_file, eval_order
        return self

    def node(self, node_id: str) -> TrajectoryNode:
        for n in self.trajectory:
            if n.id == node_id:
                return n
        raise KeyError(f"{self.spec_id}: no trajectory node {node_id!r}")

    def commitment_links(self) -> dict[str, list[str]]:
        return {c.id: c.node_links for c in self.commitments}

    def commitment_type_counts(self) -> dict[str, int]:
        return {t: sum(c.type == t for c in self.commitments) for t in COMMITMENT_TYPES}


def display_title(title: str) -> str:
    """`Star Wars——A New Hope` → `Star Wars: A New Hope`."""
    parts = [p.strip() for p in title.split(SUBTITLE_SEPARATOR)]
    return ": ".join(p for p in parts if p)


def structural_problems(spec: NarrativeSpec) -> list[tuple[str, str, str]]:
    """(record_id, field, message) for duplicate ids and dangling node mentions (errors)."""
    problems: list[tuple[str, str, str]] = []
    for list_name in ID_PREFIX:
        for i, rec in enumerate(getattr(spec, list_name)):
            if any(r.id == rec.id for r in getattr(spec, list_name)[:i]):
                problems.append((rec.id, "id", f"duplicate id in {list_name}"))
    n_nodes = len(spec.trajectory)
    for c in spec.commitments:
        for field_name, idx in c.mentions().items():
            for i in idx:
                if i >= n_nodes:
                    problems.append((c.id, field_name, f"mentions s_{i} but the trajectory has only "
                                                       f"s_0..s_{n_nodes - 1}"))
    return problems


# ---- problems and loading ---------------------------------------------------------------

@dataclass(frozen=True)
class SpecProblem:
    """One problem in a spec file, named by file, record id and field."""

    file: str
    record_id: str
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def line(self) -> str:
        msg = self.message if self.severity == "error" else f"warning: {self.message}"
        return f"{self.file}: {self.record_id}: {self.field}: {msg}"


# libyaml's safe loader when available: same documents, ~10x faster on the 100 released specs
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

DOCUMENT = "(document)"  # record id for problems not inside a record (YAML syntax, top-level keys)


def _pydantic_problems(file: str, record_id: str, err: ValidationError) -> list[SpecProblem]:
    out = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        field = ".".join(loc) if loc else "(record)"
        if e["type"] == "missing":
            msg = "missing required field"
        elif e["type"] == "extra_forbidden":
            msg = "unknown field"
        elif e["type"] == "literal_error":
            msg = f"must be one of {', '.join(COMMITMENT_TYPES)} (got {e.get('input')!r})"
        elif e["type"] == "string_pattern_mismatch" and loc and loc[-1] == "id":
            msg = f"malformed id {e.get('input')!r}"
        elif e["type"] in ("value_error", "string_too_short"):
            msg = str(e["ctx"]["error"]) if e["type"] == "value_error" else "must not be empty"
        else:
            msg = e["msg"]
        out.append(SpecProblem(file, record_id, field, msg))
    return out


def _record_id(raw: Any, list_name: str, position: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"].strip():
        return raw["id"]
    return f"{list_name}[{position}]"


def parse_spec(raw: Any, file: str, expected_id: str | None = None) -> tuple[NarrativeSpec | None, list[SpecProblem]]:
    """Validate one parsed YAML document, collecting every problem; the spec only if there are none."""
    if not isinstance(raw, dict):
        return None, [SpecProblem(file, DOCUMENT, "(top level)", "must be a mapping with keys meta, synopsis, "
                                                                 "initial_facts, commitments, trajectory")]
    problems: list[SpecProblem] = []
    notes: list[SpecProblem] = []  # warnings: what the reference loader accepts but the release never does

    def unknown_keys(record: Any, model: type[BaseModel], rid: str) -> None:
        if isinstance(record, dict):
            for key in sorted(set(record) - set(model.model_fields), key=str):
                notes.append(SpecProblem(file, rid, str(key), "unknown field (ignored)", "warning"))

    unknown_keys(raw, NarrativeSpec, DOCUMENT)
    for key in NarrativeSpec.model_fields:
        if key not in raw:
            problems.append(SpecProblem(file, DOCUMENT, key, "missing required field"))

    meta = raw.get("meta")
    if "meta" in raw:
        try:
            SpecMeta.model_validate(meta)
        except ValidationError as err:
            problems += _pydantic_problems(file, "meta", err)
        unknown_keys(meta, SpecMeta, "meta")
        meta_id = meta.get("id") if isinstance(meta, dict) else None
        if expected_id is not None and isinstance(meta_id, str) and meta_id != expected_id:
            problems.append(SpecProblem(file, "meta", "id", f"{meta_id!r} must equal the file name "
                                                            f"stem {expected_id!r}"))
        genres = meta.get("genres") if isinstance(meta, dict) else None
        if isinstance(genres, list) and len(genres) != 2:
            notes.append(SpecProblem(file, "meta", "genres", f"{len(genres)} genre(s); the release gives "
                                                             "[primary, secondary]", "warning"))
    if "synopsis" in raw and (not isinstance(raw["synopsis"], str) or not raw["synopsis"].strip()):
        problems.append(SpecProblem(file, DOCUMENT, "synopsis", "must be a non-empty string"))

    models = {"initial_facts": InitialFact, "commitments": Commitment, "trajectory": TrajectoryNode}
    for list_name, model in models.items():
        if list_name not in raw:
            continue
        items = raw[list_name]
        if not isinstance(items, list):
            problems.append(SpecProblem(file, DOCUMENT, list_name, "must be a list"))
            continue
        if not items:
            notes.append(SpecProblem(file, DOCUMENT, list_name, "empty list", "warning"))
        prefix = ID_PREFIX[list_name]
        seen: set[str] = set()
        for i, item in enumerate(items):
            rid = _record_id(item, list_name, i)
            try:
                model.model_validate(item)
            except ValidationError as err:
                problems += _pydantic_problems(file, rid, err)
            unknown_keys(item, model, rid)
            if list_name == "initial_facts" and isinstance(item, dict) and "negated" not in item:
                notes.append(SpecProblem(file, rid, "negated", "missing (read as false)", "warning"))
            rec_id = item.get("id") if isinstance(item, dict) else None
            if isinstance(rec_id, str) and rec_id.strip():
                if rec_id in seen:
                    problems.append(SpecProblem(file, rid, "id", f"duplicate id in {list_name}"))
                elif rec_id != f"{prefix}{i}":
                    notes.append(SpecProblem(file, rid, "id", f"expected '{prefix}{i}': the release numbers "
                                                              f"{list_name} {prefix}0, {prefix}1, … in file order",
                                             "warning"))
                seen.add(rec_id)

    # Dangling node mentions, checked on the raw texts so they are reported even when other fields are bad.
    trajectory = raw.get("trajectory")
    commitments = raw.get("commitments")
    if isinstance(trajectory, list) and trajectory and isinstance(commitments, list):
        n_nodes = len(trajectory)
        for i, c in enumerate(commitments):
            if not isinstance(c, dict):
                continue
            for field_name in COMMITMENT_TEXT_FIELDS:
                text = c.get(field_name)
                if not isinstance(text, str):
                    continue
                for idx in sorted({int(m.group(1)) for m in NODE_MENTION.finditer(text)}):
                    if idx >= n_nodes:
                        problems.append(SpecProblem(file, _record_id(c, "commitments", i), field_name,
                                                    f"mentions s_{idx} but the trajectory has only "
                                                    f"s_0..s_{n_nodes - 1}"))
    if problems:
        return None, problems + notes
    spec = NarrativeSpec.model_validate(raw)  # all checks above passed, so this cannot fail
    spec._source_file = file
    return spec, notes + spec_warnings(spec, file)


def spec_warnings(spec: NarrativeSpec, file: str) -> list[SpecProblem]:
    """Quality notes that do not make a spec unusable (the released data has a few)."""
    out = []
    if spec.commitments and not any(c.type == "achievement" for c in spec.commitments):
        out.append(SpecProblem(file, DOCUMENT, "commitments", "no achievement commitment: an episode can never "
                                                              "end in SUCCESS", "warning"))
    for c in spec.commitments:
        if not c.node_mentions:
            out.append(SpecProblem(file, c.id, "description", f"{c.type} commitment mentions no trajectory "
                                                              "node (no derived node link)", "warning"))
    return out


def load_spec_file(path: str | Path) -> tuple[NarrativeSpec | None, list[SpecProblem]]:
    """Load one spec file: (spec or None, problems incl. warnings)."""
    path = Path(path)
    file = str(path)
    try:
        raw = load_yaml(read_input_text(path, what="spec file"), loader=_YAML_LOADER)
    except InputFileError as err:   # a FIFO, a file above the size limit
        return None, [SpecProblem(file, DOCUMENT, "(file)", str(err))]
    except OSError as err:
        return None, [SpecProblem(file, DOCUMENT, "(file)", f"cannot read: {err.strerror or err}")]
    except UnicodeDecodeError as err:
        return None, [SpecProblem(file, DOCUMENT, "(file)", f"not UTF-8: {err}")]
    except yaml.YAMLError as err:
        return None, [SpecProblem(file, DOCUMENT, "(yaml)", f"invalid YAML: {err}".replace("\n", " "))]
    return parse_spec(raw, file, expected_id=path.stem)


def read_index(index_path: str | Path) -> tuple[list[str], list[SpecProblem]]:
    """The fixed evaluation order from `index.yaml` (`specs: [movie48, …]`)."""
    index_path = Path(index_path)
    file = str(index_path)
    try:
        raw = load_yaml(read_input_text(index_path, what="spec index"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InputFileError) as err:
        return [], [SpecProblem(file, DOCUMENT, "specs", f"cannot read index: {err}".replace("\n", " "))]
    ids = raw.get("specs") if isinstance(raw, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return [], [SpecProblem(file, DOCUMENT, "specs", "must be a list of spec ids (strings)")]
    problems = []
    seen: set[str] = set()
    for i, sid in enumerate(ids):
        if sid in seen:
            problems.append(SpecProblem(file, sid, f"specs[{i}]", "listed more than once"))
        seen.add(sid)
    return list(dict.fromkeys(ids)), problems


def load_specs(dataset_dir: str | Path = NCP_DATASET_DIR, include_warnings: bool = False,
               exclude: Iterable[str] = ()) -> tuple[list[NarrativeSpec], list[SpecProblem]]:
    """All specs of a dataset in the evaluation order of its `index.yaml`; bad ones become problems.

    Layout: ``<dataset_dir>/index.yaml`` and ``<dataset_dir>/specs/<id>.yaml``. Without an index the
    files are taken in name order. Warnings (e.g. a commitment without a node mention) are only
    returned when asked for; they never exclude a spec. Spec ids in `exclude` are neither loaded
    nor checked (they keep their evaluation-order position, so others do not move up); an
    excluded id that the dataset does not have is an error (a typo must not go unnoticed).
    """
    excluded = set(exclude)
    dataset_dir = Path(dataset_dir)
    spec_dir = dataset_dir / "specs"
    index_path = dataset_dir / "index.yaml"
    files = {p.stem: p for p in sorted(spec_dir.glob("*.yaml"))}
    problems: list[SpecProblem] = []
    listed: list[str] = []
    if index_path.exists():
        order, problems = read_index(index_path)
        listed = list(order)
        for sid in order:
            if sid not in files:
                problems.append(SpecProblem(str(index_path), sid, "specs", f"no file {spec_dir / (sid + '.yaml')}"))
        for sid in files:
            if sid not in order:
                problems.append(SpecProblem(str(files[sid]), sid, "(file)", f"not listed in {index_path}",
                                            "warning"))
        order = [s for s in order if s in files]
    else:
        order = sorted(files)
    problems = [p for p in problems if p.record_id not in excluded]
    for sid in sorted(excluded - set(listed) - set(files)):
        problems.append(SpecProblem(str(index_path if index_path.exists() else spec_dir), sid, "exclude",
                                    "excluded spec id is not in the dataset"))
    specs: list[NarrativeSpec] = []
    for pos, sid in enumerate(order):
        if sid in excluded:
            continue
        spec, found = load_spec_file(files[sid])
        problems += found
        if spec is not None:
            spec._eval_order = pos
            specs.append(spec)
    if not include_warnings:
        problems = [p for p in problems if p.severity == "error"]
    return specs, problems
