"""From statistics to verdicts: thresholds and the decision rule, kept apart from the statistics.

A statistic (`driftline.detectors.stats.two_sample`) never decides anything; a `DriftThresholds`
object holds the alarm levels (defaults in `driftline.defaults`, overridable per
model and per feature); `decide_feature` applies the one documented rule:

A feature **drifts** when all of these hold:

1. *enough data*: at least ``min_rows`` rows in the window and in the reference,
   otherwise the verdict is "insufficient data" (never drift);
2. *significant*: its test's p-value (`significance_p_value`: KS for numeric
   features; for categorical ones the smaller of two p-values, each over its share of the level
   (weighted Bonferroni within the feature, ``UNSEEN_TEST_WEIGHT`` to the second):
   the two-sample chi-square with categories the window expects fewer than
   ``CHI2_MIN_EXPECTED`` times pooled, `two_sample.chi2_pooled`, and the test of the window's
   rows on categories the reference never saw, `unseen_categories.unseen_test`, which counts only
   when that share is over ``UNSEEN_CATEGORY_SHARE_MAX``), corrected by Benjamini-Hochberg
   across the window's features, is below ``alpha``;
3. *large enough*: at least one effect size clears its floor: PSI ≥ ``psi``,
   normalised Wasserstein ≥ ``wasserstein`` (numeric) or Jensen-Shannon ≥
   ``jensenshannon``, or any other effect size of the registry that is on for the feature
   (`driftline.detectors.stats.registry`: at least its ``[drift]`` level), or (categorical) the share of rows on
   categories the reference never saw is over ``UNSEEN_CATEGORY_SHARE_MAX`` (the data-quality check's level). With fixed floors, the Wasserstein
   distance, and a categorical feature's PSI and Jensen-Shannon distance, are judged beyond their sampling level at
   the window's size (their ``noise``, `driftline.detectors.stats.noise`; `beyond_noise`): the floor is a size of
   drift, and at 500 rows noise alone reaches the Wasserstein floor in about one window in a hundred, while over
   300 categories it reads a Jensen-Shannon distance of 0.21 at 1 000 rows. Reference-derived floors
   already hold that noise, so the raw distance meets them.

or, separately, when its missing rate changed by at least
``missing_rate_delta`` with a (corrected) significant two-proportion test.

The dataset drifts when the share of drifted features is at least
``dataset_drift_share``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Mapping, TypeAlias

import numpy as np
from pydantic import Field

from pydantic import create_model

from driftline import defaults
from driftline.detectors.stats import registry
from driftline.toml_sections import Table, as_written, by_name, given, parse_section
from driftline.vocabulary import CATEGORICAL, CHI2, INSUFFICIENT_DATA_REASON, KS

__all__ = [
    "DriftThresholds",
    "beyond_noise",
    "clears_floor",
    "floor_margin",
    "THRESHOLD_SOURCES",
    "annotate_tests",
    "benjamini_hochberg",
    "correct_window",
    "decide_dataset",
    "decide_feature",
    "judge_feature",
    "drop_unused",
    "effects",
    "significance_p_value",
    "significance_test",
    "set_unseen_floor",
    "unseen_clears_floor",
    "unseen_p_value",
]

# Where effect-size thresholds come from: the fixed values, or each feature's spread over reference chunks.
THRESHOLD_SOURCES = ("fixed", "reference")


_NotNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _DriftLevels(Table):
    """Alarm levels of the drift decision rule (see the module docstring), the ``[drift]`` table.

    Every field defaults to `driftline.defaults`, where each value's reason is
    written down; a registered statistic off by default (`registry.STATISTICS`) adds its key,
    None until set. ``features`` maps a feature name to overrides of any level (bounded as
    the levels are, so a feature's override is checked when the file is read); `for_feature` applies them.

    >>> t = DriftThresholds.from_mapping({"psi": 0.25, "features": {"age": {"wasserstein": 0.3}}})
    >>> t.for_feature("age").wasserstein, t.for_feature("age").psi, t.for_feature("income").wasserstein
    (0.3, 0.25, 0.1)
    """

    WHERE = "[drift]"

    alpha: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = defaults.DRIFT_ALPHA
    psi: _NotNegative = defaults.PSI_THRESHOLD
    wasserstein: _NotNegative = defaults.WASSERSTEIN_THRESHOLD
    jensenshannon: _NotNegative = defaults.JENSENSHANNON_THRESHOLD
    linf: _NotNegative = defaults.LINF_THRESHOLD
    missing_rate_delta: _NotNegative = defaults.MISSING_RATE_DELTA
    min_rows: Annotated[int, Field(ge=0)] = defaults.DRIFT_MIN_ROWS
    dataset_drift_share: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = defaults.DATASET_DRIFT_SHARE
    # the share of a window's rows on never-seen categories over which the unseen-category test counts
    unseen_share: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = defaults.UNSEEN_CATEGORY_SHARE_MAX
    # the TOML key is `thresholds`
    threshold_source: Literal["fixed", "reference"] = defaults.DRIFT_THRESHOLD_SOURCE  # type: ignore[assignment]
    features: dict[str, DriftValues] = {}

    def threshold(self, key: str) -> float | None:
        """The floor of registered statistic `key` (None: the statistic is off)."""
        value = getattr(self, key, None)
        return None if value is None else float(value)

    def for_feature(self, name: str) -> "DriftThresholds":
        """These thresholds with feature `name`'s overrides applied (and no per-feature table)."""
        if not self.features:  # nothing to apply (the common case, once per feature and window)
            return self
        return self.replace(features={}, **self.feature_overrides(name))  # type: ignore[return-value]

    def feature_overrides(self, name: str) -> dict[str, Any]:
        """The levels feature `name`'s own table sets ({} when none)."""
        overrides = self.features.get(name)
        return given(overrides) if overrides is not None else {}

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "DriftThresholds":
        """Thresholds from a ``[drift]`` TOML section (or any dict).

        Layout: top-level keys are field names; ``[drift.features.NAME]`` holds a
        feature's overrides; ``[drift.models.MODEL]`` holds a model's overrides
        (with its own ``features`` table), which win over the top level when
        `model` is given. ``thresholds = "fixed" | "reference"`` (top level or per
        model) becomes `threshold_source`. Unknown keys are a `UserError` naming them.
        """
        section = parse_section(DriftSection, mapping, cls.WHERE)
        values = given(section)
        values.pop("models", None)
        features = {name: given(o) for name, o in values.pop("features", {}).items()}
        model_section = section.models.get(model) if model is not None else None
        if model_section is not None:
            overrides = given(model_section)
            for name, o in overrides.pop("features", {}).items():
                features[name] = {**features.get(name, {}), **given(o)}
            values.update(overrides)
        if "thresholds" in values:
            values["threshold_source"] = values.pop("thresholds")
        return cls(**values, features=features)


# The registry's statistics that are off until configured: a level each, None (off) by default.
if TYPE_CHECKING:
    DriftThresholds: TypeAlias = _DriftLevels
else:
    DriftThresholds = create_model(
        "DriftThresholds", __base__=_DriftLevels, __module__=__name__, __doc__=_DriftLevels.__doc__,
        **{s.toml_key: (_NotNegative | None, None) for s in registry.STATISTICS.values()
           if s.optional and s.toml_key not in _DriftLevels.model_fields})

# One feature's overrides ([drift.features.NAME]): any level, as written; a model's table ([drift.models.MODEL]) and
# the whole [drift] table as written, where the threshold source is the key `thresholds`.
if TYPE_CHECKING:  # built at run time from DriftThresholds' fields
    DriftValues: TypeAlias = Any
else:
    DriftValues = as_written(DriftThresholds, "DriftValues", exclude=("threshold_source", "features"))
DriftThresholds.model_rebuild()
_SOURCE = (Literal["fixed", "reference"] | None, None)
DriftModelSection = as_written(DriftThresholds, "DriftModelSection", exclude=("threshold_source",), thresholds=_SOURCE)
DriftSection = as_written(DriftThresholds, "DriftSection", exclude=("threshold_source",), thresholds=_SOURCE,
                          models=by_name(DriftModelSection))


def benjamini_hochberg(p_values: Any, alpha: float = defaults.DRIFT_ALPHA) -> tuple[np.ndarray, np.ndarray]:
    r"""Benjamini-Hochberg step-up correction: ``(rejected, adjusted_p_values)``.

    With the m p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`, the
    adjusted values are

    .. math::  \tilde p_{(i)} = \min_{j \ge i} \min\!\left(1, \frac{m}{j} p_{(j)}\right)

    and hypothesis *i* is rejected when :math:`\tilde p_i \le \alpha`; this keeps
    the expected share of false discoveries at or below alpha (for independent or
    positively dependent tests). Computed as ``scipy.stats.false_discovery_control`` computes it.
    NaN p-values count as 1 (never rejected). Empty input gives empty arrays.

    Reference: Benjamini, Y. and Hochberg, Y., "Controlling the False Discovery
    Rate", JRSS B 57 (1995).
    """
    p = np.asarray(p_values, dtype=np.float64).ravel()
    if p.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.float64)
    p = np.where(np.isfinite(p), np.clip(p, 0.0, 1.0), 1.0)
    adjusted = _bh_adjusted(p)
    return adjusted <= alpha, adjusted


