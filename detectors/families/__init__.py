"""The streaming detector families, one module each; `run_families` runs them on one merged window and
`evaluate_window` gives its `WindowOutcome` (with its segments and pooled labels)."""
