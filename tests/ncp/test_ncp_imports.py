"""The NCP modules import each other without a cycle (also counting imports made only for type checking)."""
from __future__ import annotations

import ast
from pathlib import Path

import wse_platform.ncp as ncp_pkg


def _graph() -> dict[str, set[str]]:
    root = Path(ncp_pkg.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("wse_platform.ncp."):
                    deps.add(node.module.rsplit(".", 1)[1])
                elif node.module == "wse_platform.ncp":
                    deps.update(a.name for a in node.names)
        graph[path.stem] = deps - {path.stem}
    return graph


def test_audit_episode_and_prompter_no_longer_import_each_other_in_a_circle():
    graph = _graph()
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            cycles.append(stack[stack.index(node):] + [node])
            return
        for dep in sorted(graph.get(node, ())):
            visit(dep, stack + [node])

    for start in ("audit", "episode", "prompter", "state"):
        visit(start, [])
    assert cycles == []