def _bh_adjusted(p: np.ndarray) -> np.ndarray:
    """``scipy.stats.false_discovery_control(p, method="bh")`` (scipy 1.17), step for step, without
    importing scipy.stats (a second per `detect` run)."""
    if p.size <= 1:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    ranked = ranked * (p.size / np.arange(1, p.size + 1, dtype=np.float64))
    np.minimum.accumulate(ranked[::-1], out=ranked[::-1])
    adjusted = np.empty_like(ranked)
    adjusted[order] = ranked
    return np.clip(adjusted, 0.0, 1.0)


def significance_test(kind: str) -> str:
    """The name of the test whose p-value goes into the BH family for a feature of `kind`."""
    return CHI2 if kind == CATEGORICAL else KS


def significance_p_value(test: Mapping[str, Any]) -> float:
    """The raw p-value a test is judged by: the pooled chi-square's (``p_value_pooled``) where it was measured,
    else the test's ``p_value``; with the test of unseen categories beside it (``unseen``), the smaller of the
    two each divided by its share of the level, a weighted Bonferroni within the feature: ``min(1, p_pooled /
    (1 - w), p_unseen / w)``, w = ``UNSEEN_TEST_WEIGHT``, the unseen test's counting only when its share is over
    ``UNSEEN_CATEGORY_SHARE_MAX`` (`unseen_p_value`).

    A categorical feature's ``p_value`` is Pearson's goodness of fit against the reference's shares, as
    Evidently computes it; with hundreds of sparse categories it comes out below 0.05 in a third to a half of
    unchanged windows, so the rule judges the pooled two-sample test instead (valid there). The pool dilutes a
    new category (5 % of a 100-row window: flagged 19 % of the time by the pooled test alone), so the share of
    rows on categories the reference never saw is tested apart. Results stored without these values fall back
    to ``p_value``.

    >>> significance_p_value({"p_value": 0.001, "p_value_pooled": 0.4}), significance_p_value({"p_value": 0.2})
    (0.4, 0.2)
    >>> f'{significance_p_value({"p_value_pooled": 0.4, "unseen": {"share": 0.05, "p_value": 1e-6}}):.2g}'
    '1e-05'
    >>> round(significance_p_value({"p_value_pooled": 0.4, "unseen": {"share": 0.001, "p_value": 1e-6}}), 3)  # floor
    0.444
    """
    pooled = float(test.get("p_value_pooled", test.get("p_value", 1.0)))
    unseen = test.get("unseen")
    if unseen is None:
        return pooled
    weight = defaults.UNSEEN_TEST_WEIGHT
    return min(1.0, pooled / (1.0 - weight), unseen_p_value(unseen) / weight)


