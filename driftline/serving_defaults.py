"""Defaults of the serving side: the bundled worker, its replay traffic, the payload-logger receiver, and the
bounds and objectives of generated (LLM) answers.

Mostly operational knobs (ports, queues, timeouts, caches); `driftline.defaults` re-exports them, and
docs/configuration.md's table is generated from both files.
"""
from __future__ import annotations

# --- Worker (worker/) -------------------------------------------------------------
# Dynamic batching: up to 64 requests share one forward pass. On CPU the default MLP's
# per-row cost stops falling beyond about 64 rows, and 64 rows of features are far
# below any GPU's appetite, so a larger batch only adds queueing.
WORKER_MAX_BATCH_SIZE = 64
# A request waits at most this long for others to join its batch, and only while other
# requests are already being read (a lone request never waits). 2 ms is about two
# single-row forward passes in the worker: under load batches fill from the queue that
# builds while the previous batch computes, so the wait only matters at moderate load.
WORKER_MAX_WAIT_MS = 2.0
# Prediction cache: 10 000 entries of ~1 KB, and five minutes, long enough to absorb
# retries and duplicate submissions; entries are keyed by model version so a promotion
# never serves stale answers.
WORKER_CACHE_SIZE = 10_000
WORKER_CACHE_TTL_SECONDS = 300.0
# Events held in memory while Kafka is slow or down (about 3 KB each as Python
# objects, so ~60 MB); at 300 requests/s that rides out a minute of outage. Beyond
# it events are dropped and counted (driftline_worker_events_dropped_total).
WORKER_EVENT_BUFFER = 20_000
# POST /predict bodies above this are refused with 413: a 14-field request is ~500 bytes.
WORKER_MAX_BODY_BYTES = 65_536
# A request's body must be in within this many seconds of its headers, else 408 and the
# connection is closed. 64 KB at the slowest mobile link (~100 kbit/s) takes ~5 s; a client
# slower than 10 s is stalled or hostile, and each one still holds a connection until then.
WORKER_BODY_TIMEOUT_SECONDS = 10.0
# A connection must send a request's line and headers (~300 bytes) within this many seconds of
# connecting or of its previous answer, else it is closed: uvicorn itself has no such deadline.
WORKER_HEAD_TIMEOUT_SECONDS = 10.0
# Open connections the worker serves at most (uvicorn's limit_concurrency); beyond it a new
# request gets 503. Twice WORKER_MAX_PENDING_REQUESTS leaves room for keep-alive and slow
# clients beside a full queue, and stays under the usual 4096 open-file limit.
WORKER_MAX_CONNECTIONS = 2_048
# Artifact pruning after each new version (~13 MB per default-size version). Kept: production,
# the last 3 earlier production versions (what `driftline rollback` walks back to in practice),
# and never-promoted candidates younger than 3 days: long enough to look at one over a
# weekend; at the retraining policy's pace (one per 6 h cooldown) that is at most 12 candidates.
WORKER_KEEP_PREVIOUS_PRODUCTION = 3
WORKER_CANDIDATE_MAX_AGE_SECONDS = 3 * 86_400
# Requests admitted or queued for a forward pass at most; beyond it POST /predict answers
# 503 with Retry-After. 1 024 requests are 16 full batches of 64, about 100 ms of compute
# for the default MLP on CPU: a request refused here would have waited past the p99
# latency SLO anyway, and the bound keeps an overload's memory flat.
WORKER_MAX_PENDING_REQUESTS = 1_024
# The Retry-After (seconds) of a 503: long enough for a full queue to drain many times over.
WORKER_RETRY_AFTER_SECONDS = 1
# How often the worker reads the production alias; a rollback takes effect within
# this time plus the model's load time (well under a second for the default MLP).
WORKER_ALIAS_POLL_SECONDS = 1.0
# Shadow requests waiting for the candidate at most; beyond it a copy is dropped and counted
# (driftline_worker_shadow_dropped_total). 256 are four full batches of 64, about 25 ms of
# compute for the default MLP on CPU: a candidate that falls further behind than that is
# slower than production, and queueing more would only spend memory on stale copies.
WORKER_SHADOW_QUEUE = 256
# The shadow thread's nice increment: 10 of Linux's 0-19 lets the kernel give contended cores
# to production's forward passes first (a niced thread gets ~10 % of a core against a normal one),
# so a candidate that cannot keep up falls behind and drops copies instead of slowing production.
WORKER_SHADOW_NICE = 10
# Retraining on recent labelled traffic: keep the last 20 000 requests for the label
# join; refuse to retrain on fewer than 1 000 labelled rows, where a holdout of 20 %
# (200 rows) cannot tell two models' log losses apart reliably.
WORKER_RETRAIN_BUFFER_ROWS = 20_000
WORKER_RETRAIN_MIN_ROWS = 1_000
# A retrained candidate is promoted only if, besides beating production on recent traffic,
# its log loss on production's own training holdout is at most 10 % above production's.
# Measured (small MLP, 2 000 rows): retraining on the same concept costs +0.5 %; flipping 20 %
# of the labels +15 %, half of them +72 %. A genuine concept drift costs +37 %, so such a
# candidate is registered but waits for a human to promote it.
WORKER_RETRAIN_HOLDOUT_MARGIN = 0.10

