"""A model version's `Baseline` from a table of any size, in bounded memory: `stream_baseline(table, ...)`.

`baseline_in_memory(frame, ...)` is what `driftline baseline --in-memory` computes (the whole table as a
pandas DataFrame: `driftline.baseline.compute_baseline`, the chunk spreads and the embedding references);
`stream_baseline` computes the same from passes over a `driftline.detectors.batch.passes.Table` (a file's
chunks, or a pandas, Spark or Dask DataFrame on its engine), holding a chunk and bounded summaries:

1. **scan** (`driftline.detectors.batch.baseline_scan`): row count, per numeric column counts, nulls,
   infinities, min, max, mean, M2 and, up to ``exact_values`` finite values, the values themselves;
   categorical counts; the prediction's source; the facts that decide the label task; a row sample.
2. **quantiles**, only for a numeric column with more than ``exact_values`` finite values: its fine-bin
   edges and deciles are found exactly by `driftline.detectors.batch.quantiles.RankSearch` (two to three
   passes of bin counts and one collecting at most ``exact_values`` values per column).
3. **bins and rows**: counts and sums on those columns' edges, the training quality (`LabelSummary`
   under the whole table's task), and the rows the sample (``sample_size``) and the PCA fit
   (`defaults.PCA_FIT_MAX_ROWS`) take: the same seeded positions `compute_baseline` takes.

What equals the in-memory baseline (`tests/detectors/test_batch_baseline.py` checks it):

* **exactly**: row and null counts, categorical profiles, the prediction's profile and source, the sample,
  the PCA fit (`reconstruction`), the training quality's counts, every numeric edge, decile and bin count;
  and for a column of at most ``exact_values`` finite values its whole profile, bit for bit;
* **within floating-point rounding** (relative 1e-9, summation order): a longer column's mean, standard
  deviation and per-bin sums (chunk moments merged by Chan's update, bin sums added chunk by chunk), and
  the quality's float sums (log loss, regression errors);
* ``distinct`` of a longer column: exact when the column has at most
  `defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES` distinct values or every value is among the row
  sample's (the detectors read it only against that limit); otherwise a lower bound above the limit;
* **from a bounded sample** beyond `defaults.PCA_FIT_MAX_ROWS` rows (100 000; exact below): the segment
  references (their counts are the sample's), the threshold spreads (chunks of the sample) and the
  embedding references (``--embedding``), all on the seeded uniform sample the PCA fit already uses.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline import (CATEGORICAL, CLASS, NUMERIC, Baseline, CategoricalProfile, LabelSummary,
                                NumericProfile, Profile, compute_baseline, fit_reconstruction, prediction_values)
from driftline.baseline.profiles import fine_probabilities
from driftline.baseline.segments import TrainingOutcomes, compute_segments
from driftline.baseline.summary import is_categorical_column, sample_positions, sample_records, \
    segment_reference_columns
from driftline.detectors.batch.baseline_scan import PREDICTION, BaselineScan, ScanPart, prediction_column
from driftline.detectors.batch.passes import Table
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.quantiles import RankSearch
from driftline.detectors.batch.summary import NumericSummary
from driftline.detectors.thresholds.spreads import measure_quality_spreads, measure_spreads
from driftline.errors import UserError

__all__ = ["HEAD_ROWS", "baseline_in_memory", "stream_baseline"]

# Rows of the table read first to tell the columns' kinds (a file's first chunk holds them).
HEAD_ROWS = 10_000
_POSITION = "\x00row"
_DECILES = np.arange(1, defaults.PSI_NUMERIC_BINS) / defaults.PSI_NUMERIC_BINS


def _embedding_references(frame: pd.DataFrame, embeddings: Mapping[str, str],
                          on_fit: Callable[[str, int, int], None] | None) -> dict[str, Any]:
    from driftline.embeddings.columns import read_embedding
    from driftline.embeddings.reference import fit_reference

    references = {}
    for name, column in embeddings.items():
        matrix, _ = read_embedding(frame, name, column)
        if on_fit is not None:
            on_fit(name, matrix.shape[0], matrix.shape[1])
        references[name] = fit_reference(matrix, name)
    return references


def _embedding_columns(frame: pd.DataFrame, embeddings: Mapping[str, str]) -> list[str]:
    from driftline.embeddings.columns import read_embedding

    used: list[str] = []
    for name, column in embeddings.items():
        used += [c for c in read_embedding(frame, name, column)[1] if c not in used]
    return used


def _features(head: pd.DataFrame, prediction: str | None, label: str | None, ignore: Sequence[str],
              categorical: Sequence[str], embedding_columns: Sequence[str], where: str) -> list[str]:
    special = [c for c in (prediction, label) if c]
    for column in [*special, *ignore, *categorical]:
        if column not in head.columns:
            raise UserError(f"column {column!r} is not in the {where} (columns: {', '.join(map(str, head.columns))})")
    dropped = {*special, *ignore, *embedding_columns}
    features = [str(c) for c in head.columns if c not in dropped]
    if not features:
        raise UserError(f"the {where} has no feature columns left after --prediction/--label/--ignore")
    return features


def baseline_in_memory(frame: pd.DataFrame, *, categorical: Sequence[str] = (), prediction: str | None = None,
                       label: str | None = None, ignore: Sequence[str] = (), embeddings: Mapping[str, str] = {},
                       segment_columns: Iterable[str] = (),
                       segment_max_values: int = defaults.SEGMENT_MAX_VALUES,
                       on_fit: Callable[[str, int, int], None] | None = None,
                       prediction_class: str | None = None) -> Baseline:
    """The baseline of a whole table held in memory (the former `driftline baseline`): `compute_baseline`,
    the embedding references of `embeddings` (name -> column or column prefix) and the chunk spreads.
    `prediction_class`: the column of the model's own decisions, which the training metrics follow."""
    columns = _embedding_columns(frame, embeddings)
    ignore = _decision_ignored(ignore, prediction_class, label)
    names = _features(frame, prediction, label, ignore, categorical, columns, "training data")
    references = _embedding_references(frame, embeddings, on_fit)
    features = frame[names]
    summary = compute_baseline(features, categorical=categorical,
                               predictions=frame[prediction] if prediction else None,
                               labels=frame[label] if label else None, segment_columns=segment_columns,
                               segment_max_values=segment_max_values,
                               decisions=frame[prediction_class] if prediction_class else None)
    summary.add_embeddings(references)
    summary.threshold_spreads = measure_spreads(features.set_axis(summary.feature_names, axis=1),
                                                {name: summary.kind(name) for name in summary.feature_names},
                                                frame[prediction] if prediction else None)
    if prediction and label:
        summary.quality_spreads = measure_quality_spreads(frame[prediction], frame[label],
                                                          frame[prediction_class] if prediction_class else None)
    return summary