def unseen_p_value(unseen: Mapping[str, Any]) -> float:
    """The unseen-category test's p-value as the rule counts it: its ``p_value`` when its ``share`` is over
    ``UNSEEN_CATEGORY_SHARE_MAX`` (a size of drift, as every effect floor), else 1 (one unseen row in 1 000 is
    no drift however rare unseen categories were in the reference)."""
    return float(unseen["p_value"]) if unseen_clears_floor(unseen) else 1.0


def unseen_clears_floor(unseen: Mapping[str, Any]) -> bool:
    """Whether the share of a window's rows on categories the reference never saw is over its ``floor``
    (`set_unseen_floor`; ``UNSEEN_CATEGORY_SHARE_MAX`` when none is recorded)."""
    return float(unseen["share"]) > _unseen_floor(unseen)


def set_unseen_floor(tests: Mapping[str, Any], thresholds: DriftThresholds) -> None:
    """Record the feature's unseen-share floor (``[drift] unseen_share``) in its unseen-category test, in place,
    before its p-value is read: the floor decides whether that test counts."""
    unseen = tests.get(CHI2, {}).get("unseen")
    if isinstance(unseen, dict):
        unseen["floor"] = thresholds.unseen_share


def _unseen_floor(unseen: Mapping[str, Any]) -> float:
    return float(unseen.get("floor", defaults.UNSEEN_CATEGORY_SHARE_MAX))


def _p(test: Mapping[str, Any]) -> float:
    return float(test["p_value_adjusted"]) if "p_value_adjusted" in test else significance_p_value(test)


