"""Every threshold and decision rule: the per-test decision, the window alarm levels, reference-derived thresholds and their spreads."""
