"""Stable identities: an alert's fingerprint, a group's key, a notification's idempotency key.

A fingerprint is the SHA-256 of the JSON array [model, version, detector, feature], with the
segment ("column=value") appended for a segment's alert (so whole-population fingerprints are
the same with or without segments; JSON, so no separator can make two different tuples collide); it survives restarts
and re-evaluations, and is what PagerDuty sees as `dedup_key`. A group's key is the
fingerprint of (model, version, group name, ""): for a model-level alert in its own
group (latency, dataset drift with the default rules) it equals the alert's fingerprint.
"""
from __future__ import annotations

import hashlib
import json


def fingerprint(model: str, version: str, detector: str, feature: str = "", segment: str = "") -> str:
    parts = [model, version, detector, feature or ""] + ([segment] if segment else [])
    raw = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def group_key(model: str, version: str, group: str) -> str:
    return fingerprint(model, version, group, "")


def notification_key(group: str, channel: str, kind: str, window_start_ms: int) -> str:
    """One notification per (group, channel, kind, window): re-processing a window adds nothing."""
    raw = json.dumps([group, channel, kind, window_start_ms], separators=(",", ":"))
    return f"{kind}-{hashlib.sha256(raw.encode()).hexdigest()[:48]}"


def retrain_key(model: str, version: str, window_start_ms: int) -> str:
    """One retraining request per (model, version, window) at most."""
    raw = json.dumps([model, version, window_start_ms], ensure_ascii=False, separators=(",", ":"))
    return f"retrain-{hashlib.sha256(raw.encode()).hexdigest()[:48]}"
