"""`FeatureWindow`: what a window counted for one feature (or the prediction)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Container, Mapping

import numpy as np

from driftline import defaults
from driftline.baseline import CATEGORICAL, CategoricalProfile, NumericProfile, Profile, category_key, count_categories, stored_sum
from driftline.baseline.values import finite_or_none
from driftline.window_state.codec import small_uint
from driftline.window_state.columns import float_column


# The key under which a feature window counts the categories its baseline does not know beyond
# `defaults.CATEGORY_MAX_DISTINCT` of them: no baseline holds it, and the detectors read it as one unseen category.
OTHER_CATEGORY = "__driftline_other__"


_NUMBER_TYPES = (float, int)


@dataclass
class FeatureWindow:
    """What a window counted for one feature (or the prediction); see the module docstring.

    `rows` is the state's event count; ``nulls`` includes the ``absent`` events.
    """

    kind: str  # NUMERIC or CATEGORICAL (the baseline's, or inferred from the first values)
    absent: int = 0
    nulls: int = 0
    value_types: dict[str, int] = field(default_factory=dict)
    # numeric part
    count: int = 0  # finite numbers
    total: float = 0.0
    total_sq: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    nonfinite: int = 0  # +/-inf, and numbers of magnitude above defaults.VALUE_MAX_ABS (not folded into sums)
    below_min: int = 0  # below the training minimum (-inf included)
    above_max: int = 0  # above the training maximum (+inf included)
    counts: np.ndarray | None = None  # per baseline fine bin
    sums: np.ndarray | None = None  # sum of the values per fine bin
    unbinned: int = 0  # finite numbers counted without a baseline
    # categorical part
    categories: dict[str, int] = field(default_factory=dict)

    @property
    def binned(self) -> int:
        return int(self.counts.sum()) if self.counts is not None else 0

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def std(self) -> float | None:
        if not self.count:
            return None
        mean = self.total / self.count
        return math.sqrt(max(self.total_sq / self.count - mean * mean, 0.0))

    def add(self, column: np.ndarray, types: Mapping[str, int], absent: int, profile: Profile | None) -> None:
        self.absent += absent
        for kind, count in types.items():
            self.value_types[kind] = self.value_types.get(kind, 0) + count
        if self.kind == CATEGORICAL:
            self._add_categories(column, known_categories(profile))
        elif column.dtype == np.float64:
            self._add_numbers(column, profile)
        else:
            self._add_mixed(column, profile)

    def _add_categories(self, column: np.ndarray, known: Container[str] = ()) -> None:
        if column.dtype == np.float64:
            finite = column[~np.isnan(column)]
            self.nulls += column.size - finite.size
            values, counts = np.unique(finite, return_counts=True)
            for value, count in zip(values.tolist(), counts.tolist()):
                key = category_key(value)
                self.categories[key] = self.categories.get(key, 0) + count
        else:
            found, nulls, _ = count_categories(column)
            self.nulls += nulls
            for key, count in found.items():
                self.categories[key] = self.categories.get(key, 0) + count
        if len(self.categories) > defaults.CATEGORY_MAX_DISTINCT:
            self.categories = _capped(self.categories, known)

    def _add_mixed(self, column: np.ndarray, profile: Profile | None) -> None:
        # A numeric feature that received other types: numbers are counted, nulls
        # too, the rest only as value types (a type change).
        is_number = np.fromiter((type(v) in _NUMBER_TYPES for v in column), dtype=bool, count=column.size)
        is_null = np.fromiter((v is None for v in column), dtype=bool, count=column.size)
        self.nulls += int(is_null.sum())
        numbers = float_column(column[is_number].tolist())
        nan = np.isnan(numbers)
        self.nulls += int(nan.sum())
        self._add_numbers(numbers[~nan], profile)

    def _add_numbers(self, column: np.ndarray, profile: Profile | None) -> None:
        # NaN compares False, so this keeps only finite numbers of a magnitude whose squares sum safely.
        sane = np.abs(column) <= defaults.VALUE_MAX_ABS
        finite = column if sane.all() else column[sane]
        if finite.size != column.size:
            nan = np.isnan(column)
            self.nulls += int(nan.sum())
            outside = column[~(sane | nan)]
            self.nonfinite += int(outside.size)
            self.below_min += int((outside < 0).sum())
            self.above_max += int((outside > 0).sum())
        if finite.size == 0:
            return
        self.count += int(finite.size)
        self.total += float(finite.sum())
        self.total_sq += float(np.dot(finite, finite))
        self.min = min(self.min, float(finite.min()))
        self.max = max(self.max, float(finite.max()))
        if isinstance(profile, NumericProfile) and profile.count:
            if self.counts is None:
                self.counts = np.zeros(profile.edges.size + 1, dtype=np.int64)
                self.sums = np.zeros(profile.edges.size + 1, dtype=np.float64)
            counts, sums = _fine_bin_counts(profile.edges, finite)
            self.counts += counts
            self.sums += sums
            if self.min < profile.min:
                self.below_min += int((finite < profile.min).sum())
            if self.max > profile.max:
                self.above_max += int((finite > profile.max).sum())
        else:
            self.unbinned += int(finite.size)

    def add_missing(self, n: int) -> None:
        """`n` events lacked this feature altogether."""
        self.absent += n
        self.nulls += n

    def merged(self, other: "FeatureWindow", known: Container[str] = ()) -> "FeatureWindow":
        """Both windows' counts together; `known`: the baseline's categories, never pooled under OTHER_CATEGORY."""
        if self.counts is not None and other.counts is not None and self.counts.size != other.counts.size:
            raise ValueError("cannot merge feature windows binned on different baselines")
        counts = sums = None
        if self.counts is not None or other.counts is not None:
            size = (self.counts if self.counts is not None else other.counts).size
            counts = np.zeros(size, dtype=np.int64)
            sums = np.zeros(size, dtype=np.float64)
            for part in (self, other):
                if part.counts is not None:
                    counts += part.counts
                    sums += part.sums
        categories = dict(self.categories)
        for key, count in other.categories.items():
            categories[key] = categories.get(key, 0) + count
        categories = _capped(categories, known)
        types = dict(self.value_types)
        for key, count in other.value_types.items():
            types[key] = types.get(key, 0) + count
        # Kinds differ only for a feature the baseline does not know, inferred
        # differently by two collectors; categorical keeps the most information.
        kind = self.kind if self.kind == other.kind else CATEGORICAL
        return FeatureWindow(kind=kind, absent=self.absent + other.absent, nulls=self.nulls + other.nulls,
                             value_types=types, count=self.count + other.count, total=self.total + other.total,
                             total_sq=self.total_sq + other.total_sq, min=min(self.min, other.min),
                             max=max(self.max, other.max), nonfinite=self.nonfinite + other.nonfinite,
                             below_min=self.below_min + other.below_min, above_max=self.above_max + other.above_max,
                             counts=counts, sums=sums, unbinned=self.unbinned + other.unbinned, categories=categories)

    def _pack(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "absent": self.absent, "nulls": self.nulls,
                                "value_types": self.value_types}
        if self.count or self.nonfinite:
            data.update(count=self.count, total=self.total, total_sq=self.total_sq, min=finite_or_none(self.min),
                        max=finite_or_none(self.max), nonfinite=self.nonfinite, below_min=self.below_min,
                        above_max=self.above_max, unbinned=self.unbinned)
        if self.counts is not None:
            # float32 offsets from the window mean keep the per-bin sums to ~1e-7
            # of the spread (not of the magnitude), at half the bytes of float64.
            mean = self.total / self.count if self.count else 0.0
            data["counts"] = small_uint(self.counts)
            offsets = self.sums - self.counts * mean
            # Offsets beyond float32's range (values near VALUE_MAX_ABS) stay float64.
            small = np.abs(offsets).max(initial=0.0) < 1e38
            # + 0.0 turns float32's -0.0 (a tiny negative offset) into 0.0, so a decoded state encodes to the same bytes
            data["sum_offsets"] = (offsets.astype(np.float32) if small else offsets) + np.float32(0.0)
        if self.categories:
            data["categories"] = self.categories
        return data

    @classmethod
    def _unpack(cls, data: Mapping[str, Any]) -> "FeatureWindow":
        out = cls(kind=data["kind"], absent=int(data["absent"]), nulls=int(data["nulls"]),
                  value_types={str(k): int(v) for k, v in data["value_types"].items()},
                  categories={str(k): int(v) for k, v in data.get("categories", {}).items()})
        if "count" in data:
            out.count, out.total, out.total_sq = int(data["count"]), stored_sum(data["total"]), stored_sum(data["total_sq"])
            out.min = math.inf if data["min"] is None else float(data["min"])
            out.max = -math.inf if data["max"] is None else float(data["max"])
            for name in ("nonfinite", "below_min", "above_max", "unbinned"):
                setattr(out, name, int(data[name]))
        if "counts" in data:
            out.counts = np.asarray(data["counts"], dtype=np.int64)
            mean = out.total / out.count if out.count else 0.0
            out.sums = np.asarray(data["sum_offsets"], dtype=np.float64) + out.counts * mean
            if not np.isfinite(out.sums).all():  # an overflowed sum of an older version: unknown, read as zero
                out.sums = np.where(np.isfinite(out.sums), out.sums, 0.0)
        return out


def known_categories(profile: Profile | None) -> Container[str]:
    """The categories a window keeps counting by name however many others it meets: its baseline's."""
    return profile.counts if isinstance(profile, CategoricalProfile) else ()


