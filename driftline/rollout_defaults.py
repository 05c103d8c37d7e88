"""The rollout analysis's defaults (driftline/detectors/rollout/, `[rollouts]` in the --config TOML).

Re-exported by driftline/defaults.py, so `defaults.NAME` stays the one way to read any default; the
"Default thresholds" table of docs/configuration.md is generated from this file too.
"""
from __future__ import annotations

# --- Rollouts (detectors/rollout/; [rollouts] in the --config TOML) ------------------------
# Windows with enough traffic on both sides before a canary or shadow step is judged: five
# one-minute windows see a burst come and go, and a majority of five outvotes one odd window.
ROLLOUT_WINDOWS = 5
# Events per side and window for it to count: p99 of fewer than 200 latencies rests on its two
# largest values.
ROLLOUT_MIN_EVENTS = 200
# Shadow: paired requests per window for its flip rate to count. The service pairs the two
# windows' samples (at most WINDOW_SAMPLE_SIZE requests), so fewer than ROLLOUT_MIN_EVENTS; the
# flip rate pools the windows' pairs, and 50 a window is 250 by the fifth.
ROLLOUT_MIN_PAIRS = 50
# Labels per side, pooled over the rollout's windows, before quality is judged: the standard
# error of an accuracy near 0.8 is 0.04 at 100 labels, already twice the allowed drop.
ROLLOUT_MIN_LABELS = 100
# The candidate may fail one more request in a hundred than production, and no more.
ROLLOUT_MAX_ERROR_RATE_INCREASE = 0.01
# The candidate's p99 may be up to 20 % above production's (a window fails only when it is also
# ROLLOUT_P99_TOLERANCE_MS slower, so a 2 ms model is not failed for being 0.5 ms slower).
ROLLOUT_MAX_P99_INCREASE = 0.2
ROLLOUT_P99_TOLERANCE_MS = 5.0
# Quality: the candidate may score up to five points lower (accuracy), the drop model-quality
# alerts on too (QUALITY_MAX_DROP); a pass needs the interval inside it, about 1 000 labels a side ...
ROLLOUT_MAX_QUALITY_DROP = 0.05
# ... or have an error metric (MAE) up to 10 % above production's.
ROLLOUT_MAX_ERROR_INCREASE = 0.1
# Shadow: a retrained model changes a few per cent of decisions; a fifth changed is another model.
ROLLOUT_MAX_FLIP_RATE = 0.2
# What fails a rollout on its own: errors, tail latency and quality are what users feel; flips,
# score distances and the candidate's own prediction drift are reported and judged, not decisive.
ROLLOUT_CRITICAL = ("error_rate_delta", "p99_delta_ms", "quality_delta")
# Confidence sequences and the A/B test at 5 %: the usual level, and it holds however often the
# scheduler looks (always-valid inference), so no peeking correction is needed.
ROLLOUT_ALPHA = 0.05
# The mixture's standard deviation, in the compared metric's units: power is highest near effects
# of this size, and five points of accuracy or error rate is the size worth a rollout decision
# (bench/ab_test.py); any tau keeps the error rate.
ROLLOUT_TAU = 0.05
# Canary traffic weights in per cent, in order: one per cent meets real traffic with little at
# stake, each step five times the last until half; passing at the last step promotes.
ROLLOUT_CANARY_STEPS = (1, 5, 25, 50)
# A pass moves the rollout on only when asked: promoting changes what every user gets.
ROLLOUT_AUTO_PROMOTE = False
# A fail rolls back on its own: the safe direction, the production version is still serving.
ROLLOUT_AUTO_ROLLBACK = True
# Shadow: the decision threshold on scores (the one model-quality metrics use) ...
ROLLOUT_DECISION_THRESHOLD = 0.5
# ... and how many of the largest score differences a report lists, with their request ids.
ROLLOUT_TOP_DIFFERENCES = 10
# Ended rollouts (promoted, rolled back, cleared) stay in `rollout status` and `status --json`
# this long, so an automatic rollback overnight is still visible in the morning and after a weekend.
ROLLOUT_ENDED_VISIBLE_SECONDS = 7 * 24 * 3600
# A policy's `clear` counts as a promotion when the production alias moved to the candidate
# within this long of it (both are written in one transaction; a minute absorbs clock reads).
ROLLOUT_OUTCOME_MATCH_SECONDS = 60.0
