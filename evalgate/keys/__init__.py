"""Secrets below the store: the private-split key and sealing (``sealing``), the access log's signing key
(``signing``).
"""