def _capped(categories: dict[str, int], known: Container[str] = ()) -> dict[str, int]:
    """Every `known` category and at most `defaults.CATEGORY_MAX_DISTINCT` others, plus `OTHER_CATEGORY`, which
    takes the rest.

    The baseline's categories stay named so that OTHER_CATEGORY holds only categories the baseline never saw
    (pooling baseline categories there would read them as unseen, and a feature with more categories than the
    bound would drift in every window). Of the others the most frequent are kept (ties: the smaller key), so the
    result does not depend on the order the counts were added in.
    """
    other = categories.get(OTHER_CATEGORY, 0)
    new = [(count, key) for key, count in categories.items() if key != OTHER_CATEGORY and key not in known]
    if len(new) <= defaults.CATEGORY_MAX_DISTINCT:
        return categories
    new.sort(key=lambda item: (-item[0], item[1]))
    kept = {key: count for key, count in categories.items() if key != OTHER_CATEGORY and key in known}
    kept.update((key, count) for count, key in new[:defaults.CATEGORY_MAX_DISTINCT])
    kept[OTHER_CATEGORY] = other + sum(count for count, _ in new[defaults.CATEGORY_MAX_DISTINCT:])
    return kept


def _fine_bin_counts(edges: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts and sums of `values` in the bins (-inf, e_0), [e_0, e_1), ..., [e_last, inf).

    Sorting the values once and cutting them at the edges is faster than one
    binary search per value (measured: about 20 % for 1000 edges).
    """
    ordered = np.sort(values)
    starts = np.concatenate(([0], np.searchsorted(ordered, edges, side="left")))
    counts = np.diff(np.append(starts, ordered.size))
    sums = np.zeros(counts.size)
    filled = counts > 0
    # Starts of the non-empty bins strictly increase, so each reduceat segment is one bin.
    sums[filled] = np.add.reduceat(ordered, starts[filled])
    return counts, sums