# --- Capacity and cost signals (worker/serving_signals.py) ---------------------------
# The worker's utilisation, rates and cost per 1 000 predictions are measured over this trailing
# window: long enough to hold many batches at any load, short enough for an autoscaler to follow.
WORKER_SIGNAL_WINDOW_SECONDS = 30.0
# `[capacity] target_utilization`: the forward-pass utilisation the recommended replica count aims
# at. Queueing delay grows as rho/(1-rho): at 0.65 it is about twice the service time, with room for a
# burst; past 0.8 it climbs steeply (the knee bench/worker.py --capacity measures).
WORKER_TARGET_UTILIZATION = 0.65

# --- Replay (worker/replay.py) ------------------------------------------------------
# In-flight requests at most: bounds the replay's memory and the load it can put on a worker.
REPLAY_MAX_CONCURRENCY = 64
# Labels are "delayed" by this much after the prediction (days in real life, seconds in a demo).
REPLAY_LABEL_DELAY_SECONDS = 5.0
# A rollout scenario's candidate is trained on production's number of rows, at most this many: it stands for a
# version like production, not for production's cost. Measured (small MLP, 2 epochs): on 40 000 rows its holdout
# log loss is production's (80 000 rows) within 0.002 and its training and baseline take half the time.
REPLAY_CANDIDATE_MAX_ROWS = 40_000
# The replay's simulated online feature store (worker/online_features.py) recomputes each online
# feature this often, so a served value is up to this old (minutes or hours in real life, seconds in a
# demo whose windows are seconds long).
REPLAY_FEATURE_REFRESH_SECONDS = 2.0
# The `[freshness] max_age` that `up` and the stale_features scenario configure for those features:
# three refresh periods, so a store that refreshes on schedule serves no stale value.
REPLAY_FEATURE_MAX_AGE_SECONDS = 6.0