def beyond_noise(name: str, value: float, noise: float) -> float:
    """A distance's size beyond its sampling level, by the registered statistic's ``noise`` rule: the
    Jensen-Shannon distance's square is additive (a drift's divergence plus the noise's), so its noise is removed
    in quadrature; PSI, itself a divergence, and the Wasserstein distance (a guard: noise alone reaches its floor at
    small windows) lose the whole noise.

    >>> round(beyond_noise("jensenshannon", 0.25, 0.22), 3), round(beyond_noise("psi", 0.5, 0.38), 2)
    (0.119, 0.12)
    """
    found = registry.statistic(name)
    if found is None:
        return value - noise
    return found.beyond_noise(value, noise)


def _derived(name: str, threshold_source: str) -> bool:
    """Whether statistic `name`'s floor came from the reference's spread, which holds its sampling noise already."""
    found = registry.statistic(name)
    return threshold_source == THRESHOLD_SOURCES[1] and (found is None or found.derived)


def floor_margin(name: str, test: Mapping[str, Any], floor: float, threshold_source: str = "fixed") -> float:
    """Distance `name` over its floor (1: at the floor): its value, beyond its sampling ``noise`` (`beyond_noise`)
    when the floor is fixed."""
    value = float(test["value"])
    if not _derived(name, threshold_source):
        value = beyond_noise(name, value, float(test.get("noise") or 0.0))
    if floor > 0:
        return value / floor
    return math.inf if value >= 0 else 0.0


def clears_floor(name: str, test: Mapping[str, Any], floor: float, threshold_source: str = "fixed") -> bool:
    """Whether distance `name` clears its floor (`floor_margin` at least 1)."""
    return floor_margin(name, test, floor, threshold_source) >= 1.0


def annotate_tests(tests: dict[str, dict[str, Any]], kind: str, thresholds: DriftThresholds) -> dict[str, dict[str, Any]]:
    """Add each test's own ``threshold`` and ``drift`` flag (in place; also returned).

    Distances flag at ``value >= threshold``; p-value tests at (BH-adjusted)
    `significance_p_value` ``< alpha``. These flags explain the verdict; the verdict itself is
    `decide_feature`'s.
    """
    set_unseen_floor(tests, thresholds)
    drop_unused(tests, thresholds)
    for name, test in tests.items():
        found = registry.statistic(name)
        if found is not None and found.role == "significance":
            test["threshold"] = thresholds.alpha
            test["drift"] = bool(_p(test) < thresholds.alpha)
        elif name == "missing":
            test["threshold"] = thresholds.missing_rate_delta
            test["drift"] = bool(abs(test["value"] - test["reference"]) >= thresholds.missing_rate_delta
                                 and _p(test) < thresholds.alpha)
        elif found is not None:
            test["threshold"] = thresholds.threshold(name)
            test["drift"] = clears_floor(name, test, test["threshold"], thresholds.threshold_source)
    return tests


def drop_unused(tests: dict[str, Any], thresholds: DriftThresholds) -> None:
    """Remove, in place, the tests of registered statistics that are off for this feature (no threshold set):
    every path measures them; only the features they are on for report them."""
    for name in [n for n in tests if (s := registry.statistic(n)) is not None and s.optional
                 and thresholds.threshold(n) is None]:
        del tests[name]


def effects(kind: str, thresholds: DriftThresholds) -> tuple[str, ...]:
    """The effect sizes judged for a feature of `kind` (the registry's, in its order), those that are on."""
    return tuple(s.key for s in registry.effects(kind) if thresholds.threshold(s.key) is not None)


