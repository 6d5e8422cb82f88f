"""The access trail: the hash-chained, signed access log of every split read (``log``).
"""
