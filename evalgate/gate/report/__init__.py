"""A gate's outputs: HTML, JSON, JUnit and Markdown (``outputs``) and the report-format registry (``writers``).
"""
