#!/usr/bin/env bash
# River for bench/concept_drift.py only, in its own venv (the product never imports it): its SEA and
# ConceptDriftStream synth streams and its ADWIN, DDM and Page-Hinkley detectors.
# Usage: bash bench/peer_envs/river.sh [VENV]   (default: bench/.venvs/river).
set -euo pipefail
VENV=${1:-${RIVER_VENV:-bench/.venvs/river}}
PYTHON=${PYTHON:-python3}
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "river==0.26.1"
"$VENV/bin/python" -c "import river; print('river', river.__version__)"
