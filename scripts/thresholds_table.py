"""Write docs/configuration.md's "Default thresholds" table from driftline/defaults.py (the one place they live),
and its "Drift statistics" table from the drift statistics' registry (`driftline.detectors.stats.registry`).

Usage: `.venv/bin/python scripts/thresholds_table.py` rewrites the table between its markers;
`--check` exits 1 when the table is out of date (tests/core/test_readme.py runs it).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# driftline/defaults.py and the serving side's knobs it re-exports
DEFAULTS = (ROOT / "driftline" / "defaults.py", ROOT / "driftline" / "serving_defaults.py",
            ROOT / "driftline" / "embedding_defaults.py", ROOT / "driftline" / "batch_defaults.py",
            ROOT / "driftline" / "rollout_defaults.py", ROOT / "driftline" / "overview_defaults.py",
            ROOT / "driftline" / "otlp_defaults.py", ROOT / "driftline" / "kafka_client_defaults.py",
            ROOT / "driftline" / "rollup_defaults.py")
TARGET = ROOT / "docs" / "configuration.md"
START, END = "<!-- thresholds:start -->", "<!-- thresholds:end -->"
STATISTICS_START, STATISTICS_END = "<!-- statistics:start -->", "<!-- statistics:end -->"


def _clean(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str]]:
    """(section, NAME, value, why) for every upper-case constant of the defaults files, in their order."""
    return [row for path in DEFAULTS for row in _rows_of(path.read_text())]


def _rows_of(source: str) -> list[tuple[str, str, str, str]]:
    """(section, NAME, value, why) for every upper-case constant, the why from the comments above it."""
    lines = source.splitlines()
    out = []
    section = ""
    section_at = {i: line.strip("# -").strip() for i, line in enumerate(lines, 1)
                  if line.startswith("# ---")}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if not isinstance(target, ast.Name) or not target.id.isupper() or target.id.startswith("_"):
            continue
        for line_no in sorted(section_at):
            if line_no < node.lineno:
                section = section_at[line_no]
        comment = []
        i = node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#") and not lines[i].startswith("# ---"):
            comment.insert(0, lines[i].lstrip()[1:].strip())
            i -= 1
        value = ast.get_source_segment(source, node.value) or ""
        out.append((section, target.id, _clean(value), _clean(" ".join(comment))))
    return out


def table() -> str:
    parts = [START, "", "| section | name | default | why |", "|---|---|---|---|"]
    parts += [f"| {s} | `{n}` | `{v}` | {w or '(same reason as the row above)'} |" for s, n, v, w in rows()]
    parts += ["", END]
    return "\n".join(parts)


def statistics_table() -> str:
    """One row per registered drift statistic: its key (the test's name, its [drift] key), kinds, role, default."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from driftline.detectors.stats.registry import STATISTICS

    parts = [STATISTICS_START, "", "| statistic | `[drift]` key | kinds | role | default threshold | why |",
             "|---|---|---|---|---|---|"]
    for found in STATISTICS.values():
        default = "off" if found.optional else f"`{found.threshold:g}`"
        parts.append(f"| `{found.key}` | `{found.toml_key}` | {', '.join(sorted(found.kinds))} | {found.role} | "
                     f"{default} | {_clean(found.why)} |")
    parts += ["", STATISTICS_END]
    return "\n".join(parts)


def _replace(text: str, start: str, end: str, block: str) -> str | None:
    if start not in text or end not in text:
        return None
    before, rest = text.split(start, 1)
    return before + block + rest.split(end, 1)[1]


def main() -> int:
    text = TARGET.read_text()
    updated = text
    for start, end, block in ((START, END, table), (STATISTICS_START, STATISTICS_END, statistics_table)):
        replaced = _replace(updated, start, end, block())
        if replaced is None:
            print(f"{TARGET.relative_to(ROOT)} has no {start} ... {end} markers", file=sys.stderr)
            return 1
        updated = replaced
    if "--check" in sys.argv:
        if updated != text:
            print(f"{TARGET.relative_to(ROOT)}'s default thresholds are out of date: run scripts/thresholds_table.py",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