# --- Worker: shared Redis cache and the retraining process (worker/) ---------------
# The optional Redis tier of the prediction cache (`driftline worker --cache-url`).
# A Redis on the same host or LAN answers a GET in 0.1-1 ms; a round trip that takes
# longer than 20 ms is treated as a miss, so a sick Redis adds at most this much to a
# request, a fifth of the p99 latency SLO.
WORKER_REDIS_TIMEOUT_SECONDS = 0.02
# After a failed round trip the worker stops asking Redis for this long, then tries
# again: during an outage at most one request per second pays the timeout.
WORKER_REDIS_RETRY_SECONDS = 1.0
# Predictions waiting to be written to Redis while a write is in flight (~200 bytes
# each); beyond this they are not cached remotely, which only costs a later miss.
WORKER_REDIS_MAX_PENDING_WRITES = 10_000
# Every key starts with this, so the worker's keys are easy to find, count or delete
# (`redis-cli --scan --pattern 'driftline:pred:*'`) in a Redis shared with other uses.
WORKER_REDIS_KEY_PREFIX = "driftline:pred:"
# A retrain runs in a child process with one torch thread at this nice value: on a
# 2-core machine the serving process keeps its core and the kernel prefers it for the
# other: p99 latency during a retrain was 14-43 ms against 260-3 000 ms with training
# on a thread of the worker (docs/worker.md).
WORKER_RETRAIN_TORCH_THREADS = 1
WORKER_RETRAIN_NICENESS = 10
# At shut-down a running retrain gets SIGTERM, then SIGKILL after this many seconds.
WORKER_RETRAIN_STOP_GRACE_SECONDS = 3.0

# --- Receiver (receiver/: `driftline receiver`) ------------------------------------------
# A request or response half waits this long for its other half (paired by ce-id), then is
# dead-lettered. KServe's logger sends both halves within the request's own latency, so a
# minute covers slow models and the logger's queue; a half past it will not be paired.
RECEIVER_PAIR_WAIT_SECONDS = 60.0
# Halves waiting at most (a v1/v2 body is typically a few KB; RECEIVER_MAX_BODY_BYTES caps
# each): 10 000 is ~40 MB at 4 KB. Beyond it the oldest is dead-lettered to make room.
RECEIVER_MAX_PENDING = 10_000
# ce-ids remembered after pairing or expiry, so a logger retry is ignored rather than
# counted twice (about 100 bytes each: ~10 MB). Older ids fall out least recently used first.
RECEIVER_SEEN_IDS = 100_000
# Events held in memory while Kafka is slow or down; beyond it POST /events and the
# CloudEvents endpoint answer 503 with Retry-After (nothing is accepted half way).
RECEIVER_EVENT_BUFFER = 20_000
# One HTTP body at most (a CloudEvent half, or a batch of JSON lines): larger is refused with 413.
RECEIVER_MAX_BODY_BYTES = 4 << 20
# A model version without a registered baseline is looked up again after this long.
RECEIVER_BASELINE_RECHECK_SECONDS = 30.0
# Dead letters waiting for the store (each up to COLLECTOR_DEAD_LETTER_RAW_BYTES, so at most
# ~64 MB): beyond it, while the store is down under a flood of bad input, a letter is kept on
# the DLQ topic only (counted, logged). Written in batches this often, off the HTTP path.
RECEIVER_DEAD_LETTER_STORE_ROWS = 1_000
RECEIVER_DEAD_LETTER_STORE_INTERVAL_SECONDS = 0.5
# Bytes the waiting halves hold at most (bodies as received, attributes, ~1 KB bookkeeping each):
# 10 000 halves of a few KB fit (RECEIVER_MAX_PENDING binds first), 16 halves at the 4 MiB body
# limit do; beyond it the oldest are dead-lettered. Bodies are parsed at pairing, not while waiting.
RECEIVER_MAX_PENDING_BYTES = 64 << 20
# Distinct models one call may name: a proxy's batch holds a few services' halves; each model costs
# up to three store reads on a cold cache (~1 ms each), so 32 bounds one call's lookups to ~0.1 s.
RECEIVER_MAX_MODELS_PER_CALL = 32
# (model, version) schemas and production versions cached, each map least recently used out first:
# 32 times the models of one call, so no call can flush what the others use.
RECEIVER_LOOKUP_CACHE_ENTRIES = 1_024
# Refusals one answer lists, each a dead letter of its own; the call's others are counted in the
# answer (errors_left_out) and go together as one more letter, so a 4 MiB body of junk lines
# makes ~100 letters and a few KB of answer, not two million of each.
RECEIVER_MAX_ERRORS = 100
# A letter's bytes on the DLQ topic (the store keeps COLLECTOR_DEAD_LETTER_RAW_BYTES): a stock
# broker refuses messages above 1 MiB (message.max.bytes), and a half may be 4 MiB; a quarter of it
# leaves room for headers. `driftline.raw_size` records the full size of a cut letter.
RECEIVER_DEAD_LETTER_RAW_BYTES = 256 << 10
# Letters waiting for Kafka at most, and their bytes: kafka-python does not bound large records,
# so a stopped broker would hold every letter until its delivery timeout; 128 cut letters of 256 KiB
# fit. Beyond it a letter is counted (dead_letters_not_sent) and kept in the store only.
RECEIVER_DEAD_LETTER_INFLIGHT = 10_000
RECEIVER_DEAD_LETTER_INFLIGHT_BYTES = 32 << 20
# After the DLQ producer failed to connect (a 2 s bootstrap try that blocks a request thread),
# letters fail at once (counted, stored) for this long before the next try.
RECEIVER_DEAD_LETTER_RECONNECT_SECONDS = 5.0
# A failure that repeats under a flood (a letter not stored, not sent) is logged once per this
# long, with the count of the others: 2 690 lines for one bad body told nothing more than one.
RECEIVER_LOG_EVERY_SECONDS = 10.0

