"""Defaults of bounded-memory batch detection (`detect` and `baseline` on files): chunk sizes and summary bounds.

`driftline.defaults` re-exports them; docs/configuration.md's table is generated from this file too.
"""
from __future__ import annotations

# --- Bounded-memory batch detection (detectors/batch/summary.py, plan.py, streamed.py) ------
# Rows read per chunk of a file by `detect` and `baseline` (`--batch-rows`): the peak memory is
# a few chunks' worth plus the summaries below, whatever the file's size. 200 000 rows of 23
# columns are ~40 MB as pandas, and large enough that per-chunk overheads are under 5 %.
BATCH_CHUNK_ROWS = 200_000
# Parquet files this small together (their data uncompressed, from the footers) are read whole by
# `detect` unless `--batch-rows` (or the batch_rows setting) asks for chunks: the same results, and
# for 1M + 100 000 rows x 23 columns (107 MB) 682 MiB peak against the streamed path's 1 043 MiB and
# about 0.7 s less wall time. Larger files, and CSV files (whose size is known once read), stream.
BATCH_IN_MEMORY_MAX_BYTES = 256_000_000
# A summary keeps a numeric column's values themselves up to this many (8 MB a column), so
# every statistic of a window (or reference) of up to a million rows is computed exactly as in
# memory; beyond, the values fold into fine bins and KS / Wasserstein / numeric Jensen-Shannon
# carry the documented bound (docs/detectors.md, "Bounded memory").
BATCH_EXACT_VALUES = 1_000_000
# Fine bins per numeric column once the values fold: at the reference's quantiles, plus its
# deciles (so PSI stays exact); 2 000 bins keep the KS bound near 1/2 000 of the reference's mass.
BATCH_FINE_BINS = 2_000
# Whole rows sampled per window and for the reference (bottom-k on a hash of the row position):
# what the multivariate detectors, --label (CBPE, DLE), --segment-by and reference-derived
# thresholds see; the PCA's own fit cap, so a window of up to this many rows is judged on all of them.
BATCH_SAMPLE_ROWS = 100_000
