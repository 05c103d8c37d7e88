"""Fold one batch into several segment sub-states in one pass: the same counts as each sub-state's own `add_batch`.

`fold_groups(states, batch, groups)` leaves ``states[g]`` exactly as
``states[g].add_batch(batch.take(np.flatnonzero(groups == g)))`` would, without cutting
the batch into sub-batches. Cutting made every segment pay a window's fixed cost per
feature (a pass over the baseline's 1 000 fine bins, a pandas count of the categories);
here the numeric features are binned for all groups at once (one `np.bincount` of bin and
group together, one sort for the per-bin sums) and the categories counted once
(`pd.factorize`), so a segment costs in proportion to its rows. The sums are taken over the
same values in the same order as `add_batch` takes them, so they are equal to the last bit.
Columns outside the fast paths (mixed types, a numeric feature that received strings,
class-key predictions) are folded group by group as `add_batch` does. For sub-states
only: no sample, no segments of their own.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Container

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from driftline import defaults
from driftline.baseline import CATEGORICAL, NUMERIC, NumericProfile, Profile, category_key
from driftline.window_state.batch import EventBatch
from driftline.window_state.columns import MISSING, column_from_objects, prediction_types, types_of
from driftline.window_state.decisions import fold_decisions
from driftline.window_state.feature import FeatureWindow, _capped, known_categories
from driftline.window_state.other_features import OTHER_FEATURES, fold_other, new_feature_room, overflow

if TYPE_CHECKING:
    from driftline.window_state.state import WindowState

__all__ = ["fold_groups"]


class _Groups:
    """Rows of a batch by group: each group's positions in batch order, and the order that lists them together."""

    def __init__(self, groups: np.ndarray, count: int):
        self.codes = np.asarray(groups, dtype=np.intp)
        self.count = count
        self.order = np.argsort(self.codes, kind="stable")
        self.sizes = np.bincount(self.codes, minlength=count)
        self.bounds = np.concatenate(([0], np.cumsum(self.sizes)))
        self.rows = [self.order[self.bounds[g]:self.bounds[g + 1]] for g in range(count)]  # each group's positions

    def per_group(self, mask: np.ndarray) -> list[int]:
        """How many rows of each group `mask` selects."""
        return np.bincount(self.codes[mask], minlength=self.count).tolist()


def fold_groups(states: list["WindowState"], batch: EventBatch, groups: np.ndarray) -> None:
    """Fold each event of `batch` into ``states[groups[i]]`` (module docstring)."""
    if any(s.sample_size or s.segments for s in states):
        raise ValueError("fold_groups folds segment sub-states (no sample, no segments)")
    by = _Groups(groups, len(states))
    rows = by.rows
    live = [g for g in range(len(states)) if rows[g].size]
    for g in live:
        states[g]._require_baseline()
    for g in live:
        _add_scalars(states[g], batch, rows[g])
    absent = _absent_by_group(batch, by)
    profiles = states[0].baseline.profiles if states[0].baseline is not None else {}
    room = {g: new_feature_room(states[g].features, profiles) for g in live}
    left_out: dict[int, list[str]] = {g: [] for g in live}  # as `add_batch` bounds the names outside the baseline
    for name, column in batch.features.items():
        profile = profiles.get(name)
        admitted = []
        for g in live:
            if profile is None and name not in states[g].features:
                if room[g] <= 0 or name == OTHER_FEATURES:
                    left_out[g].append(name)
                    continue
                room[g] -= 1
            admitted.append(g)
        if admitted:
            _add_feature(states, admitted, by, name, column, batch.feature_types.get(name, {}), absent.get(name),
                         profile)
    for g in live:
        size = int(rows[g].size)
        sparse = batch.sparse.take(rows[g], batch.n) if batch.sparse is not None else None
        if left_out[g] or sparse is not None:
            columns = {name: batch.features[name][rows[g]] for name in left_out[g]}
            fold_other(states[g].features, size, *overflow(columns, left_out[g], sparse, size))
        states[g].add_absent_features(batch, size, (OTHER_FEATURES,) if left_out[g] or sparse is not None else ())
    _add_prediction(states, live, by, batch)
    for g in live:
        states[g].add_latency({part: values[rows[g]] for part, values in batch.latency_ms.items()},
                              None if batch.tokens is None else {
                                  name: counts[rows[g]] for name, counts in batch.tokens.items()})


