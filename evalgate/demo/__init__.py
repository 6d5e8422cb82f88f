"""``make demo`` (``python -m evalgate.demo``): the walk-through (``main``), its training run (``train``) and its RLHF
leg (``rlhf``). Nothing outside this package imports it.
"""
