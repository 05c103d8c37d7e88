"""Rollouts: the candidate compared with production per window, the verdict over windows, the next step under the
`[rollouts]` policy (`driftline.policies.RolloutPolicy`) and what the store keeps."""
