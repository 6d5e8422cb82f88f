"""Read-only views of what the store holds: a run's samples and comparisons (``samples``), runs listed (``runs``), data
frames (``frames``), the audit summary (``audit``).
"""
