#!/usr/bin/env bash
# The worker's device and serving signals on a machine with a GPU, in about a minute: trains a small model into
# a temporary home, starts `driftline worker --device cuda` (events off), sends a short load, scrapes /metrics
# and prints the GPU's utilisation and memory, the forward-pass time per batch, utilisation, recommended replicas
# and cost per 1 000 predictions; then the same worker on cpu for comparison, whose GPU series must be absent.
#
#   bash scripts/device-check.sh               # from the repository root, with driftline installed (.venv or
#                                              # the packages of bench/gpu_machine.sh --fetch-wheels, unpacked)
#
# Exit status 1 when torch sees no CUDA device, or the cuda worker exports no GPU figures.
set -uo pipefail
cd "$(dirname "$0")/.."
SITE=/tmp/devsite
if [[ -f .whl/site.tar.xz ]] && ! python3 -c "import fastapi, pynvml" 2>/dev/null; then
    tar xJf .whl/site.tar.xz -C "$(dirname "$SITE")" && export PYTHONPATH="$SITE:$PWD"
fi
PY=python3
[[ -x .venv/bin/python ]] && PY=.venv/bin/python
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
"$PY" - <<'PY'
import contextlib, os, re, subprocess, sys, tempfile, time
from pathlib import Path
import httpx
sys.path.insert(0, "bench")
from http_load import DRIFTLINE, worker_process
from driftline.worker.dataset import generate_inputs

import torch
cuda = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA available: {cuda}")
bodies = [{"features": row} for row in generate_inputs(2_000, seed=5).to_dict("records")]
failed = not cuda
with tempfile.TemporaryDirectory() as tmp:
    config = Path(tmp) / "device.toml"
    config.write_text("[cost]\nprice_per_replica_hour = {cpu = 0.10, cuda = 2.50}\n[capacity]\nwindow_seconds = 10\n")
    env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db",
           "DRIFTLINE_CONFIG": str(config)}
    subprocess.run([*DRIFTLINE, "train", "--size", "small", "--rows", "4000", "--epochs", "1"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    for device in (["cuda"] if cuda else []) + ["cpu"]:
        with worker_process(env, ["--max-batch-size", "64", "--max-wait-ms", "2", "--no-events"], device) as (port, _):
            url = f"http://127.0.0.1:{port}"
            started = time.perf_counter()
            with httpx.Client(base_url=url, timeout=10) as client:
                answered = sum(client.post("/predict", json=b).status_code == 200 for b in bodies)
            took = time.perf_counter() - started
            text = httpx.get(f"{url}/metrics").text
            lines = [l for l in text.splitlines() if re.match(
                r"driftline_worker_(device_|utilization|recommended_replicas|service_rate|arrival_rate|cost_per|"
                r"batch_seconds_(sum|count)|model_info)", l)]
            print(f"--- {device}: {answered} answers in {took:.1f} s ({answered / took:.0f} req/s, one client)")
            print("\n".join(lines))
            sums = dict(re.findall(r"^driftline_worker_batch_seconds_(sum|count) (\S+)$", text, re.M))
            if sums.get("count"):
                print(f"forward pass per batch: {1000 * float(sums['sum']) / float(sums['count']):.3f} ms mean")
            has_gpu = "driftline_worker_device_utilization_ratio" in text
            if device == "cuda" and not has_gpu:
                print("FAIL: the cuda worker exports no GPU figures"); failed = True
            if device == "cpu" and has_gpu:
                print("FAIL: the cpu worker exports GPU figures"); failed = True
sys.exit(1 if failed else 0)
PY
