"""The alert state machine, one window at a time (pure: no I/O).

    (none|resolved) --breach--> pending --K-th breach in a row--> firing
    pending --clean--> resolved (it never fired: nothing was announced)
    firing --M-th clean window in a row--> resolved
    firing --breach--> firing (the clean count restarts)

With K = 1 a breach goes straight to firing. A window that carries no evidence for
an alert (no result for its detector, or a window with too little data) does not
call `advance` at all: the alert holds its state.
"""
from __future__ import annotations

from dataclasses import dataclass

from driftline.vocabulary import ALERT_ACTIVE as ACTIVE
from driftline.vocabulary import ALERT_FIRING as FIRING
from driftline.vocabulary import ALERT_PENDING as PENDING
from driftline.vocabulary import ALERT_RESOLVED as RESOLVED

__all__ = ["ACTIVE", "FIRING", "PENDING", "RESOLVED", "Step", "advance"]


@dataclass(frozen=True)
class Step:
    state: str | None
    consecutive_breaches: int
    consecutive_clean: int
    # What happened: "started" (a new episode, pending), "fired", "resolved",
    # "dropped" (pending that never fired), or None (no change of state).
    event: str | None


def advance(state: str | None, consecutive_breaches: int, consecutive_clean: int, breached: bool,
            for_windows: int, resolve_after_windows: int) -> Step:
    """The next state after one window with evidence (`breached` or clean)."""
    if breached:
        if state in (None, RESOLVED):
            if for_windows <= 1:
                return Step(FIRING, 1, 0, "fired")
            return Step(PENDING, 1, 0, "started")
        breaches = consecutive_breaches + 1
        if state == PENDING and breaches >= for_windows:
            return Step(FIRING, breaches, 0, "fired")
        return Step(state, breaches, 0, None)
    if state is None or state == RESOLVED:
        return Step(state, 0, consecutive_clean, None)
    if state == PENDING:
        return Step(RESOLVED, 0, 1, "dropped")
    clean = consecutive_clean + 1
    if clean >= resolve_after_windows:
        return Step(RESOLVED, 0, clean, "resolved")
    return Step(FIRING, 0, clean, None)