def decide_feature(tests: Mapping[str, Mapping[str, Any]], kind: str, rows: int,
                   thresholds: DriftThresholds) -> tuple[bool, str]:
    """One feature's verdict from its tests: ``(drift, reason)``.

    `tests` maps test names to their values as the detectors produce them
    (``{"psi": {"value"}, "ks": {"statistic", "p_value", "p_value_adjusted"?},
    "wasserstein": {"value"}, "jensenshannon": {"value"}}`` for numeric
    features, ``chi2`` instead of ``ks`` (and no wasserstein) for categorical
    ones, with its ``p_value_pooled`` and ``unseen: {"share", "p_value"}``; optionally ``missing: {"value", "reference", "p_value"}``). If a
    ``p_value_adjusted`` is present (`benjamini_hochberg` across the window) it
    is used, else the raw `significance_p_value`. `rows` is the smaller of the window's and the
    reference's row counts. `thresholds` should already be `for_feature`'d.
    The rule is the module docstring's; the reason says which part decided.
    """
    if rows < thresholds.min_rows:
        return False, f"{INSUFFICIENT_DATA_REASON}: {rows} rows < {thresholds.min_rows}"

    missing = tests.get("missing")
    if missing is not None:
        change = float(missing["value"]) - float(missing["reference"])
        if abs(change) >= thresholds.missing_rate_delta and _p(missing) < thresholds.alpha:
            return True, (f"missing rate {missing['reference']:.3g} -> {missing['value']:.3g} "
                          f"(p={_p(missing):.3g} < {thresholds.alpha:g})")

    test_name = significance_test(kind)
    test = tests.get(test_name)
    if test is None:
        return False, f"no {test_name} test"
    p_value = _p(test)
    if not p_value < thresholds.alpha:
        return False, f"{test_name} not significant (p={p_value:.3g} >= {thresholds.alpha:g})"

    above: list[str] = []
    below: list[str] = []
    for effect in effects(kind, thresholds):
        if effect not in tests:
            continue
        value = float(tests[effect]["value"])
        floor = float(getattr(thresholds, effect))
        noise = 0.0 if _derived(effect, thresholds.threshold_source) else float(tests[effect].get("noise") or 0.0)
        cleared = clears_floor(effect, tests[effect], floor, thresholds.threshold_source)
        shown = f"{effect} {value:.3g}"
        if noise and registry.STATISTICS[effect].noise == "quadrature":
            shown += f" beyond noise {noise:.2g}: {beyond_noise(effect, value, noise):.3g}"
        elif noise:
            shown += f" - noise {noise:.2g}"
        (above if cleared else below).append(f"{shown} {'>=' if cleared else '<'} {floor:g}")
    unseen = test.get("unseen") if kind == CATEGORICAL else None
    if unseen is not None:
        cleared = unseen_clears_floor(unseen)
        if cleared or float(unseen["share"]) > 0:
            (above if cleared else below).append(f"unseen share {float(unseen['share']):.3g} "
                                                 f"{'>' if cleared else '<='} {_unseen_floor(unseen):g}")
    if above:
        return True, f"{test_name} p={p_value:.3g} < {thresholds.alpha:g} and " + ", ".join(above)
    return False, f"{test_name} significant (p={p_value:.3g}) but effect below floor: " + ", ".join(below)


def correct_window(measured: Mapping[str, tuple[dict[str, Any], dict[str, Any]]], kinds: Mapping[str, str],
                   thresholds_for: Callable[[str], DriftThresholds], alpha: float) -> None:
    """The window-wide part of the rule, in place, shared by the service and `detect`: each column's unseen-share
    floor, then Benjamini-Hochberg across the window's judged columns (features and prediction: every verdict of
    the window is one hypothesis of one family) in two families, the distribution tests (`significance_test`) and
    the missing-rate tests, each test gaining its ``p_value_adjusted``.

    `measured`: column -> (its tests, its missing-rate test); `thresholds_for(column)`: the column's thresholds.
    """
    if not measured:
        return
    for name, (tests, _) in measured.items():
        set_unseen_floor(tests, thresholds_for(name))
    significance = [tests[significance_test(kinds[name])] for name, (tests, _) in measured.items()]
    missing = [missing_test for _, missing_test in measured.values()]
    for family in (significance, missing):
        _, adjusted = benjamini_hochberg([significance_p_value(test) for test in family], alpha)
        for test, p_value in zip(family, adjusted.tolist()):
            test["p_value_adjusted"] = p_value


def judge_feature(tests: dict[str, dict[str, Any]], kind: str, rows: int, thresholds: DriftThresholds,
                  missing: dict[str, Any] | None = None) -> tuple[bool, str]:
    """One column's verdict and its tests' flags, shared by the service and `detect`: the statistics that are off
    dropped (`drop_unused`), each test flagged (`annotate_tests`), the verdict `decide_feature`'s. `missing`: the
    missing-rate test when it is kept apart from `tests` (`detect`'s JSON)."""
    annotate_tests(tests, kind, thresholds)
    if missing is None:
        return decide_feature(tests, kind, rows, thresholds)
    annotate_tests({"missing": missing}, kind, thresholds)
    return decide_feature({**tests, "missing": missing}, kind, rows, thresholds)


def decide_dataset(drifted_features: int, features: int, thresholds: DriftThresholds) -> bool:
    """Dataset drift: at least ``dataset_drift_share`` of the `features` drifted (False when there are none)."""
    if features <= 0:
        return False
    return drifted_features / features >= thresholds.dataset_drift_share
