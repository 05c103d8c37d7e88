"""Every default threshold of driftline, in one place.

Each value says why it is what it is. The "Default thresholds" table of docs/configuration.md is
written from this file; per-model and per-feature overrides come from the
`--config` TOML file. Sections are owned by the stage that uses them.
"""
from __future__ import annotations

# --- Windows (collector) ------------------------------------------------------
# One minute is short enough to page within minutes and long enough to hold a
# few thousand events at modest traffic.
WINDOW_SECONDS = 60
# Events may arrive this long after their window ends and still be folded in
# before the window is closed for evaluation.
ALLOWED_LATENESS_SECONDS = 30
# A partition whose reader has been at the end of its log with nothing new for this long no longer
# holds the low watermark back (Flink's source idleness): a model that stops sending, or a partition
# no producer writes to, gets its windows closed by the wall clock, at the latest when the clock
# passes the window's end + the allowed lateness, this long after the partition's last record.
IDLE_PARTITION_SECONDS = 30
# A collector confirms its partitions' watermarks at least this often while they are idle; a partition
# whose reader has said nothing for IDLE_PARTITION_SECONDS (a collector killed or cut off) is not idle
# but stalled: it holds the windows back until a collector reads it again.
WATERMARK_HEARTBEAT_SECONDS = 5.0

# --- Collector (collector/) -------------------------------------------------------
# The consumer group every collector joins by default; collectors of one store must
# share one group (the store's offsets are per group, the window rows are not).
COLLECTOR_GROUP_ID = "driftline-collector"
# Window states and offsets are written together this often: a crash replays at most
# this much traffic, and a flush costs a few row writes however many events it holds,
# so one second keeps the store fresh for a one-minute window at negligible cost.
COLLECTOR_FLUSH_INTERVAL_SECONDS = 1.0
# ... or as soon as this many messages are pending, which bounds the memory held
# between flushes (predictions for the label join are the bulk, ~200 bytes each).
COLLECTOR_FLUSH_MAX_EVENTS = 100_000
# Records per poll: one vectorised fold per poll, so larger batches amortise the
# per-batch numpy work; 5 000 events of ~1 KB are ~5 MB, well inside one fetch.
COLLECTOR_POLL_MAX_RECORDS = 5_000
# Kafka group liveness. The embedded broker holds a new group's first assignment for
# half the session timeout, so 6 s starts a collector in ~3 s; a crashed collector's
# partitions move to the others within 6 s. Heartbeats run on kafka-python's IO thread.
COLLECTOR_SESSION_TIMEOUT_MS = 6_000
COLLECTOR_HEARTBEAT_INTERVAL_MS = 1_000
# Raw bytes of a dead letter kept in the store (the DLQ topic keeps the whole message):
# 64 KiB holds any ordinary event (~1 KB) whole and the start of a runaway payload;
# `raw_size` records the full size.
COLLECTOR_DEAD_LETTER_RAW_BYTES = 65_536
# A failed flush (database or DLQ topic unavailable) is retried with exponential
# backoff between these bounds; nothing is committed until it succeeds, and
# consumption pauses once COLLECTOR_FLUSH_MAX_EVENTS are pending.
COLLECTOR_FLUSH_RETRY_MIN_SECONDS = 0.5
COLLECTOR_FLUSH_RETRY_MAX_SECONDS = 10.0
# Predictions are kept this long for the label join (labels often arrive days later);
# older predictions and labels are pruned every COLLECTOR_PRUNE_INTERVAL_SECONDS.
COLLECTOR_PREDICTION_RETENTION_DAYS = 7
COLLECTOR_PRUNE_INTERVAL_SECONDS = 300
# Two collectors can commit a prediction and its label at the same moment, each
# without seeing the other's row; a sweep this often joins such pairs (PostgreSQL only
# needs it: SQLite serialises the flushes).
COLLECTOR_LABEL_SWEEP_SECONDS = 60
# A model version seen without a baseline is looked up again this often, so drift
# detection starts within half a minute of `driftline baseline` / `train`.
COLLECTOR_BASELINE_RECHECK_SECONDS = 30
# Event ids remembered per partition to drop producer-retry duplicates (a retried
# batch lands on the same partition seconds later): two generations of this many.
COLLECTOR_DEDUP_EVENT_IDS = 50_000
# SIGTERM / Ctrl-C: the final flush may retry for this long before giving up (the
# events are then re-read from the stored offsets by the next collector).
COLLECTOR_SHUTDOWN_FLUSH_SECONDS = 30.0
# Decoder processes per collector ("auto": none on one core, two on 2-7 cores, four from
# 8 cores up; 0: everything in one process). Two pay off even on two cores, because the
# collector process waits on a single decoder about half its time (collector/decoders.py).
# Decoding and folding are about half of a collector's CPU, and the GIL keeps threads
# from overlapping them with kafka-python's record unpacking (collector/decoders.py).
COLLECTOR_DECODERS = "auto"
# How fetched Kafka record batches become records: "lean" reads v2 batches in one tight
# loop (driftline.collector.record_batches; ~2x less CPU per event than kafka-python's reader, the
# same records); "kafka-python" is the library's own reader, for comparison or if in doubt.
COLLECTOR_RECORD_READER = "lean"
# The choices of `driftline collector --record-reader`.
COLLECTOR_RECORD_READERS = ("lean", "kafka-python")
# A poll asks for at most 0.2 s; a group rejoin or a slow broker can hold one for a request
# timeout (30 s or the session timeout + 5 s). A poll still running after this long is
# stuck (kafka-python can spin inside one forever): its fetch's offsets are dead-lettered,
# stored as read, and the collector exits non-zero to be restarted past them.
COLLECTOR_POLL_STUCK_SECONDS = 120.0
# The exit status of a collector that left a stuck poll behind (restart it: it reads on).
COLLECTOR_POLL_STUCK_EXIT_CODE = 75
# An event stamped further ahead of the collector's wall clock than this is dead-lettered:
# producers' clocks drift by seconds, not hours, and a far-future event would push the
# watermark ahead and make every punctual event of its model version late.
COLLECTOR_MAX_FUTURE_SECONDS = 3600
# Decompressed bytes of one Kafka record batch the collector reads at most; a batch that
# expands further (a decompression bomb: gzip turns 1 MB of zeros into ~1 KB) is dead-lettered
# and skipped. Producers batch ~256 KB before compressing, so 64 MiB is far above any real batch.
COLLECTOR_MAX_BATCH_BYTES = 64 << 20

