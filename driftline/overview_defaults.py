"""The dashboard overview's bounds at fleet size (dashboard/views/overview.py).

Re-exported by driftline/defaults.py, so `defaults.NAME` stays the one way to read any default; the
"Default thresholds" table of docs/configuration.md is generated from this file too.
"""
from __future__ import annotations

# --- Dashboard: the overview at fleet size (dashboard/views/overview.py) -------------------
# Model versions the overview draws as cards, the first of its attention ranking (firing alerts,
# then drift, then estimated quality); a ranked table above them lists every version. A page of
# a thousand cards takes seconds to draw and nobody reads past the first screens.
OVERVIEW_CARDS = 10
# Versions the overview's fleet charts (p99 latency, drifted features per window) draw: the first
# of the ranking. A chart of a thousand lines shows nothing, and reading every version's history
# is the slowest query of the page.
OVERVIEW_CHART_VERSIONS = 5
