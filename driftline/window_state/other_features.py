"""Feature names beyond a window's bound, counted together under one "other" entry.

Every feature name gets a `FeatureWindow`, a data-quality result and possibly an alert, so a
producer that logs request-derived dicts (a new key per event) made the cost of a window grow
with the names it met: 1 000 events of 50 unique names each wrote 50 000 results. Two bounds:

* a batch (`EventBatch`) makes columns only of names carried by more than one of its events
  (all names, for a batch of one event), at most `columns.MAX_COLUMNS` by how many events carry them;
  the other values stay `SparseFeatures`, one entry per (event, name), at constant cost;
* a window state keeps its own `FeatureWindow` for at most `defaults.WINDOW_MAX_NEW_FEATURES`
  names not in the baseline (every name without one), first come first served within a
  state; the values of any other name go to `OTHER_FEATURES`, a categorical window whose
  categories are the names (each: how many non-null values it had; the first
  `WINDOW_MAX_NEW_FEATURES` names met are listed, later ones share `OTHER_CATEGORY`) and whose
  ``absent`` counts the events without a non-null value of any of them.

Merging: two partial states (two collectors, or partitions) may each have admitted different
names up to the bound; the merge keeps the names with the most values (ties: the smaller
name, so the merge is commutative) and moves the rest into "other". The share of events
carrying an "other" name is then at least the larger of the two parts' shares (events of a
moved name may overlap those already counted), so "other" is a lower bound after a merge and
exact within one collector's state. Counts of values and names are exact.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline import CATEGORICAL, Profile, category_key
from driftline.window_state.feature import OTHER_CATEGORY, FeatureWindow, _capped

# The entry that counts the names beyond the bound: no baseline holds it, and an event's own
# feature of this name is counted there too (it cannot pose as the summary).
OTHER_FEATURES = "__driftline_other_features__"

# Names "other" lists one by one as a state counts them (the first met; the rest share
# OTHER_CATEGORY): enough to see what flooded, without sorting the flood at every batch.
_LISTED = defaults.WINDOW_MAX_NEW_FEATURES

_TYPE_NAMES = {float: "number", int: "number", str: "string", bool: "boolean"}


@dataclass
class SparseFeatures:
    """Non-null feature values a batch made no column of: one entry per (event, name), as three arrays."""

    rows: np.ndarray  # int64 positions in the batch
    names: np.ndarray  # object: the feature names
    types: np.ndarray  # object: JSON type names

    @classmethod
    def gather(cls, records: list[Mapping[str, Any]], names: set[str]) -> "SparseFeatures | None":
        """The non-null values of `names` in `records` (None: there are none)."""
        rows, found, types = [], [], []
        for row, record in enumerate(records):
            for name in names.intersection(record):
                value = record[name]
                if value is not None:
                    rows.append(row)
                    found.append(name)
                    types.append(_TYPE_NAMES.get(type(value), "other"))
        if not rows:
            return None
        return cls(np.array(rows, dtype=np.int64), np.array(found, dtype=object), np.array(types, dtype=object))

    def take(self, index: np.ndarray, n: int) -> "SparseFeatures | None":
        """The entries of the events at `index` (a batch of `n` events cut to those), renumbered."""
        position = np.full(n, -1, dtype=np.int64)
        position[index] = np.arange(index.size)
        moved = position[self.rows]
        keep = moved >= 0
        if not keep.any():
            return None
        return SparseFeatures(moved[keep], self.names[keep], self.types[keep])


def new_feature_room(features: Iterable[str], profiles: Mapping[str, Profile]) -> int:
    """How many more names outside the baseline a state with `features` may count apart."""
    taken = sum(1 for name in features if name not in profiles and name != OTHER_FEATURES)
    return defaults.WINDOW_MAX_NEW_FEATURES - taken


def overflow(columns: Mapping[str, np.ndarray], names: list[str], sparse: SparseFeatures | None,
             n: int) -> tuple[int, Counter, Counter]:
    """Of `n` events: how many carry a non-null value of the `names` columns or of `sparse`, and the
    non-null values per name and per JSON type."""
    carried = np.zeros(n, dtype=bool)
    per_name: Counter = Counter()
    per_type: Counter = Counter()
    for name in names:
        column = columns[name]
        if column.dtype == np.float64:
            has = ~np.isnan(column)
            kinds = {"number": int(has.sum())}
        else:
            has = ~pd.isna(column)
            kinds = Counter(_TYPE_NAMES.get(type(v), "other") for v in column[has].tolist())
        carried |= has
        per_name[_key(name)] += int(has.sum())
        per_type.update(kinds)
    if sparse is not None and sparse.rows.size:
        carried[sparse.rows] = True
        per_name.update(map(_key, sparse.names.tolist()))
        per_type.update(sparse.types.tolist())
    return int(carried.sum()), per_name, per_type


def _key(name: str) -> str:
    """A name as a category key (`category_key` of a string, without its checks of other types)."""
    return name if len(name) <= defaults.CATEGORY_MAX_CHARS else category_key(name)


def fold_other(features: dict[str, FeatureWindow], n: int, carried: int, per_name: Mapping[str, int],
               per_type: Mapping[str, int]) -> None:
    """Count `n` events into the "other" entry, `carried` of them with values of the names in `per_name`."""
    window = features.get(OTHER_FEATURES)
    if window is None:
        window = features[OTHER_FEATURES] = FeatureWindow(kind=CATEGORICAL)
    window.add_missing(n - carried)
    for kind, count in per_type.items():
        window.value_types[kind] = window.value_types.get(kind, 0) + count
    categories = window.categories
    beyond = 0
    for name, count in per_name.items():  # the first names met are listed, the rest counted together (no sort)
        if name in categories or len(categories) < _LISTED:
            categories[name] = categories.get(name, 0) + count
        else:
            beyond += count
    if beyond:
        categories[OTHER_CATEGORY] = categories.get(OTHER_CATEGORY, 0) + beyond
    if len(categories) > defaults.CATEGORY_MAX_DISTINCT + 1:  # after merges: as any category count
        window.categories = _capped(categories)


def cap_new_features(features: dict[str, FeatureWindow], profiles: Mapping[str, Profile], events: int) -> None:
    """After a merge: keep the names outside the baseline with the most values, move the rest into "other"."""
    new = [name for name in features if name not in profiles and name != OTHER_FEATURES]
    if len(new) <= defaults.WINDOW_MAX_NEW_FEATURES:
        return
    ranked = sorted(new, key=lambda name: (-(events - features[name].nulls), name))
    other = features.get(OTHER_FEATURES) or FeatureWindow(kind=CATEGORICAL, absent=events, nulls=events)
    carried = events - other.absent
    per_name: Counter = Counter()
    per_type: Counter = Counter()
    for name in ranked[defaults.WINDOW_MAX_NEW_FEATURES:]:
        window = features.pop(name)
        values = events - window.nulls
        carried = max(carried, values)  # a lower bound: the events of two names may be the same ones
        per_name[_key(name)] += values
        per_type.update(window.value_types)
    other.absent = other.nulls = 0
    features[OTHER_FEATURES] = other
    fold_other(features, events, carried, per_name, per_type)
