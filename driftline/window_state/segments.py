"""Per-segment sub-summaries of a window state: one `WindowState` per (column, value), bounded.

A window state with segment columns keeps, per column, a sub-state (no sample, no
segments of its own) per value key (`driftline.segments.segment_key`). At most
`track` values per column are tracked; a value first seen once `track` are is folded
into the "other" key as it arrives, and a merge keeps the `track` largest by events
(ties: the smaller key) and folds the rest into "other". Every event is counted once
per column, so a state's segments always add up to the events that reached it; while
a column has at most `track` values everywhere, merging is exact (associative and
commutative) like the rest of the state. `top_segments` picks the evaluated segments.
Joined labels are folded into the sub-state of their prediction's value (`fold_labels`),
under the same bound, from the segment values the prediction was stored with.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from driftline.segments import NULL_KEY, OTHER_KEY, segment_key
from driftline.window_state.batch import EventBatch
from driftline.window_state.grouped import fold_groups

if TYPE_CHECKING:
    from driftline.window_state.state import WindowState

Segments = dict[str, "WindowState"]  # value key -> sub-state


def column_keys(batch: EventBatch, column: str) -> np.ndarray:
    """Each event's segment key for `column`: the feature of that name, else the tag, else null."""
    values = batch.features.get(column)
    if values is None:
        values = batch.tag_column(column)
    if values is None:
        return np.full(batch.n, NULL_KEY, dtype=object)
    if values.dtype == np.float64:
        keys = np.full(batch.n, NULL_KEY, dtype=object)
        present = ~np.isnan(values)
        if present.any():
            distinct, inverse = np.unique(values[present], return_inverse=True)
            keys[present] = np.array([segment_key(v) for v in distinct.tolist()], dtype=object)[inverse]
        return keys
    if infer_dtype(values, skipna=True) == "string":  # strings and nulls: each distinct value keyed once
        codes, distinct = pd.factorize(values)
        keys = np.array([segment_key(v) for v in distinct.tolist()] + [NULL_KEY], dtype=object)
        return keys[codes]  # a null's code, -1, picks NULL_KEY
    cache: dict[object, str] = {}
    out = np.empty(batch.n, dtype=object)
    for i, value in enumerate(values.tolist()):
        try:
            key = cache.get(value)
            if key is None:
                key = cache[value] = segment_key(value)
        except TypeError:  # a list or an object as the value: unhashable, keyed as it is
            key = segment_key(value)
        out[i] = key
    return out


def _targets(segments: Segments, distinct: Sequence[object], counts: np.ndarray, track: int) -> np.ndarray:
    """The sub-state key of each distinct value: its own while fewer than `track` are tracked, else "other"."""
    tracked = sum(1 for key in segments if key != OTHER_KEY)
    target = np.empty(len(distinct), dtype=object)
    # new values in order of their share of this batch, largest first (ties: the smaller key)
    for code in sorted(range(len(distinct)), key=lambda c: (-int(counts[c]), str(distinct[c]))):
        key = str(distinct[code])
        if key == OTHER_KEY or key in segments:
            target[code] = key
        elif tracked < track:
            target[code] = key
            tracked += 1
        else:
            target[code] = OTHER_KEY
    return target


def fold_batch(segments: Segments, batch: EventBatch, keys: np.ndarray, track: int,
               new_state: Callable[[], "WindowState"]) -> None:
    """Fold each event into its value's sub-state; values beyond `track` into "other"."""
    codes, distinct = pd.factorize(keys)
    counts = np.bincount(codes, minlength=len(distinct))
    target = _targets(segments, distinct, counts, track)
    kept = list(dict.fromkeys(target.tolist()))
    states = []
    for key in kept:
        state = segments.get(key)
        if state is None:
            state = segments[key] = new_state()
        states.append(state)
    if len(states) == 1:
        states[0].add_batch(batch)
    else:  # every value's rows in one pass (see driftline.window_state.grouped)
        position = {key: i for i, key in enumerate(kept)}
        fold_groups(states, batch, np.array([position[key] for key in target.tolist()], dtype=np.intp)[codes])


def fold_labels(segments: Segments, keys: Sequence[str | None], predictions: Sequence[Any], labels: Sequence[Any],
                task: str | None, track: int, new_state: Callable[[], "WindowState"]) -> None:
    """Fold joined pairs into their prediction's value's sub-state (None: the prediction kept no value).

    Values beyond `track` go to "other", as events do. A sub-summary takes the whole window's
    `task`; a pair it still cannot count is left out of that segment only, counted as dropped.
    """
    present = [i for i, key in enumerate(keys) if key is not None]
    if not present:
        return
    codes, distinct = pd.factorize(np.array([str(keys[i]) for i in present], dtype=object))
    target = _targets(segments, distinct, np.bincount(codes, minlength=len(distinct)), track)
    rows = target[codes]
    for key in dict.fromkeys(target.tolist()):
        state = segments.get(key)
        if state is None:
            state = segments[key] = new_state()
        if state.labels.task is None:
            state.labels.task = task
        at = [present[j] for j in np.flatnonzero(rows == key).tolist()]
        try:
            state.labels.add([predictions[i] for i in at], [labels[i] for i in at])
        except (ValueError, TypeError):
            for i in at:
                try:
                    state.labels.add([predictions[i]], [labels[i]])
                except (ValueError, TypeError):
                    state.labels.dropped += 1


def merge(mine: Segments, theirs: Segments, track: int, empty: Callable[[], "WindowState"]) -> Segments:
    """Both sides' segments, value by value, bounded to `track` values plus "other"."""
    out: Segments = {}
    for key in dict.fromkeys([*mine, *theirs]):
        a, b = mine.get(key), theirs.get(key)
        out[key] = a.merge(b) if a is not None and b is not None else (a or b).merge(empty())
    return bound(out, track, empty)


def bound(segments: Segments, limit: int, empty: Callable[[], "WindowState"]) -> Segments:
    """The `limit` largest values by events (ties: the smaller key), the rest merged into "other"."""
    values = [key for key in segments if key != OTHER_KEY]
    if len(values) <= limit:
        return segments
    ranked = sorted(values, key=lambda key: (-segments[key].events, key))
    out = {key: segments[key] for key in ranked[:limit]}
    other = segments.get(OTHER_KEY) or empty()
    for key in ranked[limit:]:
        other = other.merge(segments[key])
    out[OTHER_KEY] = other
    return out


def top_segments(segments: Segments, max_values: int, empty: Callable[[], "WindowState"]) -> Segments:
    """The segments evaluated: the `max_values` largest by events, the rest as one "other"."""
    return bound(dict(segments), max_values, empty)
