"""Embedding drift over window summaries: the reference, the mergeable window, and the family's verdict."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftline.alerts.rules import AlertRules
from driftline.baseline import Baseline, compute_baseline
from driftline.detectors.families.evidence import EVIDENCE_KEY, PagingPolicy, advance_window, stream_key
from driftline.detectors.families.embedding_drift import embedding_drift, judge_embedding
from driftline.detectors.families.window import evaluate_window
from driftline.detectors.stats.embeddings import mmd_null_quantile, pooled_small_bins, quadratic_form_sf
from driftline.embeddings.reference import EmbeddingReference, fit_reference, residual_spectrum
from driftline.embeddings.window import EmbeddingDimensionError, EmbeddingWindow
from driftline import defaults, vocabulary
from driftline.vocabulary import EMBEDDING_DRIFT
from driftline.window_state import EventBatch, WindowState
from tests.support.embeddings import draw

D = 32


@pytest.fixture(scope="module")
def reference() -> EmbeddingReference:
    return fit_reference(draw(np.random.default_rng(0), 6_000, D), "prompt", seed=3)


@pytest.fixture(scope="module")
def baseline(reference) -> Baseline:
    frame = pd.DataFrame({"q_len": np.random.default_rng(1).normal(10, 2, 2_000)})
    return Baseline.from_dict(compute_baseline(frame).add_embeddings({"prompt": reference}).to_dict())


def events(vectors: np.ndarray, start: int = 0) -> list[dict]:
    return [{"event_id": f"e-{start + i}", "request_id": f"r-{start + i}", "ts_ms": 1_790_000_000_000 + i,
             "features": {"q_len": 10.0}, "prediction": 0.5, "latency_ms": {"total": 5.0}, "status": "ok",
             "embeddings": {"prompt": v.tolist()}} for i, v in enumerate(vectors)]


def test_the_reference_round_trips_and_its_exact_null_band_agrees_with_reference_chunks(reference):
    again = EmbeddingReference.from_dict(reference.to_dict())
    assert again.fingerprint == reference.fingerprint
    np.testing.assert_array_equal(again.random_features(np.ones((2, D))), reference.random_features(np.ones((2, D))))
    for size, chunk_q95 in reference.null_chunks.items():
        # the chunks are of one half, against the other half's mean
        exact = mmd_null_quantile(0.95, reference.rff_eigenvalues, size, reference.rff_rows // 2)
        # the chunks are bootstrap draws of one half (its own sampling noise on top): a little wider
        assert 0.7 * chunk_q95 < exact < 1.05 * chunk_q95, (size, exact, chunk_q95)


@pytest.mark.parametrize("weights", [np.array([3.0, 1.0, 0.5, 0.5, 0.1]), np.linspace(1.0, 0.01, 100) ** 3])
def test_the_quadratic_form_tail_matches_monte_carlo(weights):
    draws = (np.random.default_rng(2).standard_normal((200_000, weights.size)) ** 2) @ weights
    for level in (0.9, 0.95, 0.99):  # the tail the decision reads: within a tenth of its probability
        tail = quadratic_form_sf(np.quantile(draws, level), weights)
        assert abs(tail - (1 - level)) < 0.1 * (1 - level), (level, tail)


@pytest.mark.parametrize("true_values", [np.ones(300), np.linspace(0.5, 1.5, 300)])
def test_the_mean_tests_null_has_the_spread_of_the_true_covariance_not_of_its_sample(true_values):
    # 400 rows in 300 dimensions: the sample eigenvalues spread (Marchenko-Pastur) although the truth is round or mild
    rows = np.random.default_rng(5).standard_normal((400, true_values.size)) * np.sqrt(true_values)
    centred = rows - rows.mean(axis=0)
    sample = np.maximum(np.linalg.eigvalsh(centred.T @ centred / 399), 0.0)[::-1]
    truth = float((true_values ** 2).sum())
    assert (sample ** 2).sum() > 1.5 * truth  # what the null was built on before: tr(S^2) far over tr(Sigma^2)
    corrected = residual_spectrum(sample, 399)
    assert corrected.sum() == pytest.approx(sample.sum())
    assert (corrected ** 2).sum() == pytest.approx(truth, rel=0.05)
    # the 1 % point of the null built on them is the true null's, within its sampling (a 1 % test held at its level)
    exact = mmd_null_quantile(0.99, true_values, 500, 2_000)
    assert mmd_null_quantile(0.99, corrected, 500, 2_000) == pytest.approx(exact, rel=0.01)
    assert mmd_null_quantile(0.99, sample, 500, 2_000) > 1.02 * exact


def test_window_summaries_merge_to_the_summary_of_all_their_events(baseline):
    vectors = draw(np.random.default_rng(4), 900, D)
    rows = events(vectors)
    whole = WindowState.empty(baseline).add_batch(EventBatch.from_events(rows))
    parts = [WindowState.empty(baseline).add_batch(EventBatch.from_events(rows[i::3])) for i in range(3)]
    merged = WindowState.from_bytes(parts[0].merge(parts[1]).to_bytes(), baseline).merge(parts[2])
    a, b = whole.embeddings["prompt"], merged.embeddings["prompt"]
    assert a.count == b.count == 900
    np.testing.assert_allclose(a.sum, b.sum)
    np.testing.assert_allclose(a.feature_sum, b.feature_sum)
    np.testing.assert_array_equal(a.component_counts, b.component_counts)
    np.testing.assert_array_equal(a.cluster_counts, b.cluster_counts)
    assert a.examples == b.examples and all(len(v) == 3 for v in a.examples.values())
    # the classifier's sample: the same 200 requests (bottom-k by request id), however the window was folded
    np.testing.assert_array_equal(a.sample_keys, b.sample_keys)
    np.testing.assert_allclose(a.sample, b.sample)
    assert a.sample.shape == (200, reference_components(baseline) + 1)


def reference_components(baseline: Baseline) -> int:
    return int(baseline.embeddings["prompt"].components.shape[0])


def test_a_summary_does_not_grow_with_the_window(baseline, reference):
    small = EmbeddingWindow(D, reference).add(draw(np.random.default_rng(5), 300, D), reference)
    large = EmbeddingWindow(D, reference).add(draw(np.random.default_rng(6), 20_000, D), reference)
    shapes = lambda w: {k: np.shape(v) for k, v in w.pack().items() if k != "examples"}  # noqa: E731
    assert shapes(small) == shapes(large)
    assert large.sample.shape == (defaults.WINDOW_SAMPLE_SIZE, reference.components.shape[0] + 1)


def test_the_domain_classifier_on_the_window_sample_reports_which_directions_moved(reference):
    rows = 2_000
    ids = np.array([f"r-{i}" for i in range(rows)], dtype=object)
    wider = EmbeddingWindow(D, reference).add(draw(np.random.default_rng(11), rows, D, "covariance", spread=1.4),
                                              reference, ids)
    classifier = judge_embedding(reference, wider)["domain_classifier"]
    assert classifier["drift"] and classifier["auc"] > classifier["threshold"] > 0.5, classifier
    assert classifier["rows"] == defaults.WINDOW_SAMPLE_SIZE and classifier["reference_rows"] == 1_000
    # half the axes wider: most of it lies off the top components, in the distance from their subspace
    assert classifier["top_features"][0]["name"] == "residual", classifier["top_features"]
    quiet = judge_embedding(reference, EmbeddingWindow(D, reference).add(draw(np.random.default_rng(12), rows, D),
                                                                         reference, ids))
    assert not quiet["domain_classifier"]["drift"] and quiet["domain_classifier"]["auc"] < 0.6, quiet["domain_classifier"]
    # a reference fitted before the classifier: the other tests judge, the classifier says why it cannot
    older = EmbeddingReference.from_dict({k: v for k, v in reference.to_dict().items() if k != "classifier_sample"})
    verdict = judge_embedding(older, EmbeddingWindow(D, older).add(
        draw(np.random.default_rng(11), rows, D, "covariance", spread=1.4), older))
    assert verdict["drift"] and not verdict["domain_classifier"]["drift"]
    assert verdict["domain_classifier"]["insufficient_data"] and "register it again" in verdict["domain_classifier"]["reason"]


def test_a_vector_of_another_dimension_is_refused_before_anything_is_counted(baseline):
    state = WindowState.empty(baseline)
    with pytest.raises(EmbeddingDimensionError, match="5 dimensions where the baseline has 32"):
        state.add_batch(EventBatch.from_events(events(np.zeros((3, 5)))))
    assert state.embeddings == {}


@pytest.mark.parametrize("kind", ["class_mix", "mean_shift", "covariance"])
def test_each_kind_of_change_fires_and_says_where(reference, kind):
    window = EmbeddingWindow(D, reference).add(draw(np.random.default_rng(8), 2_000, D, kind, shift=2.0, spread=1.4),
                                               reference, np.array([f"r-{i}" for i in range(2_000)], dtype=object))
    verdict = judge_embedding(reference, window)
    assert verdict["drift"], verdict
    moved = verdict["clusters"]["moved"]
    assert len(moved) == 3 and all(len(cluster["examples"]) == 3 for cluster in moved)
    if kind == "class_mix":
        assert verdict["clusters"]["drift"] and abs(moved[0]["change"]) > 0.05
    if kind == "mean_shift":  # two within-class standard deviations along one direction: the whitened mean sees it
        assert verdict["mean"]["drift"] and verdict["mean"]["value"] > verdict["mean"]["threshold"]


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
def test_no_drift_windows_fire_at_most_at_the_documented_rate(reference):
    rng = np.random.default_rng(9)
    fired = [judge_embedding(reference, EmbeddingWindow(D, reference).add(draw(rng, n, D), reference))["drift"]
             for n in (100, 500) for _ in range(60)]
    assert sum(fired) <= 12, sum(fired)  # alpha = 5 %: 6 expected of 120, 12 is beyond three standard deviations


def test_the_family_reports_each_embedding_once_and_too_few_vectors_as_insufficient(baseline):
    shifted = draw(np.random.default_rng(10), 800, D, "class_mix")
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events(shifted)))
    results = [r for r in evaluate_window(baseline, state).results if r.detector == EMBEDDING_DRIFT]
    assert [(r.feature, r.metric, r.breached) for r in results] == [("prompt", "mmd2", True)]
    assert results[0].value > results[0].threshold or results[0].details["clusters"]["drift"]
    stored = results[0].to_dict()["details"]  # JSON-safe, and every key is a field of the family's typed details
    assert vocabulary.details_of(EMBEDDING_DRIFT, stored).to_dict() == stored
    few = WindowState.empty(baseline).add_batch(EventBatch.from_events(events(shifted[:10])))
    (result,) = embedding_drift(baseline, few)
    assert result.insufficient_data and not result.breached
    unknown = events(shifted[:60])
    for row in unknown:
        row["embeddings"] = {"answer": [0.0, 1.0]}
    (result,) = embedding_drift(baseline, WindowState.empty(baseline).add_batch(EventBatch.from_events(unknown)))
    assert result.feature == "answer" and result.insufficient_data and "no reference" in result.details["reason"]


def test_clusters_the_window_expects_few_rows_in_are_pooled_for_the_chi_square():
    window, reference = pooled_small_bins([30, 40, 1, 0, 29], [300, 400, 9, 6, 285])
    assert window.tolist() == [30, 40, 29, 1] and reference.tolist() == [300, 400, 285, 15]
    assert [a.tolist() for a in pooled_small_bins([50, 50], [500, 500])] == [[50, 50], [500, 500]]


def test_each_embedding_is_a_stream_of_evidence_that_pages_under_the_sequential_policy(baseline):
    """Per-window p-values of the family, Bonferroni over its tests, feed one e-detector per embedding name."""
    rng = np.random.default_rng(12)
    policy = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)
    states: dict = {}
    paging = []
    for i, kind in enumerate(["none"] * 4 + ["class_mix"] * 4):
        vectors = draw(rng, 300, D, kind, mix=0.4) if kind != "none" else draw(rng, 300, D)
        state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events(vectors, 1000 * i)))
        results = [r for r in evaluate_window(baseline, state).results if r.detector == EMBEDDING_DRIFT]
        states.update(advance_window(results, states, i, policy))
        (result,) = results
        assert stream_key(result) == "embedding_drift/prompt/mmd2"
        evidence = result.details[EVIDENCE_KEY]
        assert vocabulary.details_of(EMBEDDING_DRIFT, result.to_dict()["details"]).evidence == evidence
        paging.append(evidence["paging"])
    assert not any(paging[:4])  # no drift, no page
    assert any(paging[4:]), paging  # the shifted mix pages within four windows
    assert AlertRules.from_mapping({}).rule_for("m", EMBEDDING_DRIFT).sequential  # it pages on evidence by default


# -- one vector cannot decide a verdict: values up to the contract's bound, pulled back to the reference ----
@pytest.mark.parametrize("extreme", [defaults.VALUE_MAX_ABS, -defaults.VALUE_MAX_ABS, "one component"])
def test_one_vector_at_the_contracts_bound_among_500_does_not_flip_the_verdict(reference, extreme):
    for seed in (21, 22, 23):
        rows = draw(np.random.default_rng(seed), 500, D)
        before = judge_embedding(reference, EmbeddingWindow(D, reference).add(rows, reference))
        assert not before["drift"] and before["mean"]["p_value"] > 0.1, before  # a clear no-drift window
        bad = np.full(D, extreme) if extreme != "one component" else np.eye(D)[0] * defaults.VALUE_MAX_ABS
        after = judge_embedding(reference, EmbeddingWindow(D, reference).add(np.vstack([rows[:499], bad]),
                                                                            reference))
        assert not after["drift"], after
        # as one unusual reference row would (without the pull back: p 0.0, the mean 1e99 times its threshold)
        assert after["mean"]["value"] < before["mean"]["value"] + 0.5 * before["mean"]["threshold"], (before, after)
        assert after["mean"]["p_value"] > 0.05


def test_reference_like_rows_are_not_pulled_back_and_the_radius_is_stored(reference):
    rows = draw(np.random.default_rng(24), 5_000, D)
    assert (reference.clipped(rows) == rows).all(axis=1).mean() > 0.999
    far = reference.clipped(np.full((1, D), 1e50))
    distance = np.sqrt(reference.whitened_distance(far[0]))
    assert distance == pytest.approx(reference.clip_radius)  # on the radius, in the vector's direction
    assert EmbeddingReference.from_dict(reference.to_dict()).clip_radius == reference.clip_radius
    older = {k: v for k, v in reference.to_dict().items() if k != "clip_radius"}
    assert (EmbeddingReference.from_dict(older).clipped(far * 0 + 1e50) == 1e50).all()  # fitted before: as it came
