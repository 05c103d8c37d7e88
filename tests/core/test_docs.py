"""Docs and code cite only what the repository holds, and the docs' links lead somewhere.

Citations of team notes kept outside the repository, of issue numbers or of numbered working sessions mean
nothing to a reader of the repository; dated benchmark history lives in bench/RESULTS.md.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# .venvs: the benchmark peers' own venvs (bench/peer_envs/*.sh), third-party code outside git
SKIPPED_DIRS = {".git", ".venv", ".venvs", "node_modules", "__pycache__", ".driftline", ".pytest_cache", ".hypothesis",
                "build", "dist", "out"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".cfg", ".ini", ".txt", ".yml", ".yaml", ".json", ".ipynb"}
TEXT_NAMES = {"Makefile", "Dockerfile"}
# Built from parts so that this file does not match its own patterns.
CITATIONS = re.compile("|".join([
    "CONTRACTS" + r"\.md", "ARCHITECTURE" + r"\.md", r"\bissue" + r"\s+#?\d", r"\bsession" + r"\s+\d",
]), re.IGNORECASE)
# Numbered measurement runs ("run 7") belong to bench/RESULTS.md, not to the reference docs.
RUN_NUMBERS = re.compile(r"\bruns?" + r" \d+\b", re.IGNORECASE)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$")


def repository_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts[:-1]):
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            found.append(path)
    return sorted(found)


def reference_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def anchors(markdown: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in without_code_blocks(markdown.read_text()).splitlines():
        match = HEADING.match(line)
        if match:
            found.add(re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-"))
    return found


def test_nothing_cites_files_issues_or_sessions_outside_the_repository():
    hits = []
    for path in repository_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CITATIONS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert hits == [], "\n".join(hits)


def test_reference_docs_hold_no_numbered_runs():
    hits = [f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
            for path in reference_docs()
            for number, line in enumerate(path.read_text().splitlines(), 1) if RUN_NUMBERS.search(line)]
    assert hits == [], "\n".join(hits)


def test_relative_links_in_readme_and_docs_lead_to_files_and_headings_that_exist():
    broken = []
    for doc in reference_docs():
        for match in LINK.finditer(without_code_blocks(doc.read_text())):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http(s), mailto: not the repository's business
            file_part, _, anchor = target.partition("#")
            destination = (doc.parent / file_part).resolve() if file_part else doc
            if not destination.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == [], "\n".join(broken)
