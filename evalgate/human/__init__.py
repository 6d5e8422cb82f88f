"""People rating model outputs: the rating policy and forms (``rating``), score export/import (``audit_io``), agreement
statistics (``agreement``) and the rating web app (``web``).
"""