def _decision_ignored(ignore: Sequence[str], prediction_class: str | None, label: str | None) -> list[str]:
    """`ignore` with the decisions' column (no feature; `_features` checks that it exists); it needs labels."""
    if prediction_class is None:
        return list(ignore)
    if label is None:
        raise UserError(f"--prediction-class {prediction_class} needs --label: the training metrics follow it")
    return [*ignore, prediction_class]


@dataclass
class _FinalPart:
    bins: dict[str, tuple[np.ndarray, np.ndarray, int, frozenset]]  # counts, sums, values off the sample, few such
    rows: pd.DataFrame
    quality: LabelSummary | None


@dataclass(frozen=True)
class _Final:
    """The last pass (module docstring, 3.)."""

    scan: BaselineScan
    edges: dict[str, np.ndarray]  # long numeric columns: their fine edges
    distinct: dict[str, np.ndarray]  # long numeric columns: the row sample's distinct values
    positions: np.ndarray  # table rows kept whole, sorted
    task: str | None
    decision: str | None = None  # the column of the model's own decisions (--prediction-class)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.scan.read

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> _FinalPart:
        prepared, _ = self.scan.prepared(chunk)
        bins = {}
        for name, edges in self.edges.items():
            raw = prepared[name].to_numpy(dtype=np.float64, na_value=np.nan)
            finite = raw[np.isfinite(raw)]
            index = np.searchsorted(edges, finite, side="right")
            counts = np.bincount(index, minlength=edges.size + 1).astype(np.int64)
            sums = np.bincount(index, weights=finite, minlength=edges.size + 1)
            known = self.distinct[name]
            at = np.minimum(np.searchsorted(known, finite), max(known.size - 1, 0))
            off = finite[known[at] != finite] if known.size else finite
            few: frozenset = frozenset()
            if known.size <= defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES and off.size:
                few = frozenset(np.unique(off)[:defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES + 1].tolist())
            bins[name] = (counts, sums, int(off.size), few)
        wanted = self.positions[(self.positions >= row_offset) & (self.positions < row_offset + len(chunk))]
        rows = chunk.iloc[wanted - row_offset][list(self.scan.read)].reset_index(drop=True)
        rows[_POSITION] = wanted
        quality = None
        if self.task is not None:
            assert self.scan.prediction is not None and self.scan.label is not None
            quality = LabelSummary(task=self.task).add(chunk[self.scan.prediction], chunk[self.scan.label],
                                                       None if self.decision is None else chunk[self.decision])
        return _FinalPart(bins, rows, quality)

    def merge(self, a: _FinalPart, b: _FinalPart) -> _FinalPart:
        bins = {}
        for name, (counts, sums, off, few) in a.bins.items():
            other = b.bins[name]
            merged = few | other[3]
            if len(merged) > defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES + 1:
                merged = frozenset(sorted(merged)[:defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES + 1])
            bins[name] = (counts + other[0], sums + other[1], off + other[2], merged)
        rows = b.rows if not len(a.rows) else a.rows if not len(b.rows) else pd.concat([a.rows, b.rows],
                                                                                     ignore_index=True)
        quality = None if a.quality is None or b.quality is None else a.quality.merge(b.quality)
        return _FinalPart(bins, rows, quality)


