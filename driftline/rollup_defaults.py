"""The store's rollup and compaction defaults (scheduler/rollups.py, scheduler/compaction.py; `[retention]` in the
--config TOML).

Re-exported by driftline/defaults.py, so `defaults.NAME` stays the one way to read any default; the
"Default thresholds" table of docs/configuration.md is generated from this file too.
"""
from __future__ import annotations

# --- Rollups (scheduler/rollups.py; [retention] in the --config TOML) ----------------------
# Window states stay one per window while a window can still be judged again (late events, labels
# days late: the scheduler's 7-day re-evaluation horizon); past it they are merged into hourly rollups.
ROLLUP_HOURLY_DAYS = 7
# Hourly rollups older than this are merged into daily ones: the dashboard's month views bucket
# by several hours anyway, and a day of a month-long chart is one of its 180 buckets at most.
ROLLUP_DAILY_DAYS = 14
# Detector results stay one row per window and metric this long (the window pages, alerts, the
# evidence charts), then one row per hour and metric (what the dashboard's time buckets read)
# until `[retention] result_days`: 0 keeps every window's rows for the whole of result_days.
RESULT_ROLLUP_DAYS = 7
# Judged windows whose partial states are merged into one row per retention run, and model-days
# (or hours) rolled up per run and table: a backlog is worked off over several runs.
COMPACTION_WINDOWS_PER_RUN = 2_000
ROLLUPS_PER_RUN = 500
# Day partitions (PostgreSQL) made ahead of the newest window, so rows land in their day's
# partition, never in the default one.
PARTITION_DAYS_AHEAD = 2
