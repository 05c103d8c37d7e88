"""The scheduler stage: evaluates closed windows with the detectors and hands the results to alerts.

`scheduler.evaluation` finds and evaluates due windows, `scheduler.quarantine` sets failing ones
aside, `scheduler.retention` prunes old rows, `scheduler.jobs` wires them with alerts into the
jobs that `driftline scheduler` (`scheduler.commands`) runs.
"""
