"""RLHF evaluation: pairwise judge statistics, judge and reward-model calibration (docs/RLHF.md)."""
