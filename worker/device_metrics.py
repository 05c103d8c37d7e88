"""The GPU's own figures for the worker's /metrics: utilisation and memory, through NVIDIA's NVML (`nvidia-ml-py`).

Read at scrape time from the device the worker serves on (``cuda:N``). On a CPU worker, or where NVML
cannot be loaded (no driver, no `pynvml`), the collector yields nothing: the series are absent, never
zero, so a dashboard or an alert can tell "no GPU" from "an idle GPU". The forward-pass time per batch
on the device is `driftline_worker_batch_seconds` (measured around the forward pass, synchronised by
reading its result back).
"""
from __future__ import annotations

import logging
from typing import Any, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

__all__ = ["DeviceMetrics", "nvml_handle"]

# What a worker on a GPU exports (for dashboards and their tests: on a CPU worker none of them is there).
NAMES = ("driftline_worker_device_utilization_ratio", "driftline_worker_device_memory_used_bytes",
         "driftline_worker_device_memory_total_bytes")


def nvml_handle(device: str) -> tuple[Any, Any] | None:
    """(pynvml module, device handle) for a ``cuda[:N]`` device; None on CPU or when NVML is unavailable."""
    if not device.startswith("cuda"):
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # ImportError, NVMLError (no driver): the GPU figures are absent
        log.warning("GPU figures unavailable on %s: %s", device, exc)
        return None


class DeviceMetrics(Collector):
    """`driftline_worker_device_utilization_ratio`, `..._memory_used_bytes`, `..._memory_total_bytes`."""

    def __init__(self, device: str):
        self.device = device
        self.nvml = nvml_handle(device)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.nvml is None:
            return
        pynvml, handle = self.nvml
        try:
            rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        except Exception as exc:  # a lost device: no figures this scrape rather than a failed scrape
            log.warning("cannot read the GPU figures of %s: %s", self.device, exc)
            return
        docs = ("Share of the last sample period the GPU was running a kernel (NVML).",
                "GPU memory in use, all processes (NVML).", "GPU memory in all (NVML).")
        values = (rates.gpu / 100.0, float(memory.used), float(memory.total))
        for name, doc, value in zip(NAMES, docs, values):
            gauge = GaugeMetricFamily(name, doc, labels=["device"])
            gauge.add_metric([self.device], value)
            yield gauge
