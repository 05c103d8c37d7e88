#!/usr/bin/env bash
# NannyML for the benchmarks only, in its own venv (the product never imports it).
# Usage: bash bench/peer_envs/nannyml.sh [VENV]   (default: bench/.venvs/nannyml). NannyML 0.13.1 needs
# Python >=3.9,<3.13; its wheel ships the data sets the benchmarks read (nannyml/datasets/data/). Also for
# bench/estimation_real.py (its CBPE and DLE, through bench/peer_envs/nannyml_estimation.py).
set -euo pipefail
VENV=${1:-${NANNYML_VENV:-bench/.venvs/nannyml}}
PYTHON=${PYTHON:-python3}
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
# nannyml 0.13.1 imports statsmodels (its plots) without declaring it
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "nannyml==0.13.1" statsmodels
"$VENV/bin/python" -c "import nannyml; print('nannyml', nannyml.__version__)"
