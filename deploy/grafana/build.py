"""Writes the provisionable dashboards of this folder: `python deploy/grafana/build.py` after editing them here.

Plain Grafana dashboard JSON (schema 39): a Prometheus datasource variable, then model and version
variables read from driftline's metrics. Import them in Grafana (Dashboards > New > Import) or provision
them with provisioning/dashboards.yml.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
SLO_MS = {"p50": 50, "p95": 150, "p99": 250}  # driftline.defaults.LATENCY_SLO_P*_MS


def target(expr: str, legend: str, ref: str = "A") -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def panel(kind: str, title: str, targets: list[dict], x: int, y: int, w: int = 12, h: int = 8, unit: str = "short",
          description: str = "", **extra) -> dict:
    body = {"type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "targets": [dict(t, refId=chr(ord("A") + i)) for i, t in enumerate(targets)],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    body.update(extra)
    return body


def variables(with_model: bool) -> dict:
    found = [{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}]
    if with_model:
        for name, query in (("model", "label_values(driftline_window_end_timestamp_seconds, model)"),
                            ("version", 'label_values(driftline_window_end_timestamp_seconds{model=~"$model"}, version)')):
            found.append({"name": name, "type": "query", "datasource": DS, "query": {"query": query, "refId": name},
                          "includeAll": True, "multi": True, "refresh": 2,
                          "current": {"text": "All", "value": "$__all"}})
    return {"list": found}


def dashboard(uid: str, title: str, panels: list[dict], with_model: bool) -> dict:
    for i, p in enumerate(panels, 1):
        p["id"] = i
    return {"uid": uid, "title": title, "tags": ["driftline"], "schemaVersion": 39, "version": 1, "editable": True,
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "timezone": "utc",
            "templating": variables(with_model), "panels": panels, "annotations": {"list": []}}


def serving() -> dict:
    latency = 'sum by (le) (rate(driftline_worker_latency_seconds_bucket{stage="total"}[5m]))'
    slo = [{"matcher": {"id": "byName", "options": f"{q} SLO"},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]} for q in SLO_MS]
    panels = [
        panel("timeseries", "Latency percentiles vs SLO",
              [target(f"histogram_quantile(0.{q[1:]}, {latency}) * 1000", q) for q in SLO_MS]
              + [target(f"vector({ms})", f"{q} SLO") for q, ms in SLO_MS.items()], 0, 0, unit="ms",
              description="Total request latency (queue + compute) against the default latency SLO "
                          "(LATENCY_SLO_P50/P95/P99_MS; edit the SLO queries if yours differ)."),
        panel("timeseries", "Requests per second", [target("sum by (code) (rate(driftline_worker_requests_total[1m]))",
                                                           "{{code}}")], 12, 0, unit="reqps"),
        panel("timeseries", "Error ratio", [target('sum(rate(driftline_worker_requests_total{code!~"2.."}[5m])) / '
                                                   "sum(rate(driftline_worker_requests_total[5m]))", "errors")],
              0, 8, unit="percentunit"),
        panel("timeseries", "Batch size", [target(f"histogram_quantile({q}, sum by (le) "
                                                  "(rate(driftline_worker_batch_size_bucket[5m])))", f"p{int(q * 100)}")
                                           for q in (0.5, 0.99)], 12, 8),
        panel("timeseries", "Queue depth", [target("sum by (instance) (driftline_worker_queue_depth)", "{{instance}}")],
              0, 16),
        panel("timeseries", "Cache hit ratio", [target("sum(rate(driftline_worker_cache_hits_total[5m])) / "
                                                       "(sum(rate(driftline_worker_cache_hits_total[5m])) + "
                                                       "sum(rate(driftline_worker_cache_misses_total[5m])))", "hits")],
              12, 16, unit="percentunit"),
        panel("timeseries", "Utilisation and recommended replicas",
              [target("driftline_worker_utilization", "rho {{instance}}"),
               target("driftline_worker_target_utilization", "target {{instance}}"),
               target("sum by (model) (driftline_worker_recommended_replicas)", "replicas needed {{model}}")], 0, 24,
              description="Forward-pass busy share per replica against [capacity] target_utilization; the sum of "
                          "recommended replicas (round up) is what an HPA or KEDA scaler on them aims at."),
        panel("timeseries", "Cost per 1 000 predictions",
              [target("avg by (model, version) (driftline_worker_cost_per_1000_predictions)", "{{model}} v{{version}}")],
              12, 24, description="[cost] price_per_replica_hour of the device kind, per 1 000 predictions of each "
                                  "version at its measured rate (absent without a price)."),
        panel("timeseries", "GPU utilisation and memory",
              [target("driftline_worker_device_utilization_ratio", "busy {{instance}} {{device}}"),
               target("driftline_worker_device_memory_used_bytes / driftline_worker_device_memory_total_bytes",
                      "memory {{instance}} {{device}}")], 0, 32, unit="percentunit",
              description="NVML (nvidia-ml-py) on workers serving on cuda; no series on CPU workers."),
        panel("timeseries", "Forward pass per batch", [target(
            "sum(rate(driftline_worker_batch_seconds_sum[5m])) / sum(rate(driftline_worker_batch_seconds_count[5m]))"
            " * 1000", "mean")], 12, 32, unit="ms"),
    ]
    panels[0]["fieldConfig"]["overrides"] = slo
    return dashboard("driftline-serving", "driftline: serving", panels, with_model=False)


def monitoring() -> dict:
    sel = 'model=~"$model", version=~"$version"'
    heat = panel("status-history", "Drift by feature (PSI, latest window)",
                 [target(f'max by (model, version, feature) (driftline_feature_drift_score{{{sel}, test="psi"}})',
                         "{{model}} v{{version}} {{feature}}")], 0, 0, w=12, h=10,
                 description="Each row a feature, each cell its PSI on the latest evaluated window; red from 0.2 "
                             "(DRIFT_PSI). driftline_feature_drifted holds the decision itself. Only the models "
                             "scheduler_metrics_detail_models names have per-feature series (`driftline up`: all).")
    heat["fieldConfig"]["defaults"].update({"color": {"mode": "thresholds"}, "thresholds": {"mode": "absolute", "steps": [
        {"color": "green", "value": None}, {"color": "yellow", "value": 0.1}, {"color": "red", "value": 0.2}]}})
    worst = panel("status-history", "Worst feature drift per version (highest PSI, latest window)",
                  [target(f'topk(20, max by (model, version) (driftline_max_feature_drift_score{{{sel}, test="psi"}}))',
                          "{{model}} v{{version}}")], 12, 0, w=12, h=10,
                  description="Every version's highest PSI over its features, for the whole fleet (the 20 highest): "
                              "the per-feature panel beside it needs scheduler_metrics_detail_models.")
    worst["fieldConfig"]["defaults"].update({"color": heat["fieldConfig"]["defaults"]["color"],
                                             "thresholds": heat["fieldConfig"]["defaults"]["thresholds"]})
    quality = panel("timeseries", "Estimated vs realized quality",
                    [target(f'driftline_estimated_quality{{{sel}, bound="value"}}', "estimated {{metric}} v{{version}}"),
                     target(f'driftline_estimated_quality{{{sel}, bound="lower"}}', "lower {{metric}} v{{version}}"),
                     target(f'driftline_estimated_quality{{{sel}, bound="upper"}}', "upper {{metric}} v{{version}}"),
                     target(f"driftline_realized_quality{{{sel}}}", "realized {{metric}} v{{version}}"),
                     target(f"driftline_training_quality{{{sel}}}", "training {{metric}} v{{version}}")],
                    0, 10, w=24, h=9, unit="percentunit",
                    description="The estimate before labels with its band (lower..upper), the quality measured on "
                                "joined labels, and the training value.")
    quality["fieldConfig"]["overrides"] = [
        {"matcher": {"id": "byRegexp", "options": "^upper .*"},
         "properties": [{"id": "custom.fillBelowTo", "value": "lower"}, {"id": "custom.lineWidth", "value": 0}]},
        {"matcher": {"id": "byRegexp", "options": "^lower .*"}, "properties": [{"id": "custom.lineWidth", "value": 0}]}]
    panels = [
        heat, worst, quality,
        panel("timeseries", "Drifted features", [target(f"topk(20, driftline_drifted_features{{{sel}}})",
                                                        "{{model}} v{{version}}")], 0, 19,
              description="Features that drifted in each version's latest window (the 20 versions with the most)."),
        panel("timeseries", "Alerts firing", [target('sum by (model, severity) (driftline_alerts_firing{model=~"$model"})',
                                                     "{{model}} {{severity}}")], 12, 19),
        panel("timeseries", "Monitoring lag", [target(f"time() - max by (model, version) "
                                                      f"(driftline_window_end_timestamp_seconds{{{sel}}})",
                                                      "{{model}} v{{version}}")], 0, 27, unit="s",
              description="Now minus the end of the latest evaluated window."),
        panel("timeseries", "Collector lag", [target("sum by (instance) (driftline_collector_lag_messages)",
                                                     "{{instance}}")], 12, 27),
        panel("timeseries", "Dead letters and quarantined windows",
              [target("max(rate(driftline_dead_letters_total[10m])) * 60", "dead letters / min"),
               target("max(driftline_windows_quarantined)", "quarantined windows")], 0, 35, w=24),
        panel("timeseries", "Latency p99 by part, latest window",
              [target(f'driftline_latency_seconds{{{sel}, percentile="p99"}}', "{{part}} v{{version}}"),
               target(f'driftline_latency_objective_seconds{{{sel}, percentile="p99"}}',
                      "objective {{part}} v{{version}}", "B")], 0, 43, unit="s",
              description="Each latency part's p99 (total, queue, compute; a generated answer's ttft and tpot) "
                          "and its objective from [latency]."),
        panel("timeseries", "Generated answers: tokens per second",
              [target(f"driftline_tokens_per_second{{{sel}}}", "{{measure}} v{{version}}")], 12, 43,
              description="request_p50: the median decode rate per request (1000 / tpot); output: output tokens "
                          "per second of window. Empty for models that generate no text."),
        panel("timeseries", "Evidence against its paging line (log10 e / line)",
              [target(f"log10(driftline_evidence_e_value{{{sel}}} / driftline_evidence_paging_line{{{sel}}})",
                      "{{model}} v{{version}} {{stream}}")], 0, 52, w=24, h=9,
              description="Each sequential-evidence stream's e-value over the line it pages at, in powers of ten: "
                          "0 is the line ([alerts] false_pages_per_model_per_month), a drift's evidence climbs "
                          "towards it window after window."),
        panel("timeseries", "Judging lag and the collectors' watermark",
              [target('max by (model) (driftline_scheduler_judging_lag_seconds{model=~"$model"})', "judged {{model}}"),
               target("time() - max(driftline_stream_watermark_timestamp_seconds)", "collectors behind")],
              0, 61, w=24, unit="s",
              description="Now minus the end of each model's latest judged window, and minus the collectors' low "
                          "watermark (event time stored on every partition). Judging lag far above the collectors' "
                          "means the scheduler is behind; both high, a partition holds the windows back "
                          "(`driftline status` names it)."),
    ]
    return dashboard("driftline-monitoring", "driftline: monitoring", panels, with_model=True)


if __name__ == "__main__":
    for name, build in (("serving", serving), ("monitoring", monitoring)):
        (HERE / f"driftline-{name}.json").write_text(json.dumps(build(), indent=2) + "\n")
