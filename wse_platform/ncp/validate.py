"""Core of `wse validate ncp-spec FILE_OR_DIR…`: check spec files a user wrote.

Every problem is printed as ``file: record_id: field: message`` so a researcher can
jump straight to the record; the exit code is 1 when any *error* was found
(warnings, e.g. a commitment without a node mention, are printed but do not fail).
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from wse_platform.ncp.spec import DOCUMENT, SpecProblem, load_spec_file, read_index

__all__ = ["SpecProblem", "validate_paths", "main"]

SPEC_SUFFIXES = (".yaml", ".yml")


def _expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path], list[SpecProblem]]:
    """(spec files, index files, problems for paths that do not exist)."""
    specs: list[Path] = []
    indexes: list[Path] = []
    problems: list[SpecProblem] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SPEC_SUFFIXES)
        elif p.is_file():
            found = [p]
        else:
            problems.append(SpecProblem(str(p), DOCUMENT, "(file)", "no such file or directory"))
            continue
        for f in found:
            (indexes if f.stem == "index" else specs).append(f)
    return list(dict.fromkeys(specs)), list(dict.fromkeys(indexes)), problems


def _check_index(index: Path) -> list[SpecProblem]:
    """Every listed id must have `specs/<id>.yaml` next to the index (the upstream layout)."""
    ids, problems = read_index(index)
    spec_dir = index.parent / "specs"
    for sid in ids:
        if not (spec_dir / f"{sid}.yaml").exists():
            problems.append(SpecProblem(str(index), sid, "specs", f"no file {spec_dir / (sid + '.yaml')}"))
    return problems


def validate_paths(paths: Sequence[str | Path], include_warnings: bool = False) -> list[SpecProblem]:
    """All problems of the given spec files / directories (directories are searched recursively;
    files named `index.yaml` are checked as evaluation-order indexes)."""
    specs, indexes, problems = _expand(paths)
    for index in indexes:
        problems += _check_index(index)
    for f in specs:
        problems += load_spec_file(f)[1]
    if not include_warnings:
        problems = [p for p in problems if p.severity == "error"]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Print every problem, one per line; exit code 1 if any error, 2 for bad usage, else 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or any(a in ("-h", "--help") for a in args):
        print("usage: wse validate ncp-spec FILE_OR_DIR [FILE_OR_DIR ...]", file=sys.stderr)
        return 2 if not args else 0
    problems = validate_paths(args, include_warnings=True)
    for p in problems:
        print(p.line())
    errors = [p for p in problems if p.severity == "error"]
    n_files = len(_expand(args)[0])
    print(f"{n_files} spec file(s) checked: {len(errors)} error(s), {len(problems) - len(errors)} warning(s)",
          file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
