"""The streaming detector families, one module each, and `evaluate_window`, which runs them on one merged window (and per segment)."""
