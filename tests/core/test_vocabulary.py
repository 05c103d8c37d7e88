"""One vocabulary: no stage spells a detector family as a bare string; it names `driftline.vocabulary`'s."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from driftline import vocabulary

ROOT = Path(__file__).resolve().parents[2]
# The core and the stages that read results (the scheduler, once it is a stage of its own).
PACKAGES = [p for p in ("driftline", "detectors", "alerts", "dashboard", "scheduler") if (ROOT / p).is_dir()]
# Strings equal to a family name that mean something else.
NOT_FAMILIES = {
    # The defaults are shown to users as the names they write in TOML; driftline.alerts.rules checks them.
    ("driftline/defaults.py", "ALERT_DETECTOR_DEFAULTS"),
    ("driftline/defaults.py", "ALERT_INHIBIT_RULES"),
    ("driftline/commands/up.py", "SCENARIOS"),  # the demo's scenario names (a "skew" scenario, ...)
    ("driftline/window_state/state.py", "latency"),  # a field of the window-state codec, a quantile name
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _exports(tree: ast.Module) -> set[int]:
    """The strings of ``__all__`` (a function may share a family's name)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            out |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return out


def _bare_names(names: set[str], not_names: set[tuple[str, str]]) -> list[str]:
    """file:line of every string literal in `names` outside docstrings, ``__all__`` and the `not_names`
    (file, assigned name or the string itself) that stand for something else."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "driftline/vocabulary.py":
                continue
            tree = ast.parse(path.read_text())
            skip = _docstrings(tree) | _exports(tree)
            allowed = {name for file, name in not_names if file == relative}
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in allowed
                                                        for t in node.targets):
                    skip |= {id(c) for c in ast.walk(node.value)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                        and id(node) not in skip and node.value not in allowed):
                    found.append(f"{relative}:{node.lineno}: {node.value!r}")
    return found


def test_no_stage_spells_a_family_name():
    assert _bare_names(set(vocabulary.DETECTORS), NOT_FAMILIES) == []


def test_no_stage_spells_a_drift_test_name():
    assert _bare_names({*vocabulary.SIGNIFICANCE_TESTS, *vocabulary.DISTANCES}, set()) == []


@pytest.mark.parametrize("family", vocabulary.DETECTORS)
def test_every_family_has_metrics_and_typed_details(family):
    assert vocabulary.METRICS[family]
    assert issubclass(vocabulary.DETAILS[family], vocabulary.Details)


def test_details_round_trip_and_keep_what_was_set():
    stored = {"training": 0.8, "expected": None, "margin": 0.03, "compared_with": vocabulary.QUALITY_VS_CALIBRATION}
    typed = vocabulary.details_of(vocabulary.MODEL_QUALITY, {**stored, "not_a_field": 1})
    assert typed.to_dict() == stored
    assert typed.reference is None  # compared with the calibration, which had no value
    assert vocabulary.details_of(vocabulary.MODEL_QUALITY, {"training": 0.8}).reference == 0.8
    assert vocabulary.details_of("a_future_family", {"reason": "x"}).to_dict() == {"reason": "x"}


# Strings equal to a rollout comparison metric that stand for one on purpose.
NOT_ROLLOUT_METRICS = {
    ("driftline/rollout_defaults.py", "ROLLOUT_CRITICAL"),  # shown to users as the names they write in [rollouts] critical
}


def test_no_stage_spells_a_rollout_metric():
    assert _bare_names(set(vocabulary.ROLLOUT_METRICS), NOT_ROLLOUT_METRICS) == []


def test_rollout_names_are_distinct_and_judged_metrics_are_metrics():
    names = [*vocabulary.ROLLOUT_METRICS, *vocabulary.VERDICTS, *vocabulary.STEPS, *vocabulary.ROLLOUT_MODES]
    assert len(names) == len(set(names))
    assert set(vocabulary.ROLLOUT_JUDGED) <= set(vocabulary.ROLLOUT_METRICS)
    from driftline import defaults

    assert set(defaults.ROLLOUT_CRITICAL) <= set(vocabulary.ROLLOUT_JUDGED)
    details = {"production": 0.01, "candidate": 0.02, "lower": 0.0, "upper": 0.03, "count": 900,
               "sums": {"production": [900, 9, 9], "candidate": [900, 18, 18]}}
    assert vocabulary.RolloutDetails.from_dict({**details, "unknown": 1}).to_dict() == details
