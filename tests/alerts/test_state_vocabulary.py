"""Alert and notification states are `driftline.vocabulary`'s names: no stage compares or filters with a bare string.

"pending" is an alert that has not fired yet and also a notification waiting to be sent; the two are different
constants (ALERT_PENDING, NOTIFICATION_PENDING) so that a query cannot mix them up unnoticed.
"""
from __future__ import annotations

import ast
from pathlib import Path

from driftline import vocabulary

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("driftline", "alerts", "dashboard", "scheduler")
# States whose words mean nothing else here ("resolved" is also a lifecycle event, "failed" a retraining request's).
WORDS = {vocabulary.ALERT_PENDING, vocabulary.ALERT_FIRING, vocabulary.NOTIFICATION_SENDING,
         vocabulary.NOTIFICATION_SENT}
FILTERS = {"in_", "isin", "not_in"}


def _constants(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]


def bare_states(source: str) -> list[tuple[int, str]]:
    """(line, word) of each state word compared with (==, !=, in) or filtered on (.in_, .isin) as a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FILTERS:
            operands = list(node.args)
        else:
            continue
        found += [(node.lineno, word) for operand in operands for word in _constants(operand) if word in WORDS]
    return found


def test_a_bare_state_in_a_filter_is_found():
    assert sorted(bare_states('q.where(Alert.state.in_(("firing", "pending")))\nx = s == "sent"\n')) == [
        (1, "firing"), (1, "pending"), (2, "sent")]


def test_no_stage_spells_an_alert_or_notification_state():
    offences = [f"{path.relative_to(ROOT)}:{line}: {word!r}" for package in PACKAGES
                for path in sorted((ROOT / package).rglob("*.py"))
                for line, word in bare_states(path.read_text())]
    assert offences == []
