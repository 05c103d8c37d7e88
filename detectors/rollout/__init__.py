"""Rollouts: the candidate compared with production per window, the verdict over windows, the policy and what the store keeps."""
