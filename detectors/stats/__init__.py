"""Pure statistics: two-sample tests and distances, their binned forms, intervals, sequential tests, model-quality and multivariate maths."""
