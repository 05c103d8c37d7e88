"""The layers stay visible: every import in the packages, read from their source, points downwards.

The stages live in top-level folders (collector/, detectors/, ...) but install as `driftline.collector`,
`driftline.detectors`, ... (pyproject.toml's package-dir); the rules speak of those names.

1. the core (`driftline` without its stage subpackages: contract, summaries, settings, store,
   client) imports no stage; `driftline.cli` and `driftline.commands` compose the stages into
   commands and may import any;
2. `driftline.detectors` is pure computation over the core: no stage, no I/O library;
3. the stages (`driftline.collector`, `.scheduler`, `.alerts`, `.worker`, `.dashboard`) import the
   core and the detectors, never each other, except the scheduler, which wires detectors and alerts.

Imports inside functions and under TYPE_CHECKING count as much as the ones at the top: a lazy
import hides a dependency, it does not remove it.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = "driftline"
DETECTORS = "driftline.detectors"
STAGES = ("driftline.collector", "driftline.scheduler", "driftline.alerts", "driftline.worker", "driftline.dashboard",
          "driftline.receiver")
LAYERS = (DETECTORS, *STAGES)  # the core is `driftline` without these
# the composition root: it wires the stages into the `driftline` command line
COMPOSITION = ("driftline.cli", "driftline.commands")
# what a stage may import besides the core and the detectors
STAGE_MAY_IMPORT = {"driftline.scheduler": {"driftline.alerts"}}
# a detector computes; reading a store, a broker or the network is a stage's job
IO_LIBRARIES = {"sqlalchemy", "alembic", "psycopg", "kafka", "confluent_kafka", "httpx", "httpcore", "requests",
                "urllib3", "slack_sdk", "redis", "streamlit", "fastapi", "uvicorn", "apscheduler", "socket",
                "subprocess"}

# Known violations in code being restructured, (importer, imported layer) -> why it is still here.
# Empty this list, never grow it: a new entry is a layer broken.
ALLOWED: dict[tuple[str, str], str] = {}


def _source_folders() -> dict[str, str]:
    """package -> its folder in the repository, as pyproject.toml installs it (collector/ is driftline.collector)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {CORE: CORE, **config.get("package-dir", {})}
    return {package: folder for package, folder in folders.items() if package == CORE or package in LAYERS}


SOURCES = _source_folders()
# collector -> driftline.collector: the folders are not importable by their own names
OLD_TOP_LEVEL_NAMES = {folder: package for package, folder in SOURCES.items() if package != CORE}


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT)
    package = next(p for p, folder in SOURCES.items() if relative.parts[0] == folder)
    parts = (*package.split("."), *relative.with_suffix("").parts[1:])
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
    for folder in SOURCES.values():
        for path in sorted((ROOT / folder).rglob("*.py")):
            importer = _module_name(path)
            rows += [(importer, imported, line) for imported, line in _imports(path)]
    return rows


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _layer(module: str) -> str:
    """The stage or detectors package `module` belongs to, the core, or (a library) its top-level name."""
    return next((layer for layer in LAYERS if _within(module, (layer,))), module.split(".")[0])


def _broken_rule(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when the import points downwards."""
    source, target = _layer(importer), _layer(imported)
    if target in OLD_TOP_LEVEL_NAMES:
        return f"no top-level {target!r} is installed: import it as {OLD_TOP_LEVEL_NAMES[target]}"
    if source == target:
        return None
    if source == CORE:
        if target in LAYERS and not _within(importer, COMPOSITION):
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
    importers = {_layer(importer) for importer, _, _ in _all_imports()}
    assert importers == {CORE, *LAYERS}


def test_the_stages_install_inside_the_driftline_namespace():
    assert set(SOURCES) == {CORE, *LAYERS}, "every stage is mapped in pyproject.toml's [tool.setuptools.package-dir]"


def test_every_import_points_downwards():
    broken = []
    for importer, imported, line in _all_imports():
        why = _broken_rule(importer, imported)
        if why and (importer, _layer(imported)) not in ALLOWED:
            broken.append(f"{importer}:{line} imports {imported}: {why}")
    assert not broken, "\n".join(broken)


def test_the_allow_list_holds_only_violations_that_still_exist():
    present = {(importer, _layer(imported)) for importer, imported, _ in _all_imports()
               if _broken_rule(importer, imported)}
    assert set(ALLOWED) <= present, f"no longer needed, remove: {sorted(set(ALLOWED) - present)}"


@pytest.mark.parametrize("importer, imported, allowed", [
    ("driftline.window_state", "driftline.detectors.families.window", False),
    ("driftline.commands.detect", "driftline.detectors.batch.engine", True),
    ("driftline.cli", "driftline.worker.commands", True),
    ("driftline.detectors.families.drift", "sqlalchemy.orm", False),
    ("driftline.detectors.families.drift", "driftline.baseline", True),
    ("driftline.collector.consumer", "driftline.alerts", False),
    ("driftline.collector.consumer", "driftline.store.db", True),
    ("driftline.scheduler.jobs", "driftline.alerts", True),
    ("driftline.scheduler.jobs", "driftline.worker.registry", False),
    ("driftline.alerts.lifecycle", "driftline.scheduler.jobs", False),
    ("driftline.dashboard.app", "driftline.detectors.families.window", True),
    ("driftline.store.db", "driftline.collector", False),
    ("driftline.collector.consumer", "detectors", False),
    ("driftline.scheduler.jobs", "alerts", False),
    ("driftline.receiver.service", "driftline.collector.dead_letters", False),
    ("driftline.receiver.service", "driftline.client", True),
])
def test_the_rules(importer, imported, allowed):
    assert (_broken_rule(importer, imported) is None) == allowed
