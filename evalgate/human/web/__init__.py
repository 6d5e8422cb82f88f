"""``evalgate serve``: the local web application for blind human rating, agreement and a read-only dashboard.

``create_app`` builds the FastAPI application over a store; ``serve`` runs it with uvicorn. Pages are jinja2
templates (``evalgate/human/web/templates``) with a few lines of inline JavaScript for keyboard shortcuts; nothing is
built or fetched from elsewhere.
"""

from __future__ import annotations

from typing import Any

from evalgate.core import lazy

_WHERE = {  # name -> the submodule that defines it
    "create_app": "app", "serve": "app",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
