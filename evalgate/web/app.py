"""The FastAPI application behind ``evalgate serve``.

Access: ``/login?token=T`` checks a rater token (``evalgate audit add-rater``) and sets it as an HttpOnly,
``SameSite=Strict`` cookie; every other page needs that cookie (or ``Authorization: Bearer T``): 401 without a valid
token, 403 for an admin page with a rater's token. Forms carry a one-time token bound to the rater (``evalgate.rating``)
and a request whose ``Origin`` is another site is refused, so a page elsewhere cannot post a score in a rater's
name, and a replayed form is refused. Responses forbid framing and send no referrer (the login URL holds a token).

Pages: ``/`` (the rater's batches and progress), ``/batch/{id}`` (the rating queue, one blind sample at a time),
``/agreement`` (admin), ``/dashboard/runs``, ``/dashboard/runs/{run_id}``, ``/dashboard/gates``,
``/dashboard/access`` (admin, read-only).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from evalgate import rating
from evalgate.checkpoints import short_digest
from evalgate.errors import BadInput, EvalgateError, RefusedByPolicy
from evalgate.store import Store

COOKIE = "evalgate_token"
_HEADERS = {"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                                       "img-src data:; form-action 'self'; frame-ancestors 'none'"}
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("evalgate.web", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
_ENV.filters["short_digest"] = short_digest


def _fmt(v: Any, digits: int = 3) -> str:
    if isinstance(v, float):
        return "n/a" if not math.isfinite(v) else f"{v:.{digits}f}"
    return "n/a" if v is None else str(v)


_ENV.filters["fmt"] = _fmt


def _page(template: str, http_status: int = 200, **ctx: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(template).render(**ctx), status_code=http_status, headers=_HEADERS)


def _error(e: EvalgateError) -> HTMLResponse:
    status = e.status if isinstance(e, rating.NotAuthorized) else 403 if isinstance(e, RefusedByPolicy) else 400
    return _page("error.html.j2", status, status=status, message=e.message, rater=None)


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get(COOKIE)


def _same_origin(request: Request) -> None:
    """Refuse a form posted from another site (the Origin header, sent by browsers with every POST)."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise rating.NotAuthorized(f"a form from {origin} may not post here (cross-site request refused)", 403)


