"""RLHF evaluation: pairwise judge statistics, judge and reward-model calibration (issue 30, docs/RLHF.md)."""
