"""`make test-fast` leaves out the tests marked `e2e`, `browser`, `postgres` and `slow`: a test module that starts
`driftline up` or a browser must carry one of those markers, or the inner loop silently grows by minutes.

Read from the source (no test is run): tests/conftest.py marks everything under tests/e2e `e2e`, its BROWSER_FILES
`browser` and every test on the PostgreSQL store `postgres`; any other module marks itself, with a module-level
`pytestmark` or a decorator on the test that starts it. A `driftline up` that must refuse before it starts
anything (a port in use) takes seconds: such a test is listed in REFUSED_BEFORE_START.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import BROWSER_FILES, E2E_FOLDER

TESTS = Path(__file__).resolve().parents[1]
FAST_EXCLUDED = {"e2e", "browser", "slow"}  # `postgres` follows the store fixture, never the source
SUBPROCESS_CALLS = {"run", "Popen", "check_call", "check_output", "call", "system"}
# (module, test) that run `driftline up` only to see it refuse, before a broker or a process starts
REFUSED_BEFORE_START = {
    ("core/test_up_receiver.py", "test_up_refuses_a_receiver_port_in_use_naming_the_ways_out"),
    ("scheduler/test_scheduler_metrics.py", "test_up_refuses_a_scheduler_metrics_port_in_use_in_one_line"),
}


def _is_up_argv(node: ast.AST) -> bool:
    """An argument list of `driftline up`: `[DRIFTLINE, "up", "--..."]`, `["up", "--..."]` or `["up"]`."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return False
    items = node.elts
    for at, item in enumerate(items[:2]):
        if not (isinstance(item, ast.Constant) and item.value == "up"):
            continue
        if at == 1 and isinstance(items[0], ast.Constant):
            continue  # a list of words ("status", "up"), not an executable and its command
        following = items[at + 1] if at + 1 < len(items) else None
        if following is None or not isinstance(following, ast.Constant) \
                or (isinstance(following.value, str) and following.value.startswith("--")):
            return True
    return False


def _starts(node: ast.AST) -> str | None:
    """What `node` starts: "up", "browser" or nothing."""
    if _is_up_argv(node):
        return "up"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if any(name.split(".")[0] == "playwright" for name in names):
            return "browser"
        if isinstance(node, ast.ImportFrom) and node.module == "tests.e2e.conftest":
            return "up"  # the e2e tests' `up` runner
        if isinstance(node, ast.ImportFrom) and node.module == "driftline.commands.up" \
                and any(a.name == "up" for a in node.names):
            return "up"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "importorskip" and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith("playwright"):
            return "browser"
        if name in SUBPROCESS_CALLS and any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                            and "driftline up" in a.value for a in node.args):
            return "up"
        if isinstance(func, ast.Attribute) and func.attr == "up" and isinstance(func.value, ast.Name) \
                and func.value.id == "up":
            return "up"  # `from driftline.commands import up; up.up(...)`: the stack in this process
    return None


def _marks(decorators: list[ast.expr]) -> set[str]:
    """Marker names in decorators or a `pytestmark` value: `pytest.mark.slow`, `pytest.mark.e2e(...)`."""
    found = set()
    for expr in decorators:
        for node in ast.walk(expr):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "mark":
                found.add(node.attr)
    return found


def unmarked_starts(path: Path, source: str) -> list[str]:
    """Where the module at `path` starts `driftline up` or a browser without a marker that keeps it out of
    `make test-fast`: "line N: what (in FUNCTION)"."""
    relative = path.relative_to(TESTS).as_posix()
    if E2E_FOLDER in path.parents or path.name in BROWSER_FILES:
        return []
    tree = ast.parse(source)
    module_marks = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in stmt.targets):
            module_marks |= _marks([stmt.value])
    if module_marks & FAST_EXCLUDED:
        return []
    problems = []

    def visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and function is None:
            function = node
        what = _starts(node)
        if what is not None:
            name = function.name if function is not None else None
            marked = function is not None and name.startswith("test") \
                and bool(_marks(function.decorator_list) & FAST_EXCLUDED)
            if not marked and (relative, name) not in REFUSED_BEFORE_START:
                problems.append(f"line {node.lineno}: {'driftline up' if what == 'up' else 'a browser'}"
                                + (f" (in {name})" if name else " (module level)"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return problems


def test_every_module_that_starts_up_or_a_browser_is_out_of_the_fast_set():
    problems = {}
    for path in sorted(TESTS.rglob("*.py")):
        if "support" in path.relative_to(TESTS).parts or path == Path(__file__).resolve():
            continue
        found = unmarked_starts(path, path.read_text())
        if found:
            problems[path.relative_to(TESTS).as_posix()] = found
    assert not problems, ("mark these `e2e`, `browser` or `slow` (a module-level `pytestmark` or a decorator on "
                          f"the test) or move them under tests/e2e: {problems}")


def test_the_listed_refusals_still_exist():
    """An entry of REFUSED_BEFORE_START whose test is gone or renamed would silently allow a new one."""
    for module, name in REFUSED_BEFORE_START:
        tree = ast.parse((TESTS / module).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body), (module, name)


@pytest.mark.parametrize("source, expected", [
    ('import subprocess\ndef test_a(): subprocess.run([DRIFTLINE, "up", "--duration", "60"])\n',
     ["line 2: driftline up (in test_a)"]),
    ('def test_a(): main(["up"])\n', ["line 1: driftline up (in test_a)"]),
    ('def test_a(): subprocess.Popen("driftline up --scenario none", shell=True)\n',
     ["line 1: driftline up (in test_a)"]),
    ('from playwright.sync_api import sync_playwright\n', ["line 1: a browser (module level)"]),
    ('import pytest\ndef test_a():\n    pytest.importorskip("playwright.sync_api")\n',
     ["line 3: a browser (in test_a)"]),
    ('from tests.e2e.conftest import start_up\n', ["line 1: driftline up (module level)"]),
    ('def helper(): return [DRIFTLINE, "up"]\n', ["line 1: driftline up (in helper)"]),
    # marked, at module level or on the test
    ('import pytest\npytestmark = [pytest.mark.slow, pytest.mark.timeout(9)]\n'
     'def test_a(): run([DRIFTLINE, "up"])\n', []),
    ('import pytest\n@pytest.mark.e2e\ndef test_a(): run([DRIFTLINE, "up", "--duration", "9"])\n', []),
    # a marker on a helper is not a marker on the tests that call it
    ('import pytest\n@pytest.mark.slow\ndef helper(): run([DRIFTLINE, "up"])\n',
     ["line 3: driftline up (in helper)"]),
    # not `up`: a list of command names, another command, a docstring
    ('COMMANDS = ["up", "broker", "train"]\ndef test_a(): run([DRIFTLINE, "status", "up"])\n', []),
    ('def test_a():\n    """What `driftline up` does."""\n    run([DRIFTLINE, "collector", "--idle-exit", "3"])\n', []),
])
def test_the_check_finds_what_starts_the_stack_or_a_browser(source, expected):
    assert unmarked_starts(TESTS / "core" / "test_example.py", source) == expected
