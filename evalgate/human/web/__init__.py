"""``evalgate serve``: the local web application for blind human rating, agreement and a read-only dashboard.

``create_app`` builds the FastAPI application over a store; ``serve`` runs it with uvicorn. Pages are jinja2
templates (``evalgate/human/web/templates``) with a few lines of inline JavaScript for keyboard shortcuts; nothing is
built or fetched from elsewhere.
"""

from evalgate.human.web.app import create_app, serve

__all__ = ["create_app", "serve"]
