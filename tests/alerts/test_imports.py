"""The alerts package imports without a circle: each module only needs what sits below it."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in (ROOT / "alerts").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                # `from package import module` needs the module; `from module import name` the module
                submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
                candidates = submodules or [node.module]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            targets |= {c for c in candidates if c in modules and c != name}
        graph[name] = targets
    return graph


def test_alerts_has_no_import_cycle():
    graph = _graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, path + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
