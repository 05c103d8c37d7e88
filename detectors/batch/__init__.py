"""Batch detection (`driftline detect`): the engine, its performance, its multivariate drift and its segments."""