# --- Drift detection (detectors/) -----------------------------------------------
# A feature drifts only when (1) the window and the reference both hold at least
# DRIFT_MIN_ROWS rows, (2) its test is significant after Benjamini-Hochberg
# correction across the window's features at DRIFT_ALPHA, and (3) an effect size
# clears its floor. (2) bounds false alarms on small windows, (3) stops huge
# windows from flagging differences too small to matter. See docs/detectors.md.

# False-discovery rate for the Benjamini-Hochberg correction across the features
# of one window: the usual 5 %; when nothing drifts this is also the chance that
# any feature of the window passes step (2).
DRIFT_ALPHA = 0.05
# PSI of 0.2 and up is the credit-scoring rule of thumb for "significant shift"
# (0.1-0.2 "moderate"); 0.2 keeps the floor above the PSI that sampling noise
# gives a window of DRIFT_MIN_ROWS rows on ten bins (about 0.1).
PSI_THRESHOLD = 0.2
# Wasserstein distance over the reference's standard deviation: 0.1 is Evidently's
# default and means the mass moved a tenth of a standard deviation on average.
WASSERSTEIN_THRESHOLD = 0.1
# Jensen-Shannon distance (natural log, so between 0 and sqrt(ln 2) = 0.83):
# 0.1 is Evidently's default.
JENSENSHANNON_THRESHOLD = 0.1
# L-infinity distance between category frequencies (largest change of one
# category's share): ten percentage points is a mix change a person would notice.
LINF_THRESHOLD = 0.1
# A feature's missing rate must move by at least this much (absolute, five percentage
# points) and significantly (two-proportion test at DRIFT_ALPHA): against the reference in
# both directions for drift by nulls ([drift] missing_rate_delta), above the training null
# rate for data quality (missing_rate_increase). One size, so both families agree.
MISSING_RATE_DELTA = 0.05
# Fewer rows than this in the window (or the reference) and a feature's verdict is
# "insufficient data": KS and chi-square have little power and PSI on ten bins is
# dominated by noise below a hundred rows, so small windows would flood alerts.
DRIFT_MIN_ROWS = 100
# Categories expected fewer times than this in a window are pooled in the two-sample chi-square that judges a
# categorical feature, per window and in evidence (Cochran's rule): with Pearson's unpooled goodness of fit, 300
# Zipf categories were flagged in 36 % / 49 % of unchanged 100 / 1 000-row windows, pooled 5.0 % / 4.3 %.
CHI2_MIN_EXPECTED = 5.0
# Share of a categorical feature's level spent on its unseen-category test (rows on categories the reference never
# saw; weighted Bonferroni with the pooled chi-square, which keeps the rest). A new category over its floor
# (UNSEEN_CATEGORY_SHARE_MAX) gives p-values far below the level (about 1e-7 for 5 of 100 rows), so a tenth keeps
# its power: 5 % of a 100-row window flagged 95 % (pooled alone 20 %), while an even split (0.5) cost the pooled
# test power on known categories (diffuse shift at 1 000 rows 24 % -> 13 %; at 0.1: 22 %). bench/RESULTS.md.
UNSEEN_TEST_WEIGHT = 0.1
# The dataset drifts when at least this share of its features drift: Evidently's
# default drift_share, so both tools agree on the headline verdict.
DATASET_DRIFT_SHARE = 0.5
# PSI's zero-share smoothing (Evidently 0.7's rule, so the values coincide): a bin
# empty on one side gets share PSI_EPSILON, or the smallest non-zero share / 1e6
# when that share is itself at or below PSI_EPSILON. Without it PSI is infinite.
PSI_EPSILON = 1e-4
# Pairs of samples drawn from the reference's category shares to measure PSI's and Jensen-Shannon's sampling
# level at a window's size (`noise.category_noise`): 32 put it within about 1.5 % at 300 categories, in about a
# millisecond.
CATEGORY_NOISE_DRAWS = 32
# Numeric PSI bins: ten, at the reference's deciles, so each
# bin holds a tenth of the reference and no bin is empty by construction.
PSI_NUMERIC_BINS = 10
# Evidently (and our raw-array Jensen-Shannon) treats a numeric feature with at
# most this many distinct reference values as categorical when binning.
JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES = 20
# A constant reference has standard deviation 0: the normalised Wasserstein
# distance divides by at least this (Evidently's floor, so values coincide).
WASSERSTEIN_MIN_STD = 0.001
# Where the effect-size thresholds come from: "fixed" (the values above, the same for
# every feature and window size, usable with any reference) unless a [drift] section
# says "reference" (derived from the reference's own chunk-to-chunk spread).
DRIFT_THRESHOLD_SOURCE = "fixed"
# Reference-derived threshold = mean + k * standard deviation of the statistic over
# reference chunks of the window's size: NannyML's default k, three standard
# deviations, about a 0.1 % one-sided false-alarm rate if the spread were normal.
REFERENCE_THRESHOLD_Z = 3.0
# Fewer reference chunks than this and a mean and standard deviation are noise, so
# the window falls back to the fixed thresholds (and says so).
REFERENCE_THRESHOLD_MIN_CHUNKS = 5
# At most this many chunks (evenly spread over the reference) are measured: the
# standard deviation is steady well before 50 samples and each chunk costs a
# comparison per feature, so small windows on a large reference stay cheap.
REFERENCE_THRESHOLD_MAX_CHUNKS = 50
# The streaming service has no reference rows at evaluation time, so a baseline keeps the
# chunk spreads for these window sizes (plus the largest the reference allows, a fifth of
# its rows) and a window between two of them interpolates on log-log scales: the effect
# sizes' noise falls as a power of the rows, so that is a straight line.
REFERENCE_THRESHOLD_SIZES = (50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
# `detect --segment-by`: segments kept per column, the largest by reference rows;
# the rest are pooled as one "other" segment, so a high-cardinality column (ids,
# zip codes) costs at most this many (plus "other") extra comparisons per window.
SEGMENT_MAX_VALUES = 10
# Streaming segments ([segments]): a window state tracks up to this many times the cap
# of values per segment column; values beyond it are folded into "other" as they arrive.
# Evaluation keeps the largest cap by events, so a value among the top cap of a window
# keeps exact counts unless it arrived after this many others had been seen in the same
# partial state; three times the cap leaves room for a value that grows late.
SEGMENT_TRACK_FACTOR = 3
# Segment references are computed with the baseline for every categorical feature with
# at most this many distinct training values (and every configured [segments] feature):
# regions, channels, plans; an identifier-like column gets none and costs nothing.
SEGMENT_REFERENCE_MAX_DISTINCT = 50
# A numeric --segment-by column is used as is when it has at most this many distinct
# reference values (codes, small counts); with more it is refused rather than binned,
# since bins a user did not choose make segments nobody can act on.
SEGMENT_MAX_NUMERIC_DISTINCT = 20

# --- Baseline and window state (driftline/baseline/, driftline/window_state/) --
# Fine bins per numeric feature, at the training data's quantiles 1/1000 ... 999/1000.
# Window statistics re-aggregate these: within one fine bin the reference CDF moves
# by at most 1/1000, so the KS statistic from bins is within 0.001 of the exact one
# (well inside the 2e-3 the window statistics promise), and the deciles for PSI are a
# subset of the edges.
BASELINE_FINE_BINS = 1000
# The outermost fine bins (below 1/1000, above 999/1000) are each split into this many
# more at finer quantiles: heavy tails are wide, and window values beyond the training
# range land there, so the Wasserstein distance from bins stays within 2e-3 of exact.
BASELINE_TAIL_BINS = 50
# Rows of training data kept verbatim in the baseline for drill-down and reports:
# enough for an Evidently report and for the skew check, small enough for a JSON column.
BASELINE_SAMPLE_SIZE = 2000
# Events kept per window state (bottom-k by hashed request id, else event id, so merging
# states stays uniform and a shadow's window samples the same requests as production's). 200 records of ~1 KB keep a state blob around 100 KB for 20 features,
# and still resolve a parity-skew mismatch rate to half a percent.
WINDOW_SAMPLE_SIZE = 200
# Latency histogram: log buckets with relative accuracy 1 % (DDSketch's mapping),
# from 1 microsecond to about 2.8 hours; values outside are clamped to the end buckets.
LATENCY_RELATIVE_ACCURACY = 0.01
LATENCY_MIN_MS = 1e-3
LATENCY_MAX_MS = 1e7
# Binary-classification scores are counted on this many equal-width bins of [0, 1]
# (0.5 is an edge, so accuracy/precision/recall/F1 at 0.5 are exact; ROC AUC counts
# pairs inside one bin as ties, an error below 1/1000 for spread-out scores).
QUALITY_SCORE_BINS = 1000
# Probabilities are clipped to [eps, 1 - eps] for the log loss (scikit-learn's choice),
# so one confident mistake costs 34.5 nats, not infinity.
LOG_LOSS_EPSILON = 1e-15

# A numeric value (feature, prediction, label) of larger magnitude is not data but a bug
# or an attack: its square would overflow a window's sums (1e200 squared is inf). Up to
# 1e50, squares summed over 1e15 events stay below 1e116, far from float overflow, and
# epoch-nanosecond timestamps (~1.7e18) still count as values. Beyond it: out of range
# (data quality), never folded into sums; the worker answers 422 naming the field.
VALUE_MAX_ABS = 1e50
# Distinct categories the baseline never saw counted per feature per window (the baseline's own are
# always counted); the rest share one "other" count. More than 1000 new live values is an identifier
# or a flood, and the cap keeps a window row and its flush flat (60k unique values gave a 27 MB row).
CATEGORY_MAX_DISTINCT = 1000
# Category values are counted by their first this-many characters: enough to tell apart
# any real label, while one 1 MB string cannot make a 1 MB key in every window.
CATEGORY_MAX_CHARS = 100
# Features one event may carry; an event with more is dead-lettered (reason names the count).
# Tabular models have tens to hundreds; a producer that logs a request-derived dict as its
# features can send tens of thousands (one 429 KB event with 40 000 keys cost 5.2 s of CPU).
EVENT_MAX_FEATURES = 1000
# Feature names not in the version's baseline (all names, for a version without one)
# counted apart per window state; names beyond these share one "other" entry
# (`driftline.window_state.other_features`): one data-quality result per window however
# many arrive. A schema change adds a handful of names; a flood of unique names adds one
# feature window, result and alert each (1 000 events of 50 unique names: 50 000).
WINDOW_MAX_NEW_FEATURES = 100

# --- Alerts (alerts/) ---------------------------------------------------------------
# Rules are Alertmanager's semantics applied per evaluated window; every value
# below is overridable in the `[alerts]` section of the --config TOML (docs/alerts.md).
# Severities, lowest first; PagerDuty's four levels, so its mapping is the identity.
ALERT_SEVERITIES = ("info", "warning", "error", "critical")
# `for` K: consecutive breaching windows before pending -> firing. A feature's
# false-alarm rate is at most 1 % per window (tests/detectors/test_false_alarms.py); three
# in a row on the same feature is ~1e-6, under one false page a year for 14 features
# on one-minute windows, and a real shift still pages within three minutes.
ALERT_FOR_WINDOWS = 3
# M: clean windows in a row before firing -> resolved. Three windows of hysteresis
# stop a drift hovering at its threshold from resolving and re-paging every minute.
ALERT_RESOLVE_AFTER_WINDOWS = 3
# Still-firing alerts are re-announced this often (Alertmanager's repeat_interval default).
ALERT_REPEAT_INTERVAL_SECONDS = 4 * 3600
# Per detector: severity and K where the general values do not fit. Dataset drift
# (half the features moved at once) and skew (a serving bug, not the world) are
# errors that page; a p99 latency SLO breach is critical and users feel it now, so
# two windows suffice. Model quality pages on sequential evidence (K applies only under
# policy "for_windows": one breaching evaluation of sparse labels is already an aggregate). Multivariate
# drift (a joint change no single feature shows) is worth a look, not a page. Estimated
# quality moves slowly with the score mix and needs no labels, so it is judged window by
# window like drift; a warning, as the drop is predicted, not measured. Embedding drift is
# judged at 5 % false alarms per window (EMBEDDING_ALPHA), so it waits for two windows in a row.
ALERT_DETECTOR_DEFAULTS = {
    "data_drift": {"severity": "warning"},
    "dataset_drift": {"severity": "error", "for_windows": 2},
    "prediction_drift": {"severity": "warning"},
    "data_quality": {"severity": "warning", "for_windows": 2},
    "skew": {"severity": "error", "for_windows": 2},
    "latency": {"severity": "critical", "for_windows": 2},
    "model_quality": {"severity": "error", "for_windows": 1},
    "estimated_quality": {"severity": "warning", "for_windows": 2},
    "multivariate_drift": {"severity": "warning"},
    "embedding_drift": {"severity": "warning", "for_windows": 2},
}
# How drift families (`vocabulary.SEQUENTIAL_FAMILIES`) page, `[alerts] policy`: on evidence
# accumulated over windows at a stated false-page rate (detectors/families/evidence.py); the
# older "for_windows" (K breaching windows in a row) has no stated rate and misses small
# persistent drifts (per-window power 50 %: three in a row one time in eight).
ALERT_POLICY = "sequential"
# Expected false pages of one model version per 30-day month, all its streams together; the
# line follows with the window length (`sequential.arl_threshold`): 14 streams give 10 080 on
# hourly windows, 604 800 on one-minute ones (a strong drift crosses either in one window).
ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH = 1.0
# The mixture's mean shifts of a window's normal score z = Phi^-1(1 - p): 0.5 adds up drifts no
# window shows alone, 8 is a break seen in one window; six cost ln 6 of log-evidence.
SEQUENTIAL_DRIFTS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0)
# The paging line is never below this e-value (Ville: no drift reaches it with probability > 1 %).
SEQUENTIAL_MIN_E_VALUE = 100.0
# Each component is held at most this factor (times the components) over the line, so a long
# drift's evidence falls back, and its alert resolves, within about a dozen windows after it ends.
SEQUENTIAL_EVIDENCE_CAP = 10.0
# A candidate's failed rollout verdict (the `rollout` alert family): an error, so PagerDuty pages
# and chat is told; one failed verdict is enough, as the verdict already spans the policy's windows;
# one passing verdict resolves it (so does the plan ending: rolled back, promoted or cleared).
ALERT_ROLLOUT_DEFAULTS = {"severity": "error", "for_windows": 1, "resolve_after_windows": 1}
# Inhibition: while a source alert fires, the target detectors' alerts of the same
# model version are not notified (the dataset-level alert lists their features).
ALERT_INHIBIT_RULES = ({"source": "dataset_drift", "targets": ("data_drift",)},)

