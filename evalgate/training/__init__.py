"""During and before training: the reward preflight (``preflight``) and the trainer callback (``callback``).
"""
