"""Agentic evaluation: a multi-turn loop per sample in which the model calls the protocol's tools under its
permissions (``calls``: reading calls in each format; ``permissions``: what a call may do; ``loop``: the turns,
batched across samples and stored per turn; ``metrics``: tool-use metrics)."""