# Delivery (the outbox). One HTTP call takes at most this long in all (connect, send,
# answer and body), however slowly a receiver trickles; a sixth of the claim lease.
ALERT_HTTP_TIMEOUT_SECONDS = 10.0
# At most this much of a receiver's answer is read (theirs is a status and a line or two);
# the rest is neither waited for nor stored.
ALERT_RESPONSE_MAX_BYTES = 64 * 1024
# A claimed row ('sending') is given back after this lease if its job died; it must
# exceed one HTTP call's timeout, or a slow but live job would see its row reclaimed.
ALERT_DELIVERY_LEASE_SECONDS = 60.0
# Retries: exponential backoff 5 s, 10 s, 20 s ... capped at 5 minutes, each delay
# drawn from [d/2, d] ("equal jitter") so many rows failing together spread out.
ALERT_BACKOFF_INITIAL_SECONDS = 5.0
ALERT_BACKOFF_MAX_SECONDS = 300.0
# Retry budget: after two hours (or 25 attempts, whichever comes first) a notification
# is marked failed, kept and shown by `driftline alerts list`; `driftline alerts retry`
# (or the group's next repeat) sends it again. Two hours covers a provider's typical
# incident; a page older than that is better re-raised by a person than by a script.
ALERT_DELIVERY_MAX_AGE_SECONDS = 2 * 3600
ALERT_DELIVERY_MAX_ATTEMPTS = 25
# A receiver's Retry-After is honoured up to ten minutes: a longer wait (or an absurd
# one: inf, 1e12, a date years ahead) is clamped, so a bad header can neither crash
# delivery nor park a page past the retry budget (negative: now; NaN: ignored).
ALERT_RETRY_AFTER_MAX_SECONDS = 600.0

