"""Performance estimation before labels: CBPE for binary and multiclass classifiers, DLE for regression."""