# --- Ingress (driftline/ingress.py: the receiver's and the /metrics servers' limits) -----------------
# A receiver body (up to RECEIVER_MAX_BODY_BYTES) must be in within this many seconds, else 408 and closed: 4 MiB in 15 s is 2.2 Mbit/s, far below a cluster link.
RECEIVER_BODY_TIMEOUT_SECONDS = 15.0
# A receiver connection must send a request's head within this many seconds of connecting or of its last answer (as WORKER_HEAD_TIMEOUT_SECONDS).
RECEIVER_HEAD_TIMEOUT_SECONDS = 10.0
# Open receiver connections at most (503 beyond): bodies being read then hold at most 64 x 4 MiB = 256 MiB; a logger sends from a few workers per service.
RECEIVER_MAX_CONNECTIONS = 64
# A /metrics (collector, scheduler) connection must send its request's head within this many seconds: a scrape is one short GET.
METRICS_HEAD_TIMEOUT_SECONDS = 10.0
# Open /metrics connections at most (a thread each; 503 beyond): a few Prometheus servers and a dashboard scrape it.
METRICS_MAX_CONNECTIONS = 32

# --- Generated answers (LLM serving: events' ttft / tpot / tokens_in / tokens_out) ------------
# Latency parts a window keeps ("total", "queue", "compute", "ttft", "tpot", ...): each part becomes a
# sketch in the window state, three results and metrics series, so their number is bounded; the
# values of parts first seen beyond it are counted (latency_left_out), not kept. 16 is five times
# what the worker and an LLM server send.
LATENCY_MAX_PARTS = 16
# tokens_in / tokens_out: non-negative integers up to this. The longest context windows served
# today are 1-2 million tokens; ten million leaves room and stays within the window state's
# token sketch (LATENCY_MAX_MS), so every count is kept to its 1 % accuracy.
TOKENS_MAX = 10_000_000
# Any latency part of an event (total, queue, compute, ttft, tpot, ...), in ms, at most: no request is served
# for a day, and a larger value is a forged or mis-unit time (a response stamped years on); dead-lettered.
LATENCY_PART_MAX_MS = 86_400_000
# An event's batch_size at most: a forward pass of more than a million requests is a bug, not a batch; dead-lettered.
EVENT_BATCH_SIZE_MAX = 1_000_000
# Default objectives of the generated-answer parts, held to their p99 only when events carry
# them (an event without "ttft" never makes a ttft result). MLPerf Inference's Llama 2 70B
# server scenario holds TTFT p99 <= 2 s and TPOT p99 <= 200 ms: an answer slower than that is
# slow by the industry's own benchmark. [latency.parts.NAME] sets any part's p50/p95/p99.
LATENCY_SLO_TTFT_P99_MS = 2000.0
LATENCY_SLO_TPOT_P99_MS = 200.0