# Alerts listed one per line in a Slack message; beyond this "and N more" and the
# dashboard link: a list longer than a screen is not read during an incident.
SLACK_MAX_LISTED_ALERTS = 40
# Alerts listed in custom_details (the whole event must stay under PagerDuty's 512 KB).
PAGERDUTY_MAX_DETAIL_ALERTS = 100
# Alertmanager resolves an alert once its endsAt passes, so a firing alert is posted with an
# endsAt this far ahead and re-posted while it fires (Prometheus: 4 x its resend delay); a
# driftline that stops posting (stopped, or the alert left its group) lets it expire there.
ALERTMANAGER_ENDS_AFTER_SECONDS = 20 * 60
# Firing groups are re-posted to Alertmanager this often, well before endsAt (a quarter of
# it: three re-posts may fail in a row before Alertmanager resolves on its own).
ALERTMANAGER_REPOST_INTERVAL_SECONDS = 5 * 60

# Retraining policy. Drift on the chosen features (any, by default) in this many
# consecutive evaluated windows: five minutes of persistent drift at one-minute
# windows, past the alert's own K so a page comes first and a retrain only when it lasts.
RETRAIN_DRIFT_WINDOWS = 5
# Or a model-quality drop of at least this much (absolute, in the metric's units:
# 0.05 of accuracy or ROC AUC) against the version's reference, once labels arrive.
RETRAIN_QUALITY_DROP = 0.05
# At most one retraining request per model in this time: a retrain takes minutes to
# hours and the drift persists meanwhile; without a cooldown every window would ask again.
RETRAIN_COOLDOWN_SECONDS = 6 * 3600
# A retrained version that beat production is promoted at once (`[alerts.retrain] rollout`):
# "shadow" or "canary" enter it as a rollout plan instead, for the rollout analysis to judge.
RETRAIN_ROLLOUT = "promote"

