"""The scheduler stage: evaluates closed windows with the detectors and hands the results to alerts.

`driftline.scheduler.evaluation` finds and evaluates due windows, `driftline.scheduler.quarantine` sets failing ones
aside, `driftline.scheduler.retention` prunes old rows, `driftline.scheduler.jobs` wires them with alerts into the
jobs that `driftline scheduler` (`driftline.scheduler.commands`) runs.
"""
