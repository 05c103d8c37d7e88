"""One table of value bounds for every numeric field an event can carry (docs/contract.md, "Value bounds").

`INFERENCE_BOUNDS` maps each numeric field of the inference event, as a JSON path (``*``: any name of an
object, ``[]``: any item of a list), to its `Bound`; `LABEL_BOUNDS` does the same for the label event, and
`SIZE_BOUNDS` holds the counts (names per object, a vector's dimension). Every decoding path reads its limits
here: `driftline.events` (the collector's per-event path and the receiver), `driftline.embeddings.contract`
(vectors) and the collector's columnar decoder (`driftline.collector.event_columns`), so they cannot differ.

A bound is one of two kinds:

* `REFUSE`: a value outside is no measurement but a bug or a forgery (a response stamped in the year 9999, a
  vector of 1e308): the event is dead-lettered with a reason naming the field and the bound;
* `COUNT`: the value is the model's own data, which monitoring must show rather than hide (a feature of
  1e200 is a data-quality finding): the event is kept and the value is counted out of range in its window,
  never entering its sums (`driftline.window_state.feature`, `driftline.baseline.labels`).

tests/core/test_value_bounds.py walks the shipped JSON schemas and fails on a numeric field without an entry
here, or whose schema range is not its `REFUSE` bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftline import defaults

REFUSE = "dead-lettered"
COUNT = "counted out of range"

# Event times outside these years are almost certainly unit mistakes (seconds vs ms).
MIN_TS_MS = 946_684_800_000  # 2000-01-01
MAX_TS_MS = 4_102_444_800_000  # 2100-01-01


def _number(value: float) -> str:
    """A bound as the reason shows it: whole numbers in full (86400000), others as %g (1e+50)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


@dataclass(frozen=True)
class Bound:
    """The values a numeric field may hold: `low` .. `high` (`high_open`: `high` itself is outside)."""

    low: float
    high: float
    beyond: str  # REFUSE or COUNT: what becomes of a value outside
    why: str  # one line, shown in docs/contract.md and in a refusal's reason
    unit: str = ""
    integer: bool = False  # a JSON integer literal is required (`2`, not `2.0`)
    high_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether a number (not NaN) is inside."""
        return self.low <= value and (value < self.high if self.high_open else value <= self.high)

    @property
    def text(self) -> str:
        """The range in words: "0 .. 86400000 ms", "946684800000 .. 4102444800000 (exclusive) ms"."""
        return (f"{_number(self.low)} .. {_number(self.high)}{' (exclusive)' if self.high_open else ''}"
                f"{' ' + self.unit if self.unit else ''}")

    def refusal(self, value: Any) -> str:
        """A dead letter's reason: the value, the bound and why."""
        return f"{str(value)[:32]} is outside {self.text} ({self.why})"


_VALUE = (-defaults.VALUE_MAX_ABS, defaults.VALUE_MAX_ABS)
_SQUARES = "its square would overflow a window's sums"
_TIMES = Bound(MIN_TS_MS, MAX_TS_MS, REFUSE, "epoch ms within 2000-2100: epoch seconds or nanoseconds fall outside",
               "ms", high_open=True)

# path -> bound, for every numeric field of driftline/schemas/inference.v1.json (nested ones too).
INFERENCE_BOUNDS: dict[str, Bound] = {
    "ts": _TIMES,
    "features.*": Bound(*_VALUE, COUNT, f"a model input: counted as a data-quality finding; {_SQUARES}"),
    "inputs.*": Bound(*_VALUE, COUNT, f"the raw request, as features; {_SQUARES}"),
    "prediction": Bound(*_VALUE, COUNT, f"the model's output: counted as a data-quality finding; {_SQUARES}"),
    "prediction[]": Bound(*_VALUE, COUNT, "a class probability: the score read from them is a prediction"),
    "predicted_class": Bound(*_VALUE, COUNT, "the model's decision: a number other than 0 or 1 is no binary "
                             "decision, so its row is decided by the score's threshold; never summed"),
    "latency_ms.*": Bound(0, defaults.LATENCY_PART_MAX_MS, REFUSE,
                          "no request is served for a day: a larger part is a forged or mis-unit time", "ms"),
    "tokens_in": Bound(0, defaults.TOKENS_MAX, REFUSE, "beyond any context window served today", "tokens",
                       integer=True),
    "tokens_out": Bound(0, defaults.TOKENS_MAX, REFUSE, "beyond any context window served today", "tokens",
                        integer=True),
    "batch_size": Bound(1, defaults.EVENT_BATCH_SIZE_MAX, REFUSE,
                        "requests per forward pass: more than a million is a bug, not a batch", integer=True),
    "feature_ts.*": _TIMES,
    "feature_age_ms.*": Bound(0, MAX_TS_MS - MIN_TS_MS, REFUSE,
                              "the oldest age feature_ts can express (2000-2100): a larger one is a unit mistake",
                              "ms"),
    "embeddings.*[]": Bound(*_VALUE, REFUSE, f"bounded as feature values are; {_SQUARES}"),
}

# path -> bound, for every numeric field of driftline/schemas/label.v1.json.
LABEL_BOUNDS: dict[str, Bound] = {
    "ts": _TIMES,
    "label": Bound(*_VALUE, COUNT, f"the true outcome: counted out of range, as a prediction; {_SQUARES}"),
}

# path -> (most names or items, why): the counts an event's objects and lists may hold.
SIZE_BOUNDS: dict[str, tuple[int, str]] = {
    "features": (defaults.EVENT_MAX_FEATURES, "each name becomes a feature window"),
    "feature_ts": (defaults.EVENT_MAX_FEATURES, "as features; names the event's features lack are not counted"),
    "feature_age_ms": (defaults.EVENT_MAX_FEATURES, "as features; names the event's features lack are not counted"),
    "embeddings": (defaults.EMBEDDING_MAX_NAMES, "each name becomes a summary in every window"),
    "embeddings.*": (defaults.EMBEDDING_MAX_DIMENSION, "the dimension: every common encoder fits"),
}


def bound(path: str) -> Bound:
    """The inference event's bound of `path` (KeyError: the field has none, which a test forbids)."""
    return INFERENCE_BOUNDS[path]