# --- Scheduler: window quarantine (scheduler/quarantine.py) ---------------------------
# A window whose evaluation raises is set aside and tried again after a delay that
# doubles per failure, from one minute (a passing cause, e.g. a baseline being
# registered, clears by the next default window) ...
QUARANTINE_RETRY_MIN_SECONDS = 60
# ... up to an hour, so a window that can never be evaluated costs one try an hour and
# is still retried within the hour after a fix is deployed.
QUARANTINE_RETRY_MAX_SECONDS = 3600
# The stored error text is cut to this many characters: enough for the exception's
# message, while a runaway message (a whole blob in a repr) cannot bloat the row or the page.
QUARANTINE_ERROR_CHARS = 1000
# A version's windows are judged in event-time order: a window in quarantine holds its version's later
# windows back for this many failed tries (about three minutes at the retry delays above), so a passing
# fault costs no window its place in the sequential evidence; after that the later windows go on without it
# (judged late, it no longer steps the evidence) rather than leave the model unwatched.
QUARANTINE_HOLD_ATTEMPTS = 3

# --- Scheduler: /metrics (scheduler/metrics.py) ----------------------------------------
# The scheduler's /metrics reads the store at most once per this many seconds and serves the
# cached exposition in between: a scrape storm (several Prometheus servers, a dashboard
# refreshing) costs the store one query set per interval, not one per scrape.
SCHEDULER_METRICS_CACHE_SECONDS = 5.0
# Features per model version exported with their own series (drift score per test, drifted
# flag): the drifted ones first, then the highest scores. Bounds the series at about five per
# feature; driftline_drifted_features always counts every feature.
SCHEDULER_METRICS_MAX_FEATURES = 100
# The port `driftline up` serves the scheduler's /metrics on (`driftline scheduler`: off unless set).
UP_SCHEDULER_METRICS_PORT = 9109

# --- Retention (scheduler/retention.py; [retention] in the --config TOML) --------------
# Dead letters are read when a producer breaks; two weeks covers noticing, fixing and
# checking the fix, and the DLQ topic keeps the whole messages per its own retention.
RETENTION_DEAD_LETTER_DAYS = 14
# Window states (the merged summaries, the bulk of the store) are needed to re-evaluate
# a window (7-day horizon) and for the dashboard's serving charts; a month covers both.
RETENTION_WINDOW_STATE_DAYS = 30
# Detector results and window evaluations are small and show the history of a model on
# the dashboard: a quarter, to compare with the same weeks before.
RETENTION_RESULT_DAYS = 90
# Notifications of resolved alerts (the delivery log): a month of incident history.
# Notifications of pending or firing alerts are never pruned.
RETENTION_NOTIFICATION_DAYS = 30
# Window states, results and predictions timestamped further than this in the future
# come from a wrong clock or a hostile producer: pruned at once. A day is far beyond any
# real clock skew and still keeps every window that is open now.
RETENTION_FUTURE_SECONDS = 86_400
# Rows deleted per statement, each in its own transaction: a short lock on a big backlog.
RETENTION_BATCH_ROWS = 5_000
# Statements per table per scheduler run: a backlog of millions is worked off over
# several runs instead of in one long run that delays window evaluation.
RETENTION_MAX_BATCHES_PER_RUN = 20
# The scheduler applies retention this often; rows age by days, so five minutes is prompt.
RETENTION_INTERVAL_SECONDS = 300