def _add_scalars(state: "WindowState", batch: EventBatch, index: np.ndarray) -> None:
    """Events, event times, statuses, cache hits and batch sizes, as `add_batch` counts them."""
    state.events += int(index.size)
    times = batch.event_time_ms[index]
    if times.size:
        low, high = int(times.min()), int(times.max())
        state.min_event_ms = low if state.min_event_ms is None else min(state.min_event_ms, low)
        state.max_event_ms = high if state.max_event_ms is None else max(state.max_event_ms, high)
    for status, count in Counter(batch.status[index].tolist()).items():
        state.status_counts[str(status)] = state.status_counts.get(str(status), 0) + count
    if batch.cache_hit.size:
        hits = batch.cache_hit[index]
        state.cache_hits += int(np.count_nonzero(hits == 1.0))
        state.cache_misses += int(np.count_nonzero(hits == 0.0))
    if batch.batch_size.size:
        sizes = batch.batch_size[index]
        if not np.isnan(sizes).all():
            values, counts = np.unique(sizes[~np.isnan(sizes)].astype(np.int64), return_counts=True)
            for size, count in zip(values.tolist(), counts.tolist()):
                state.batch_sizes[size] = state.batch_sizes.get(size, 0) + count


def _absent_by_group(batch: EventBatch, by: _Groups) -> dict[str, list[int]]:
    """Per feature that some events lack, how many of each group's events lack it (as `EventBatch.take` counts)."""
    out = {}
    for name, count in batch.absent.items():
        if count and batch.events:
            events = batch.events
            missing = np.fromiter((batch._feature(events[i], name) is MISSING for i in range(batch.n)), dtype=bool,
                                  count=batch.n)
            out[name] = by.per_group(missing)
    return out


def _window(state: "WindowState", name: str, profile: Profile | None, column: np.ndarray) -> FeatureWindow:
    window = state.features.get(name)
    if window is None:
        kind = profile.kind if profile is not None else (NUMERIC if column.dtype == np.float64 else CATEGORICAL)
        window = state.features[name] = FeatureWindow(kind=kind)
    return window


def _add_feature(states: list["WindowState"], live: list[int], by: _Groups, name: str, column: np.ndarray,
                 types: dict[str, int], absent: list[int] | None, profile: Profile | None) -> None:
    rows = by.rows
    numeric: list[int] = []
    strings: list[int] = []
    rest: list[int] = []
    all_strings = column.dtype == object and infer_dtype(column, skipna=True) == "string"
    present = ~pd.isna(column) if all_strings else None
    non_null = by.per_group(present) if all_strings else None
    for g in live:
        if column.dtype == np.float64:
            window = _window(states[g], name, profile, column)
            (numeric if window.kind == NUMERIC else rest).append(g)
        elif all_strings and non_null[g]:
            window = _window(states[g], name, profile, column)
            (strings if window.kind == CATEGORICAL else rest).append(g)
        else:
            rest.append(g)
    if numeric:
        numbers = by.per_group(~np.isnan(column))
        windows = {g: states[g].features[name] for g in numeric}
        for g, window in windows.items():
            window.absent += absent[g] if absent else 0
            if numbers[g]:
                window.value_types["number"] = window.value_types.get("number", 0) + numbers[g]
        _add_numbers(windows, column, by, profile)
    if strings:
        windows = {g: states[g].features[name] for g in strings}
        for g, window in windows.items():
            window.absent += absent[g] if absent else 0
            window.value_types["string"] = window.value_types.get("string", 0) + non_null[g]
        _add_strings(windows, column, by, known_categories(profile))
    for g in rest:  # as `add_batch` does with the group's own sub-batch
        part = column[rows[g]]
        part, part_types = column_from_objects(part) if column.dtype == object else (part, types_of(part))
        _window(states[g], name, profile, part).add(part, part_types, absent[g] if absent else 0, profile)


def _add_prediction(states: list["WindowState"], live: list[int], by: _Groups, batch: EventBatch) -> None:
    rows = by.rows
    values = batch.prediction
    numeric = []
    for g in live:
        state = states[g]
        if batch.decisions is not None:  # the model's own decisions (predicted_class), as `add_batch` folds them
            state.decisions = fold_decisions(state.decisions, values[rows[g]], batch.decisions[rows[g]])
        if values.dtype == np.float64 and state.prediction_window(batch).kind == NUMERIC:
            numeric.append(g)
            continue
        part = values[rows[g]]
        state.prediction_window(batch).add(part, prediction_types(part), 0, state.prediction_profile)
    if numeric:
        numbers = by.per_group(~np.isnan(values))
        windows = {g: states[g].prediction for g in numeric}
        for g, window in windows.items():
            window.value_types["number"] = window.value_types.get("number", 0) + numbers[g]
        baseline = states[numeric[0]].baseline
        _add_numbers(windows, values, by, baseline.prediction if baseline is not None else None)