def _kinds(head: pd.DataFrame, features: list[str], categorical: Sequence[str]) -> dict[str, str]:
    named = set(categorical)
    return {name: CATEGORICAL if name in named or is_categorical_column(head[name]) else NUMERIC for name in features}


def _edges(search: RankSearch, name: str, fine_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(fine edges, decile edges) as `NumericProfile.from_values` computes them, from exact quantiles."""
    edges = np.unique(search.quantiles(name, fine_probabilities(fine_bins)))
    decile = np.unique(search.quantiles(name, _DECILES))
    if not np.isin(decile, edges).all():  # as from_values: the arithmetic puts them among the edges
        edges = np.union1d(edges, decile)
    return edges, decile


def _exact_profile(column: NumericSummary, infinite: int, fine_bins: int) -> NumericProfile:
    profile = NumericProfile.from_values(column.values, fine_bins)
    return dataclasses.replace(profile, nulls=column.missing - infinite, nonfinite=infinite)


def _long_profile(column: NumericSummary, infinite: int, edges: np.ndarray, decile: np.ndarray,
                  bins: tuple[np.ndarray, np.ndarray, int, frozenset], known: np.ndarray) -> NumericProfile:
    counts, sums, off, few = bins
    # few values off the sample's are all counted (exact up to the limit); many: a lower bound above it
    distinct = known.size + (max(len(few), 1) if off else 0)
    return NumericProfile(edges=edges, counts=counts, sums=sums, decile_edges=decile, count=column.count,
                          nulls=column.missing - infinite, nonfinite=infinite, min=column.min, max=column.max,
                          mean=column.mean, std=float(np.sqrt(column.m2 / column.count)), distinct=int(distinct))


@dataclass(frozen=True)
class _Prepared:
    """A quantile pass over chunks that carry the prediction's values (`BaselineScan.prepared`)."""

    scan: BaselineScan
    fold: Any

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.scan.read if c in (*self.fold.columns, self.scan.prediction))

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> Any:
        return self.fold.summarize(self.scan.prepared(chunk)[0], row_offset)

    def merge(self, a: Any, b: Any) -> Any:
        return self.fold.merge(a, b)


