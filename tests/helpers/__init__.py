"""Test helpers shared by several test files: the in-process CLI runner, the tiny checkpoint builder, the source
parsed once per process (source.py)."""