def _add_numbers(windows: dict[int, FeatureWindow], column: np.ndarray, by: _Groups, profile: Profile | None) -> None:
    """`FeatureWindow._add_numbers` for each group's rows of a float64 column, the fine bins in one pass."""
    sane = np.abs(column) <= defaults.VALUE_MAX_ABS  # NaN compares False
    if not sane.all():
        nan = np.isnan(column)
        outside = ~(sane | nan)
        nulls, nonfinite = by.per_group(nan), by.per_group(outside)
        below, above = by.per_group(outside & (column < 0)), by.per_group(outside & (column > 0))
        for g, window in windows.items():
            window.nulls += nulls[g]
            window.nonfinite += nonfinite[g]
            window.below_min += below[g]
            window.above_max += above[g]
    ordered, ordered_sane = column[by.order], sane[by.order]
    all_sane = bool(ordered_sane.all())
    binned = isinstance(profile, NumericProfile) and profile.count
    groups, parts = [], []
    for g, window in windows.items():
        low, high = by.bounds[g], by.bounds[g + 1]
        finite = ordered[low:high] if all_sane else ordered[low:high][ordered_sane[low:high]]
        if finite.size == 0:
            continue
        # in the group's own order, as `_add_numbers` sums them (a sum depends on the order)
        window.count += int(finite.size)
        window.total += float(finite.sum())
        window.total_sq += float(np.dot(finite, finite))
        ascending = np.sort(finite)
        window.min = min(window.min, float(ascending[0]))
        window.max = max(window.max, float(ascending[-1]))
        if binned:
            groups.append(g)
            parts.append(ascending)
        else:
            window.unbinned += int(finite.size)
    if not parts:
        return
    values = np.concatenate(parts) if len(parts) > 1 else parts[0]
    group_of = np.repeat(np.asarray(groups, dtype=np.intp), [part.size for part in parts])
    assert isinstance(profile, NumericProfile)  # only a binned (numeric) feature has parts
    below = np.bincount(group_of[values < profile.min], minlength=by.count).tolist()
    above = np.bincount(group_of[values > profile.max], minlength=by.count).tolist()
    counts, sums = _fine_bins(profile.edges, values, group_of, by.count)
    for g in groups:
        window = windows[g]
        if window.counts is None:
            window.counts, window.sums = counts[g].astype(np.int64), sums[g].copy()
        else:
            window.counts += counts[g]
            window.sums += sums[g]
        window.below_min += below[g]
        window.above_max += above[g]


def _fine_bins(edges: np.ndarray, values: np.ndarray, groups: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, counts and sums of `values` (ascending within each group, groups in increasing order) in the
    fine bins, as `feature._fine_bin_counts` gives them.

    A value's bin is the number of edges at or below it; each (group, bin)'s values are
    summed in ascending order, the order `_fine_bin_counts` sums them in.
    """
    width = edges.size + 1
    key = groups * width + np.searchsorted(edges, values, side="right")  # non-decreasing
    counts = np.bincount(key, minlength=count * width).reshape(count, width)
    sums = np.zeros(count * width)
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    sums[key[starts]] = np.add.reduceat(values, starts)
    return counts, sums.reshape(count, width)


def _add_strings(windows: dict[int, FeatureWindow], column: np.ndarray, by: _Groups,
                 known: Container[str] = ()) -> None:
    """`FeatureWindow._add_categories` for each group's rows of a column of strings and nulls, counted at once."""
    codes, distinct = pd.factorize(column)  # nulls: -1
    null = codes < 0
    nulls = by.per_group(null)
    keys = [category_key(value) for value in distinct.tolist()]
    width = len(keys)
    pairs = np.bincount(by.codes[~null] * width + codes[~null], minlength=by.count * width).reshape(by.count, width)
    for g, window in windows.items():
        window.nulls += nulls[g]
        categories = window.categories
        for code in np.flatnonzero(pairs[g]).tolist():
            key = keys[code]
            categories[key] = categories.get(key, 0) + int(pairs[g, code])
        if len(categories) > defaults.CATEGORY_MAX_DISTINCT:
            window.categories = _capped(categories, known)
