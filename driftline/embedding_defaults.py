"""Defaults of embedding drift: the event contract's bounds, the baseline's fit and the detector's levels.

`driftline.defaults` re-exports them; docs/configuration.md's table is generated from this file too.
"""
from __future__ import annotations

# --- Embeddings in events (driftline/embeddings/contract.py) -------------------------------
# The longest vector an event may carry: 4 096 covers every common text and image encoder
# (MiniLM 384, BERT 768, CLIP 512-1 024, OpenAI 1 536-3 072), and 4 096 numbers of ~20
# characters are ~80 KB, well inside the event's 1 MiB limit.
EMBEDDING_MAX_DIMENSION = 4_096
# Named vectors per event (a RAG service logs the query's, the answer's and a retrieved
# chunk's): each becomes a summary in every window, so their number is bounded.
EMBEDDING_MAX_NAMES = 8

# --- Embedding baseline (driftline/embeddings/reference.py) --------------------------------
# Principal components kept per embedding: the top 10 carry most of the variance of sentence
# encoders, and ten tests keep the multiple-testing correction mild.
EMBEDDING_COMPONENTS = 10
# Bins per principal component, at the reference's quantiles (deciles, as numeric PSI).
EMBEDDING_COMPONENT_BINS = 10
# k-means clusters of the codebook: 16 regions of the space, each holding ~6 % of the
# reference, so a window of 100 rows still expects ~6 events per cluster.
EMBEDDING_CLUSTERS = 16
# Random Fourier features approximating the RBF kernel: the MMD estimate's error falls as
# 1/sqrt(D); 512 gave the full-kernel MMD's power on the benchmark at a fixed cost per event.
EMBEDDING_RANDOM_FEATURES = 512
# Reference rows each half of the fit uses at most (a seeded sample beyond): the fit's cost is bounded
# whatever the training set's size.
EMBEDDING_FIT_MAX_ROWS = 20_000
# Rows per side of the pairwise distances whose median sets the RBF bandwidth (median heuristic).
EMBEDDING_BANDWIDTH_ROWS = 1_000
# Held-out reference rows the domain classifier tells a window's sample from (a seeded uniform
# sample): its cost per window is bounded, and 1 000 against a 200-row window sample puts the
# AUC's null standard deviation at 0.022.
EMBEDDING_CLASSIFIER_REFERENCE_ROWS = 1_000
# Null bands of the MMD^2 measured on reference chunks, at these window sizes, for the record
# (the decision uses the exact null moments for the window's own size; see reference.py).
EMBEDDING_NULL_CHUNK_SIZES = (100, 500, 2_000)
# Chunks drawn per size for those bands.
EMBEDDING_NULL_CHUNKS = 200
# A window pulls a vector back onto the radius EMBEDDING_CLIP_RADIUS x the EMBEDDING_CLIP_QUANTILE quantile of the
# reference's held-out rows' whitened distances from its mean (`clip_radius`) when it lies beyond: reference-like
# rows are almost never touched, and one vector of 1e50 sways a 500-row window's mean test as one odd real row would.
EMBEDDING_CLIP_RADIUS = 1.5
EMBEDDING_CLIP_QUANTILE = 0.99

# --- Embedding drift (detectors/families/embedding_drift.py) ------------------------------
# Family-wise false-alarm level of one embedding's verdict: split evenly (Bonferroni) over
# its five tests (MMD^2, principal components, clusters, mean, domain classifier), so a
# no-drift window is flagged at most 5 % of the time whatever the window's size.
EMBEDDING_ALPHA = 0.05
# A window needs this many events with the embedding before it is judged (fewer: insufficient
# data); 50 rows put ~3 expected events in each of the 16 clusters.
EMBEDDING_MIN_ROWS = 50
# Share of principal components drifted (Benjamini-Hochberg at the family's level) that counts as
# component drift: 0.1 is one component of ten.
EMBEDDING_DRIFTED_COMPONENTS_SHARE = 0.1
# The domain classifier on the window's sample (the PCA scores and the distance from their
# subspace of up to WINDOW_SAMPLE_SIZE vectors) reports drift when its cross-validated AUC
# exceeds the larger of this floor and 0.5 + EMBEDDING_CLASSIFIER_Z null standard deviations
# (Mann-Whitney's, for the two sample sizes). z = 3 is nominally 0.13 %; the cross-validated
# AUC spreads wider, measured at 0-1 % of no-drift windows: inside the classifier's ALPHA / 5.
EMBEDDING_CLASSIFIER_AUC_MIN = 0.55
EMBEDDING_CLASSIFIER_Z = 3.0
# Clusters listed as the ones that moved most (largest change of share), each with example ids.
EMBEDDING_TOP_CLUSTERS = 3
# Request ids kept per cluster in a window (bottom-k by hash, so they merge exactly).
EMBEDDING_CLUSTER_EXAMPLES = 3
