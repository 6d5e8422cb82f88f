"""``evalgate init``: a repository's starter files (``starter``) from ``templates/``.
"""