# --- Dashboard (dashboard/) ---------------------------------------------------------
# Pages redraw themselves this often (`driftline dashboard --refresh-seconds`): half a
# default window, so a newly evaluated window shows up within half a minute.
DASHBOARD_REFRESH_SECONDS = 30
# Store queries are cached this long and "now" is rounded to it: any number of open
# tabs read the store at most once per query per 15 s.
DASHBOARD_CACHE_TTL_SECONDS = 15
# Completed time buckets (see below) only change when an old window is re-evaluated
# (late events), so they are cached for five minutes; the bucket in progress follows
# DASHBOARD_CACHE_TTL_SECONDS. A 30-day view then refreshes by reading minutes, not months.
DASHBOARD_HISTORY_CACHE_TTL_SECONDS = 300
# Time series and heatmaps draw at most this many time buckets; a longer range folds
# windows into buckets in SQL (the worst window per bucket is shown), so 30 days of
# one-minute windows cost the same to query and draw as three hours.
DASHBOARD_MAX_TIME_BUCKETS = 180
# Serving charts that need the window states (cache hits, batch sizes) decode at most
# this many evenly spaced windows of the range (a state blob is ~10-100 KB).
DASHBOARD_MAX_STATE_WINDOWS = 120
# A relative score (value against its threshold, 1 = at the threshold) is drawn capped
# here: ten times over is "very far over", more would wash out the colour scale.
DASHBOARD_SCORE_CAP = 10.0

# --- Data quality (detectors/families/data_quality.py) -----------------------------------
# Every data-quality check needs this many events in the window; below, results are
# reported as insufficient data (a window of 10 events with 1 null is not news).
DATA_QUALITY_MIN_ROWS = 100
# Share of a numeric feature's values outside [training min, training max]. A window
# from the training distribution puts about 2/(n_train + 1) there (well under 0.1 %);
# 1 % means real out-of-range input, not tail noise.
OUT_OF_RANGE_SHARE_MAX = 0.01
# Share of a categorical feature's values that training never saw. Zero for a window
# from the training distribution unless training missed a very rare category; 1 %
# is a new category a person would want to know about. The same level is the floor of drift's unseen-category
# test (detectors/thresholds/decision.py): a share over it, improbable under the reference's Good-Turing
# missing mass, makes a categorical feature drift, so one unseen row in 1 000 never does.
UNSEEN_CATEGORY_SHARE_MAX = 0.01
# Share of values whose JSON type differs from training's (a string in a numeric
# feature). Types are not noisy, so any type change is a contract break: 0.
TYPE_CHANGE_SHARE_MAX = 0.0
# Share of events that lack a training feature's key altogether (not null: absent).
# Producers that drop keys for nulls show up in the missing rate instead; 1 % absent
# keys means a schema change upstream.
MISSING_FEATURE_SHARE_MAX = 0.01
# Share of events that carry a feature training never had (a schema change).
NEW_FEATURE_SHARE_MAX = 0.0
# stale_features (detectors/families/freshness.py): share of a feature's requests whose value was
# older than its `[freshness] max_age` (off unless a max_age is set). Set max_age at the feature's
# refresh period plus its pipeline delay and an on-schedule store serves no stale value; 1 % stale
# is an online store missing refreshes, not noise.
STALE_FEATURE_SHARE_MAX = 0.01
# The feature-age sketch (window state) holds ages up to this many milliseconds (about three years)
# at LATENCY_RELATIVE_ACCURACY; older ones share its last bucket (their maximum is kept exactly).
FEATURE_AGE_MAX_MS = 1e11

# --- Training-serving skew (detectors/families/skew.py) ------------------------------------
# Distribution skew: serving against the training baseline by effect size only, so it
# reads "how far is serving from training" rather than "did it change now". 0.25 is
# above the drift PSI floor (0.2): at that size training and serving disagree for sure.
# It is data drift's comparison, so it cannot tell a serving bug from a changed world:
# it is always reported but breaches only for a feature whose parity could not be
# checked (no transform, no raw inputs sampled); where parity holds, the difference is
# drift, and where parity fails, parity skew is the alert (driftline.detectors.families.skew.skew_with_parity).
SKEW_DISTRIBUTION_PSI = 0.25
# Parity skew: the training transform re-run on logged raw inputs must reproduce the
# served feature. A numeric pair matches within this relative tolerance (float32
# round trips and summation order differ in the 7th digit, real bugs far more).
SKEW_PARITY_RELATIVE_TOLERANCE = 1e-6
# Share of sampled events whose served feature differs from the recomputed one. A
# correct pipeline gives 0; 1 % leaves room for one odd record in a small sample.
SKEW_PARITY_MISMATCH_RATE = 0.01
# At least this many sampled events with raw inputs are needed to judge parity.
SKEW_PARITY_MIN_SAMPLE = 30

# --- Latency SLO (detectors/families/latency.py; per model in [latency.models.NAME]) -------
# A typical online-inference budget; the bundled worker answers in a few ms, so these
# fire only for real slowness. Quantiles come from the window's latency histogram (1 %).
LATENCY_SLO_P50_MS = 50.0
LATENCY_SLO_P95_MS = 150.0
LATENCY_SLO_P99_MS = 250.0
# Share of events with status "error" allowed per window.
ERROR_RATE_MAX = 0.01
# Fewer events than this and latency/error results are insufficient data: a p99 of
# fewer than 100 events is the maximum of a handful.
LATENCY_MIN_EVENTS = 100

