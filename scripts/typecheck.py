"""Run mypy on the core (`driftline/`) and the detectors (`detectors/`) as they install: `driftline.detectors`.

The stages live in top-level folders but install inside the `driftline` namespace (pyproject.toml's
package-dir), which mypy cannot follow through the editable install's import hook. So this lays out the
installed tree as links under .venv/typecheck/ (driftline/* beside driftline/detectors -> detectors/, ...)
and checks the core's and the detectors' files there; the stages are read for their types only
(pyproject.toml's [tool.mypy] follow_imports = "silent").

Usage: `.venv/bin/python scripts/typecheck.py` (what `make typecheck` runs); extra arguments go to mypy.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".venv" / "typecheck"


def lay_out() -> Path:
    """.venv/typecheck/driftline: the core's entries and one link per stage folder, as the package installs."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    if TREE.exists():
        shutil.rmtree(TREE)
    top = TREE / "driftline"
    top.mkdir(parents=True)
    for entry in (ROOT / "driftline").iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in package_dir.items():
        (top / package.removeprefix("driftline.")).symlink_to(ROOT / folder)
    return top


def main(argv: list[str]) -> int:
    lay_out()
    # the core's modules and packages (its links into driftline/), and the detectors
    core = [p for p in sorted((TREE / "driftline").iterdir()) if p.resolve().parent == ROOT / "driftline"
            and (p.suffix == ".py" or (p / "__init__.py").exists())]
    targets = [str(p.relative_to(TREE)) for p in (*core, TREE / "driftline" / "detectors")]
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(ROOT / ".venv" / "mypy-cache"), *targets, *argv]
    return subprocess.run(command, cwd=TREE).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
