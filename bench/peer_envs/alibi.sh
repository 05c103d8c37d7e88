#!/usr/bin/env bash
# Alibi Detect for bench/embeddings.py only, in its own venv (the product never imports it).
# Usage: bash bench/peer_envs/alibi.sh [VENV]   (default: bench/.venvs/alibi, outside the package)
# Full resolution of alibi-detect's pins drags for many minutes here, so install it without its
# dependencies plus exactly what `from alibi_detect.cd import MMDDrift` (pytorch backend) imports.
set -euo pipefail
VENV=${1:-${ALIBI_VENV:-bench/.venvs/alibi}}
PYTHON=${PYTHON:-python3}
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0" \
    "numpy>=1.16.2,<2" "scipy" "scikit-learn" "pandas<3" "pydantic>=1.8,<3" "typing-extensions" \
    "catalogue" "toml" "dill" "tqdm" "requests" "pillow" "matplotlib" "scikit-image" "transformers" \
    "numba" "opencv-python-headless"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "alibi-detect==0.12.0"
"$VENV/bin/python" -c "from alibi_detect.cd import MMDDrift; import alibi_detect; print('alibi-detect', alibi_detect.__version__)"