# --- Model quality (detectors/families/quality.py) ------------------------------------------
# What a binary classifier's window metrics are compared with (`quality_compared_with`). "calibration": the value
# each metric would have on the window's own scores if labels followed the training
# reliability curve (P(label | score bin), isotonic fit). A covariate shift moves the
# scores (riskier applicants: accuracy down, log loss up for a model that is still
# right), so comparing with the training metric pages on every covariate shift; this
# reference only moves when labels stop following the training relation (concept
# drift). "training": the training metric itself (regression and multiclass always).
QUALITY_COMPARED_WITH = "calibration"
# A window's metric breaches only when it is worse than that reference by more than
# max(floor, QUALITY_Z x standard error of the difference), the standard error
# computed from the window's own label counts (binomial for accuracy,
# precision, recall; Hanley-McNeil for ROC AUC; per-row spread for log loss, MAE,
# RMSE; see driftline.detectors.stats.quality.quality_standard_errors). A flat floor alone flagged
# normal traffic: recall from 40 actual positives has a standard error of ~0.06.
#
# Labelled predictions needed in a window before quality is judged: accuracy from
# 100 labels has a standard error of about 4-5 points; fewer and every margin is wide.
QUALITY_MIN_LABELS = 100
# Metrics that rest on one class (precision: predicted positives; recall: actual
# positives; F1: the fewer of the two; ROC AUC: the rarer class; macro F1: the rarest
# label) need this many rows of it: below ~30 the normal approximation behind the
# standard error fails and the margin is wider than the metric's range anyway.
QUALITY_MIN_CLASS_COUNT = 30
# One-sided z of the noise margin, on the skewness-corrected (Cornish-Fisher) quantile:
# 3.5 standard errors, ~2e-4 per metric and window, so under ~0.14 % of windows (six
# binary metrics, union bound) breach falsely; pages come from the evidence over windows
# (evidence.py) at the stated rate, not from one window's breach. Measured at 200 labels per window on the credit data (3000 windows, true
# default probabilities as scores): z = 3 flagged 0.6 % of windows (nine false pages a
# day at one-minute windows), z = 3.5 0.07 %. On the bundled 2-epoch MLP (500 windows
# per scenario): z = 3 / 3.5 flag 0.8 % / 0.2 % of `none` windows and catch
# `concept_drift` in 41 % / 22 % of windows (with true-probability scores at 3.5: 31 % of
# 200-label and 97 % of 1000-label windows).
QUALITY_Z = 3.5
# The floor of the margin for a score in [0, 1] where higher is better (accuracy,
# precision, recall, F1, ROC AUC, macro F1): five points absolute. With many labels
# the noise margin shrinks below it, and a drop smaller than this is not worth a page.
QUALITY_MAX_DROP = 0.05
# The floor of the margin for an error where lower is better (log loss, MAE, RMSE):
# this share (relative) of the training value.
QUALITY_MAX_ERROR_INCREASE = 0.2
# A window with fewer labels than this is judged on its labels pooled with those of
# the windows just before it (the same model version), at most QUALITY_POOL_MAX_WINDOWS
# back: labels are sparse, and a 200-label window catches a real concept drift about
# one time in five (QUALITY_Z above) where 1 000 labels catch it nearly always. The
# price is a little lag: a drift is judged on a mix of before and after until the pool
# is all "after". 0 turns pooling off.
QUALITY_POOL_MIN_LABELS = 1_000
QUALITY_POOL_MAX_WINDOWS = 10
# A quality reference measured on the training rows is optimistic (a confident tree's in-sample log loss): its
# evidence stream judges each metric against the level and spread of its first this many labelled windows.
QUALITY_LIVE_REFERENCE_WINDOWS = 8
# Chunk sizes (labelled rows) whose quality-metric spread a baseline keeps: typical windows' label counts;
# each metric's noise is the larger of its standard error and that spread (a confident model's log loss).
QUALITY_SPREAD_SIZES = (100, 200, 500, 1_000, 2_000, 5_000)
QUALITY_SPREAD_MAX_CHUNKS = 30

# --- Estimated quality before labels (detectors/families/estimated_quality.py) ----------------
# Confidence-based performance estimation: a binary classifier's ROC AUC, accuracy,
# precision, recall and F1 from the window's scores and the training calibration.
# Band: estimate +/- ESTIMATED_QUALITY_Z standard errors of the realized metric around
# it; 3, as NannyML's CBPE bands (three sampling standard errors), so a window's
# realized metric leaves the band about 0.3 % of the time when the assumptions hold.
ESTIMATED_QUALITY_Z = 3.0
# The alert: the band's upper end lies more than this below the training value, i.e.
# even the optimistic reading of the estimate is five points (absolute) worse than
# training; the same size of drop model_quality's floor (QUALITY_MAX_DROP) pages on.
ESTIMATED_QUALITY_MAX_DROP = 0.05
# Fewer scored rows than this and the estimate is untrusted (insufficient data): with
# 100 rows accuracy's band is already about +/- 0.1 wide.
ESTIMATED_QUALITY_MIN_ROWS = 100
# The share of a window's scores outside the score range the training labels covered
# (the calibration is extrapolated there) above which the estimate is untrusted.
ESTIMATED_QUALITY_MAX_OUTSIDE_SHARE = 0.05
# Rows without the model's own decision (predicted_class) are positive at this score: a calibrated score's cut.
ESTIMATED_QUALITY_THRESHOLD = 0.5
# estimation_invalid tests the last ten labelled windows: the second after a break raises it, ten later it clears.
ESTIMATION_INVALID_WINDOWS = 10
# Its false-alarm rate per judged window: at the z = 3 bands (1.35 % of windows miss) it takes two misses in ten.
ESTIMATION_INVALID_ALPHA = 0.01
# Windows back the service looks for those labelled ones: a day of one-minute windows, one small row read each.
ESTIMATION_INVALID_LOOKBACK_WINDOWS = 1_440
# Regression (direct loss estimation, detectors/estimation/dle.py): MAE and RMSE
# alert when the band's lower end exceeds training by this share (relative), i.e. even
# the optimistic reading is 20 % worse than training; the same margin model_quality's
# error floor (QUALITY_MAX_ERROR_INCREASE) pages on.
ESTIMATED_QUALITY_MAX_ERROR_INCREASE = 0.2
# Reference rows the loss estimators are fitted on (a seeded uniform sample beyond that):
# 2 losses x LOSS_ESTIMATOR_FOLDS fits of this size take about a second of one core,
# and the estimator's own error, measured on held-out rows, is in the band anyway.
LOSS_ESTIMATOR_MAX_ROWS = 20_000
# A regression reference needs this many labelled rows (finite label and prediction):
# fewer, and ten bins of held-out rows cannot measure the estimator's error.
LOSS_ESTIMATOR_MIN_ROWS = 300
# The share of the reference's predictions (central; the tails cut equally) whose range a
# window's predictions must keep to: the estimators are trees, flat beyond the rows they saw,
# so a window with more than ESTIMATED_QUALITY_MAX_OUTSIDE_SHARE of its predictions outside is
# untrusted. Measured (bench/estimation.py): no window shifted within the reference's bulk
# was flagged, and their bands kept their coverage; every window shifted past it was flagged,
# and there the MAE's z = 3 band covered 0-91 % of 10 000-row windows, by reference draw.
LOSS_ESTIMATOR_RANGE = 0.998
# Cross-fitting folds: every reference row has a loss predicted by estimators that never
# saw it (the band's spread and bias terms); a window is scored by the folds' mean.
LOSS_ESTIMATOR_FOLDS = 3
# Boosting iterations, leaves per tree and step (HistGradientBoostingRegressor, Poisson
# loss): enough for a loss that depends on a few features smoothly, bounded in cost.
LOSS_ESTIMATOR_TREES = 60
LOSS_ESTIMATOR_LEAVES = 15
LOSS_ESTIMATOR_LEARNING_RATE = 0.1

