"""No signature carries more than eight values: a function that needs more takes a parameter object (a
`WindowKey`, a `FlushSetup`, a `FolderSetup`, a `BucketQuery`, an `InferenceCall`). The exceptions are listed with their reason;
the list may only shrink (an entry that no longer has too many parameters fails too, so it is removed).

A command-line command is exempt: click passes each of its options as one parameter."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("driftline", "collector", "detectors", "alerts", "scheduler", "worker", "dashboard", "receiver")
MOST = 8

# "path::qualified name" -> why it still takes more than MOST values
EXCEPTIONS: dict[str, str] = {
    "driftline/client/logger.py::InferenceLogger.__init__": "the client's constructor: keyword arguments for users",
    "driftline/client/logger.py::InferenceLogger.log": "the client's keyword arguments for users, built into one "
                                                       "InferenceCall",
    "driftline/client/logger.py::InferenceLogger.log_soon": "as log",
    "detectors/batch/baseline.py::baseline_in_memory": "detectors/batch is being restructured around the statistics "
                                                       "registry",
    "detectors/batch/baseline.py::stream_baseline": "as baseline_in_memory",
    "detectors/families/window.py::evaluate_window": "detectors/ is being restructured around the statistics registry",
    "detectors/rollout/outcome.py::judge_window": "as evaluate_window",
    "driftline/baseline/summary.py::compute_baseline": "the library's documented keyword arguments for users, "
                                                       "its segment half given one TrainingOutcomes",
    "driftline/commands/up.py::_run_rag": "the `up` command's options, passed through as the command takes them",
    "driftline/otlp/rag_standin.py::_span": "one OTLP span's fields, as the protobuf message names them",
    "scheduler/rollups.py::_upsert_rollup": "one rollup row's columns",
}


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A click command or one of its option decorators' functions."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("command", "option", "argument", "group", "common_options", "pass_context"):
            return True
    return False


def _counts() -> dict[str, int]:
    found: dict[str, int] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()

            def visit(node: ast.AST, prefix: str) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.ClassDef):
                        visit(child, f"{prefix}{child.name}.")
                    elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        args = child.args
                        names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                        if names and names[0] in ("self", "cls"):
                            names = names[1:]
                        count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
                        if count > MOST and not _is_command(child):
                            found[f"{relative}::{prefix}{child.name}"] = count
                        visit(child, f"{prefix}{child.name}.")

            visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_no_signature_carries_more_than_eight_values():
    too_many = _counts()
    new = {name: count for name, count in too_many.items() if name not in EXCEPTIONS}
    assert not new, f"more than {MOST} parameters (take a parameter object): {new}"
    fixed = sorted(set(EXCEPTIONS) - set(too_many))
    assert not fixed, f"no longer over {MOST} parameters: remove from EXCEPTIONS: {fixed}"