def _search(table: Table, scanner: BaselineScan, scan: ScanPart, names: list[str], fine_bins: int,
            budget: int) -> RankSearch:
    samples, counts, probabilities = {}, {}, {}
    wanted = np.concatenate((fine_probabilities(fine_bins), _DECILES))
    for name in names:
        column = scan.summary.columns[name]
        assert isinstance(column, NumericSummary)
        values = scan.summary.sample[name].to_numpy(dtype=np.float64, na_value=np.nan)
        samples[name] = np.concatenate((values[np.isfinite(values)], [column.min, column.max]))
        counts[name] = column.count
        probabilities[name] = wanted
    search = RankSearch.start(samples, counts, probabilities, budget)
    passes = 0
    while not search.done:
        passes += 1
        if search.wants_values:
            search = search.with_values(table.run(_Prepared(scanner, search.values_fold()),
                                                  f"{table.where} (quantile values)"))
        else:
            search = search.with_counts(table.run(_Prepared(scanner, search.counts_fold()),
                                                  f"{table.where} (quantile bins {passes})"))
    return search


def stream_baseline(table: Table, *, categorical: Sequence[str] = (), prediction: str | None = None,
                    label: str | None = None, ignore: Sequence[str] = (), embeddings: Mapping[str, str] = {},
                    segment_columns: Iterable[str] = (), segment_max_values: int = defaults.SEGMENT_MAX_VALUES,
                    sample_size: int = defaults.BASELINE_SAMPLE_SIZE, seed: int = 0,
                    fine_bins: int = defaults.BASELINE_FINE_BINS, exact_values: int = defaults.BATCH_EXACT_VALUES,
                    sample_rows: int = defaults.BATCH_SAMPLE_ROWS,
                    on_fit: Callable[[str, int, int], None] | None = None,
                    prediction_class: str | None = None) -> Baseline:
    """`baseline_in_memory`'s baseline of `table`, in passes (module docstring: what is exact, what is bounded).

    `exact_values`: finite values per numeric column kept whole (and the most a quantile search collects);
    `sample_rows`: the scan's row sample, whose values start each long column's quantile search."""
    if fine_bins < defaults.PSI_NUMERIC_BINS or fine_bins % defaults.PSI_NUMERIC_BINS:
        raise UserError(f"fine_bins must be a multiple of {defaults.PSI_NUMERIC_BINS}, got {fine_bins}")
    head = table.head(HEAD_ROWS)
    head.columns = [str(c) for c in head.columns]
    embedding_columns = _embedding_columns(head, embeddings)
    ignore = _decision_ignored(ignore, prediction_class, label)
    features = _features(head, prediction, label, ignore, categorical, embedding_columns, table.where)
    kinds = _kinds(head, features, categorical)
    prediction_kind = None
    if prediction is not None:
        source, _ = prediction_column(head, prediction)
        numeric_head = pd.api.types.is_numeric_dtype(head[prediction].dtype) and not \
            pd.api.types.is_bool_dtype(head[prediction].dtype)
        prediction_kind = NUMERIC if source not in (None, CLASS) or (source is None and numeric_head) else CATEGORICAL
    elif label is not None:
        raise UserError("training labels need the training predictions too (for the training metrics)")
    numeric = [name for name, kind in kinds.items() if kind == NUMERIC]
    plan = Plan.scan({name: NUMERIC for name in [*numeric, *([PREDICTION] if prediction_kind == NUMERIC else [])]},
                     exact_values=exact_values, sample_rows=sample_rows)
    read = tuple(dict.fromkeys([*features, *(c for c in (prediction, label, prediction_class) if c),
                                *embedding_columns]))
    scan = BaselineScan(plan, tuple(name for name in features if kinds[name] == CATEGORICAL), prediction,
                        prediction_kind, label, read)
    part: ScanPart = table.run(scan, f"{table.where} (scan)")
    rows = part.summary.rows
    long = [name for name in plan.kinds if not part.summary.columns[name].exact]  # type: ignore[union-attr]
    search = _search(table, scan, part, long, fine_bins, exact_values) if long else None
    edges = {name: _edges(search, name, fine_bins) for name in long} if search is not None else {}
    known = {}
    for name in long:
        values = part.summary.sample[name].to_numpy(dtype=np.float64, na_value=np.nan)
        known[name] = np.unique(values[np.isfinite(values)])
    take_sample = sample_positions(rows, sample_size, seed)
    take_fit = (np.arange(rows) if rows <= defaults.PCA_FIT_MAX_ROWS
                else sample_positions(rows, defaults.PCA_FIT_MAX_ROWS, seed))
    task = None
    if label is not None:
        assert part.evidence is not None
        task = part.evidence.task(part.source)
    final: _FinalPart = table.run(_Final(scan, {name: e for name, (e, _) in edges.items()}, known,
                                         np.union1d(take_sample, take_fit), task, prediction_class),
                                  f"{table.where} (bins and rows)")
    kept = final.rows.set_index(_POSITION)

    def profile_of(name: str) -> Profile:
        if name in scan.categorical or (name == PREDICTION and prediction_kind == CATEGORICAL):
            counts, nulls, types = part.categories[name]
            return CategoricalProfile(counts=counts, nulls=nulls, value_types=types)
        column = part.summary.columns[name]
        assert isinstance(column, NumericSummary)
        if name in edges:
            return _long_profile(column, part.infinite[name], *edges[name], final.bins[name], known[name])
        return _exact_profile(column, part.infinite[name], fine_bins)

    profiles = {name: profile_of(name) for name in features}
    prediction_profile = profile_of(PREDICTION) if prediction is not None else None
    source = part.source if part.source is not None else (
        None if prediction is None else prediction_values(head[prediction].iloc[:0])[0])
    sampled = kept.loc[take_sample]
    sample = sample_records(sampled[features], None if prediction is None else sampled[prediction].to_numpy(),
                            None if label is None else sampled[label].to_numpy())
    fitted = kept.loc[take_fit]
    frame = fitted[features].set_axis(features, axis=1).reset_index(drop=True)
    reconstruction = fit_reconstruction(frame, {name: profile.kind for name, profile in profiles.items()}, seed=seed)
    columns = segment_reference_columns(profiles, segment_columns)
    raw_predictions = None if prediction is None else fitted[prediction].to_numpy()
    outcomes = TrainingOutcomes(None if prediction is None else prediction_values(raw_predictions)[1],
                                prediction_profile, source, raw_predictions,
                                None if label is None else fitted[label].to_numpy())
    segments = compute_segments(frame, profiles, columns, segment_max_values, outcomes) if columns else {}
    baseline = Baseline(rows=rows, profiles=profiles, prediction=prediction_profile, prediction_source=source,
                        quality=final.quality, sample=sample, fine_bins=fine_bins, reconstruction=reconstruction,
                        segments=segments)
    for reference in segments.values():
        reference.attach_sample(sample)
    baseline.add_embeddings(_embedding_references(fitted.reset_index(drop=True), embeddings, on_fit))
    baseline.threshold_spreads = measure_spreads(frame, dict(kinds), None if prediction is None
                                                 else fitted[prediction].reset_index(drop=True))
    if prediction is not None and label is not None:
        baseline.quality_spreads = measure_quality_spreads(fitted[prediction], fitted[label])
    return baseline
