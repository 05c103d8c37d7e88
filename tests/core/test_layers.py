"""The layers stay visible: every import in the packages, read from their source, points downwards.

1. the core (`driftline`: contract, summaries, settings, store, client) imports no stage;
   `driftline.cli` and `driftline.commands` compose the stages into commands and may import any;
2. `detectors` is pure computation over the core: no stage, no I/O library;
3. the stages (collector, scheduler, alerts, worker, dashboard) import the core and the detectors,
   never each other, except the scheduler, which wires detectors and alerts.

Imports inside functions and under TYPE_CHECKING count as much as the ones at the top: a lazy
import hides a dependency, it does not remove it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = "driftline"
DETECTORS = "detectors"
STAGES = ("collector", "scheduler", "alerts", "worker", "dashboard")
PACKAGES = (CORE, DETECTORS, *STAGES)
# the composition root: it wires the stages into the `driftline` command line
COMPOSITION = ("driftline.cli", "driftline.commands")
# what a stage may import besides the core and the detectors
STAGE_MAY_IMPORT = {"scheduler": {"alerts"}}
# a detector computes; reading a store, a broker or the network is a stage's job
IO_LIBRARIES = {"sqlalchemy", "alembic", "psycopg", "kafka", "confluent_kafka", "httpx", "requests", "urllib3",
                "slack_sdk", "redis", "streamlit", "fastapi", "uvicorn", "apscheduler", "socket", "subprocess"}

# Known violations in code being restructured, (importer, imported package) -> why it is still here.
# Empty this list, never grow it: a new entry is a layer broken.
ALLOWED: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement in the file, relative ones resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((name, node.lineno))
    return found


def _all_imports() -> list[tuple[str, str, int]]:
    """(importer module, imported module, line) over every package's source."""
    rows = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            importer = _module_name(path)
            rows += [(importer, imported, line) for imported, line in _imports(path)]
    return rows


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _broken_rule(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when the import points downwards."""
    source, target = importer.split(".")[0], imported.split(".")[0]
    if source == target:
        return None
    if source == CORE:
        if target in (DETECTORS, *STAGES) and not _within(importer, COMPOSITION):
            return "the core imports no stage and no detector"
        return None
    if source == DETECTORS:
        if target in STAGES:
            return "detectors import only the core"
        if target in IO_LIBRARIES:
            return "detectors do no I/O"
        return None
    if target in STAGES and target not in STAGE_MAY_IMPORT.get(source, set()):
        return f"{source} does not import another stage"
    return None


def test_the_packages_are_all_read():
    importers = {importer.split(".")[0] for importer, _, _ in _all_imports()}
    assert importers == set(PACKAGES)


def test_every_import_points_downwards():
    broken = []
    for importer, imported, line in _all_imports():
        why = _broken_rule(importer, imported)
        if why and (importer, imported.split(".")[0]) not in ALLOWED:
            broken.append(f"{importer}:{line} imports {imported}: {why}")
    assert not broken, "\n".join(broken)


def test_the_allow_list_holds_only_violations_that_still_exist():
    present = {(importer, imported.split(".")[0]) for importer, imported, _ in _all_imports()
               if _broken_rule(importer, imported)}
    assert set(ALLOWED) <= present, f"no longer needed, remove: {sorted(set(ALLOWED) - present)}"


@pytest.mark.parametrize("importer, imported, allowed", [
    ("driftline.window_state", "detectors.window", False),
    ("driftline.commands.detect", "detectors.batch", True),
    ("driftline.cli", "worker.commands", True),
    ("detectors.drift", "sqlalchemy.orm", False),
    ("detectors.drift", "driftline.baseline", True),
    ("collector.consumer", "alerts", False),
    ("scheduler.jobs", "alerts", True),
    ("scheduler.jobs", "worker.registry", False),
    ("alerts.lifecycle", "scheduler.jobs", False),
    ("dashboard.app", "detectors.window", True),
])
def test_the_rules(importer, imported, allowed):
    assert (_broken_rule(importer, imported) is None) == allowed
