"""Rollouts: the candidate compared with production per window, the verdict over windows, the transition under the
`[rollouts]` policy (`driftline.policies.RolloutPolicy`), one window's `RolloutOutcome`, and what the store keeps."""