# --- Multivariate drift (detectors/stats/multivariate.py, driftline/baseline/reconstruction.py) --
# PCA keeps the fewest components that explain this share of the reference's standardised
# variance (NannyML's data-reconstruction default): enough to learn the features' joint
# structure, few enough that a broken correlation shows as reconstruction error.
PCA_VARIANCE_SHARE = 0.65
# Reference rows the PCA is fitted on (a seeded uniform sample beyond that): the fit is an
# SVD of rows x features, a fraction of a second at this size for a few dozen features.
PCA_FIT_MAX_ROWS = 100_000
# Rows of a `detect` window scored for reconstruction error (a seeded uniform sample beyond
# that): the mean of 100 000 rows is exact to a few thousandths of the band, and a
# million-row window does not pay a category lookup per value.
PCA_WINDOW_MAX_ROWS = 100_000
# The window's mean reconstruction error drifts outside mean +/- this many standard errors
# of the reference's (the spread of reference chunks of the window's size): 3 sigma is
# NannyML's band, ~0.3 % false alarms per window for a normal mean.
PCA_ERROR_Z = 3.0
# The domain classifier drifts when its cross-validated AUC exceeds the larger of this floor
# (a separation too small to act on even when significant) ...
DOMAIN_CLASSIFIER_AUC_MIN = 0.55
# ... and 0.5 + this many standard deviations of the AUC of two same-distribution samples of
# the sizes compared (Mann-Whitney's null variance, (n1 + n2 + 1) / (12 n1 n2)): small
# windows get a wider band, so the false-alarm rate does not depend on the window's size.
DOMAIN_CLASSIFIER_Z = 3.0
# Rows per side the classifier sees (seeded uniform samples beyond that): its cost per
# window is bounded whatever the window's size (0.07 s of CPU for five features at this cap).
DOMAIN_CLASSIFIER_MAX_ROWS = 1_000
# Cross-validation folds: each row is scored by a model that never saw it.
DOMAIN_CLASSIFIER_FOLDS = 5
# Boosting iterations, leaves per tree and step (scikit-learn's HistGradientBoostingClassifier):
# seven leaves are enough for two-feature interactions (a correlation change); fifteen trees
# with a larger step found as many flipped correlations as fifty of fifteen leaves at step 0.1,
# with no more false alarms, at a third of the CPU (bench/RESULTS.md, "Multivariate drift").
DOMAIN_CLASSIFIER_TREES = 15
DOMAIN_CLASSIFIER_LEAVES = 7
DOMAIN_CLASSIFIER_LEARNING_RATE = 0.3
# Rows a window needs on each side before either detector judges it (fewer: insufficient
# data); 50 rows resolve a reconstruction-error shift of ~0.4 reference standard deviations.
MULTIVARIATE_MIN_ROWS = 50
# Features listed as the largest contributors of a multivariate verdict.
MULTIVARIATE_TOP_FEATURES = 5

# The serving side's operational knobs (worker, replay, receiver) live in their own file, re-exported here
# so that `defaults.NAME` stays the one way to read any default.
from driftline.serving_defaults import *  # noqa: E402,F401,F403
# Embedding drift's bounds and levels, in their own file for the same reason.
from driftline.embedding_defaults import *  # noqa: E402,F401,F403
# Bounded-memory batch detection's chunk sizes and summary bounds, in their own file for the same reason.
from driftline.batch_defaults import *  # noqa: E402,F401,F403
# The rollout analysis's policy defaults, in their own file for the same reason.
from driftline.rollout_defaults import *  # noqa: E402,F401,F403
# The dashboard overview's bounds at fleet size, in their own file for the same reason.
from driftline.overview_defaults import *  # noqa: E402,F401,F403
# The OpenTelemetry trace intake's bounds, in their own file for the same reason.
from driftline.otlp_defaults import *  # noqa: E402,F401,F403
# The collector's Kafka client choice and librdkafka's fetch sizes, in their own file for the same reason.
from driftline.kafka_client_defaults import *  # noqa: E402,F401,F403
# The store's rollup and compaction defaults, in their own file for the same reason.
from driftline.rollup_defaults import *  # noqa: E402,F401,F403