class _FifoLock:
    """A lock handed to waiting threads in arrival order. The store's file lock is polled, so under many concurrent
    requests some waited far longer than others (p95 24 s at p50 0.25 s in bench/web_raters.py); requests of this
    process queue here first, in order, and only one at a time asks for the file lock."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._busy = False
        self._waiting: deque[threading.Event] = deque()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._mutex:
            turn = None if not self._busy else threading.Event()
            self._busy = True
            if turn is not None:
                self._waiting.append(turn)
        if turn is not None:
            turn.wait()  # release() hands the lock over: _busy stays True
        try:
            yield
        finally:
            with self._mutex:
                if self._waiting:
                    self._waiting.popleft().set()
                else:
                    self._busy = False


def create_app(store: Store | None = None) -> FastAPI:
    """The application over ``store`` (default ``Store()``, i.e. ``$EVALGATE_HOME``).

    Every request runs in one store session (one connection under the store's lock), taken in arrival order
    (``_FifoLock``), so concurrent raters queue for the database for a few milliseconds each and no write is lost.
    """
    st = store or Store()
    app = FastAPI(title="evalgate", docs_url=None, redoc_url=None, openapi_url=None)
    queue = _FifoLock()

    def guarded(request: Request, admin: bool, fn: Callable[[rating.Rater], Response]) -> Response:
        try:
            with queue.held(), st.session():
                return fn(rating.authenticate(st, _token(request), admin=admin))
        except EvalgateError as e:
            return _error(e)

    @app.get("/login")
    def login(token: str = "") -> Response:
        try:
            rating.authenticate(st, token)
        except EvalgateError as e:
            return _error(e)
        resp = RedirectResponse("/", status_code=303, headers=_HEADERS)
        resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return resp

    @app.get("/")
    def home(request: Request) -> Response:
        def show(r: rating.Rater) -> Response:
            rows = [{**b, **rating.queue(st, b["batch_id"], r.name)} for b in st.batches()]
            return _page("home.html.j2", rater=r, batches=rows)
        return guarded(request, False, show)

    @app.get("/batch/{batch_id}")
    def rate_page(request: Request, batch_id: str, notice: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            b = rating.batch(st, batch_id)
            q = rating.queue(st, batch_id, r.name)
            if q["next"] is None:
                return _page("done.html.j2", rater=r, batch=b, q=q)
            view = rating.view_sample(st, b, r.name, q["next"]["sample_key"])
            return _page("rate.html.j2", rater=r, batch=b, q=q, view=view, notice=notice[:200],
                         form_token=rating.issue_form_token(st, r.name),
                         scores=list(range(b["scale_min"], b["scale_max"] + 1)))
        return guarded(request, False, show)

    @app.post("/batch/{batch_id}/rate")
    async def rate_submit(request: Request, batch_id: str) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace"),
                                             keep_blank_values=True).items()}

        def store_it(r: rating.Rater) -> Response:
            _same_origin(request)
            res = rating.submit(st, r.name, batch_id, form.get("form_token", ""), form.get("sample", ""),
                                form.get("score"), form.get("note"))
            note = "skipped" if res["action"] == "skipped" else f"{res['action']}: {int(res['score'])}"
            return RedirectResponse(f"/batch/{batch_id}?notice={note}", status_code=303, headers=_HEADERS)
        # the store work is synchronous: run it in the thread pool like the other pages
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(guarded, request, False, store_it)

    @app.get("/agreement")
    def agreement_page(request: Request) -> Response:
        from evalgate.agreement import agreement_by_checkpoint

        return guarded(request, True, lambda r: _page("agreement.html.j2", rater=r,
                                                      runs=agreement_by_checkpoint(st)))

    @app.get("/dashboard/runs")
    def runs_page(request: Request, protocol: str = "", split: str = "", status: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            where = {k: v for k, v in (("protocol_name", protocol), ("split", split), ("status", status)) if v}
            return _page("runs.html.j2", rater=r, runs=list(reversed(st.runs(**where))),
                         filters={"protocol": protocol, "split": split, "status": status})
        return guarded(request, True, show)

    @app.get("/dashboard/runs/{run_id}")
    def run_page(request: Request, run_id: str) -> Response:
        def show(r: rating.Rater) -> Response:
            from evalgate.splits import SplitManager

            runs = st.runs(run_id=run_id)
            if not runs:
                raise BadInput(f"unknown run {run_id!r}")
            manager = SplitManager(st)  # per-item outputs are a read of the split: checked and logged first
            manifest, _ = manager.check(runs[0]["split"], "dashboard", r.name, protocol_hash=runs[0]["protocol_hash"],
                                        checkpoint_digest=runs[0]["checkpoint_digest"])
            manager.log_read(manifest, r.name, "dashboard", cached=True, run_id=run_id,
                             checkpoint_digest=runs[0]["checkpoint_digest"], protocol_hash=runs[0]["protocol_hash"])
            return _page("run.html.j2", rater=r, run=runs[0], samples=st.samples(run_id))
        return guarded(request, True, show)

    @app.get("/dashboard/gates")
    def gates_page(request: Request) -> Response:
        return guarded(request, True, lambda r: _page("gates.html.j2", rater=r, rows=st.table_rows("gates", "ts")))

    @app.get("/dashboard/access")
    def access_page(request: Request, split: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            from evalgate.audit import audit_summary

            rows = st.access_rows(split or None)[-200:]
            return _page("access.html.j2", rater=r, summary=audit_summary(st, split or None), split=split,
                         rows=list(reversed(rows)))
        return guarded(request, True, show)

    return app


def serve(host: str = "127.0.0.1", port: int = 8765, store: Store | None = None) -> None:
    """Run the application with uvicorn until interrupted (``evalgate serve``)."""
    import uvicorn

    uvicorn.run(create_app(store), host=host, port=port, log_level="warning")
