"""Embeddings: named vectors on events, their training reference and their mergeable window summary.

* `contract`: the event's `embeddings` field, checked and bounded;
* `reference`: what the baseline learns per embedding from the training vectors (`EmbeddingReference`);
* `window`: what a window state folds per embedding (`EmbeddingWindow`), mergeable, constant cost.
"""
