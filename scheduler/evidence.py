"""Sequential evidence between windows: the stored e-detector states around the pure step
(driftline.detectors.families.evidence.advance_window).

A window's results advance each stream of its model version once: states are read (under a
transaction-level advisory lock of the version on PostgreSQL, so schedulers evaluating two windows of
one version take turns, also before the version has any state row to lock), advanced,
and written in the window's own transaction, so a failed evaluation leaves them as they were.
A window evaluated again (late events, labels) does not step the evidence twice: its new
results keep the evidence its first evaluation recorded. A state remembers the fingerprint of the
baseline its windows were judged against: when the version's baseline is registered again (other
training data), its streams start from nothing, as a new version's do.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from driftline.detectors.families.evidence import EVIDENCE_KEY, PagingPolicy, StreamState, advance_window, stream_key
from driftline.detectors.families.results import WindowResult, json_safe
from driftline.store.models import DetectorResult, EvidenceState
from driftline.windows import WindowKey

# the key of a stored state that holds the fingerprint of the baseline its windows were judged against
_BASELINE_KEY = "baseline"


def previous_evidence(session: Session, key: WindowKey) -> dict[tuple, Any]:
    """The evidence the window's stored results carry, by (detector, feature, metric, segment)."""
    rows = session.execute(select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric,
                                  DetectorResult.segment, DetectorResult.details).where(
        DetectorResult.model == key.model, DetectorResult.version == key.version,
        DetectorResult.window_start_ms == key.window_start_ms))
    return {(d, f or "", m, s or ""): details[EVIDENCE_KEY] for d, f, m, s, details in rows
            if isinstance(details, dict) and isinstance(details.get(EVIDENCE_KEY), dict)}


def advance_evidence(session: Session, key: WindowKey, results: Iterable[WindowResult], policy: PagingPolicy,
                     previous: dict[tuple, Any], baseline_fingerprint: str = "") -> None:
    """Step the version's streams with `results` (their details gain the evidence) and store the new states."""
    model, version = key.version_key
    results = list(results)
    keys = {k for k in (stream_key(r) for r in results) if k is not None}
    query = select(EvidenceState).where(EvidenceState.model == model, EvidenceState.version == version)
    if session.get_bind().dialect.name == "postgresql":  # released with the window's transaction
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _version_lock_key(model, version)})
    rows = {row.stream: row for row in session.scalars(query) if row.stream in keys}
    components = len(policy.drifts)
    states = {key: StreamState.from_dict(row.state, components) for key, row in rows.items()
              if _same_baseline(row.state, baseline_fingerprint)}
    updated = advance_window(results, states, key.window_start_ms, policy)
    for key, state in updated.items():
        row = rows.get(key)
        if row is None:
            row = EvidenceState(model=model, version=version, stream=key)
            session.add(row)
        row.state = json_safe({**state.to_dict(), _BASELINE_KEY: baseline_fingerprint})
        row.last_window_start_ms = state.last_window_start_ms
    for result in results:  # evaluated before: keep what the first evaluation recorded
        if EVIDENCE_KEY not in result.details:
            earlier = previous.get((result.detector, result.feature or "", result.metric, result.segment or ""))
            if earlier is not None:
                result.details[EVIDENCE_KEY] = earlier


def _same_baseline(state: Any, fingerprint: str) -> bool:
    """Whether a stored state was built on this baseline (a state from before fingerprints were kept counts as so)."""
    stored = state.get(_BASELINE_KEY) if isinstance(state, dict) else None
    return stored is None or stored == fingerprint


def _version_lock_key(model: str, version: str) -> int:
    """A stable signed 64-bit advisory-lock key for the version's evidence (namespaced apart from window claims)."""
    name = "\x00".join(("driftline.evidence", model, version))
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
