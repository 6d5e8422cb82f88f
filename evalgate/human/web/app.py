"""The FastAPI application behind ``evalgate serve``.

Access: ``POST /login`` checks a rater token (``evalgate audit add-rater``), starts a server-side session
(``rating.start_session``) and sets its id as an HttpOnly, ``SameSite=Strict`` cookie; ``GET /login`` only shows the
form (the printed URL carries the token in its fragment, which the page's script copies into the form: the rater
clicks to log in, so no link can log a browser in under someone else's name). ``POST /logout`` ends the session in
the store, so its cookie no longer works anywhere, even replayed. Every other page needs a live session cookie (or
``Authorization: Bearer T`` with the rater token): 401 without, 403 for an admin page with a rater's token. A form
post is authenticated from its headers before its body is read, and a body over ``MAX_FORM_BYTES`` is refused (413)
unread. Forms carry a one-time token bound to the rater
(``evalgate.human.rating``) and a post whose ``Origin`` is not the server's own configured address (``Origin: null``
included) is refused, so a page elsewhere cannot post a score in a rater's name, and a replayed form is refused.
Responses forbid framing and send a referrer only to this server.

Pages: ``/`` (the rater's batches and progress), ``/batch/{id}`` (the rating queue, one blind sample at a time),
``/agreement`` (admin), ``/dashboard/runs``, ``/dashboard/runs/{run_id}``, ``/dashboard/gates``,
``/dashboard/access`` (admin, read-only).
"""

from __future__ import annotations

import functools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jinja2
import markupsafe
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt
from starlette.concurrency import run_in_threadpool

from evalgate.core.errors import BadInput, EvalgateError, RefusedByPolicy
from evalgate.core.formatting import num, short_digest
from evalgate.human import rating
from evalgate.store import GateRow, Store

COOKIE = "evalgate_token"
MAX_FORM_BYTES = 64 * 1024  # a rating form: tokens, score and a note of NOTE_MAX_CHARS characters, URL-encoded
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
# same-origin, not no-referrer: under no-referrer browsers send "Origin: null" with a page's own form posts, and null
# is refused. No URL holds a token (the login link carries it in the fragment, which no Referer ever includes).
_HEADERS = {"X-Frame-Options": "DENY", "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                                       "img-src data:; form-action 'self'; frame-ancestors 'none'"}
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("evalgate.human.web", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
_ENV.filters["short_digest"] = short_digest


_ENV.filters["fmt"] = functools.partial(num, missing="n/a")  # the command line's numbers (evalgate.core.formatting)


_MARKDOWN = MarkdownIt("js-default")


def markdown_html(text: str) -> markupsafe.Markup:
    """``text`` (a rubric) as HTML through markdown-it-py's ``js-default`` preset (CommonMark plus tables and
    strikethrough): raw HTML in the text is escaped, never passed through (``html: False``), and links to
    ``javascript:``, ``vbscript:``, ``file:`` and non-image ``data:`` URLs are not made links (markdown-it's
    ``validateLink``). The result is marked safe for the templates because markdown-it escaped it."""
    return markupsafe.Markup(_MARKDOWN.render(text))


_ENV.filters["markdown"] = markdown_html


def _page(template: str, http_status: int = 200, **ctx: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(template).render(**ctx), status_code=http_status, headers=_HEADERS)


def _error(e: EvalgateError) -> HTMLResponse:
    status = (e.status if isinstance(e, rating.NotAuthorized) else 403 if isinstance(e, RefusedByPolicy)
              else 413 if isinstance(e, _TooLarge) else 400)
    return _page("error.html.j2", status, status=status, message=e.message, rater=None)


def _rater(store: Store, request: Request, admin: bool = False) -> rating.Rater:
    """The rater of a request: ``Authorization: Bearer TOKEN`` (a rater token), else the session cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return rating.authenticate(store, auth[7:].strip(), admin=admin)
    return rating.session_rater(store, request.cookies.get(COOKIE), admin=admin)


class _TooLarge(EvalgateError):
    """A request body over the limit (HTTP 413)."""


def own_origins(url: str) -> frozenset[str]:
    """The origins (``scheme://host:port``, lower case) a browser sends for pages of the server reached at ``url``;
    a loopback address also under its other loopback names (``localhost``, ``127.0.0.1``, ``[::1]``).

    Raises:
        BadInput: ``url`` is not ``http(s)://HOST[:PORT]`` or names a wildcard address (0.0.0.0, ::), which no
            browser shows as its origin.
    """
    parts = urlsplit(url.strip().lower())
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or host in ("0.0.0.0", "::"):
        raise BadInput(f"server address {url!r}: give the http(s)://HOST:PORT raters open (--url), not a wildcard")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    name = f"[{host}]" if ":" in host else host
    names = _LOOPBACK if name in _LOOPBACK else (name,)
    return frozenset(f"{parts.scheme}://{n}:{port}" for n in names)


def _origin_key(origin: str) -> str:
    parts = urlsplit(origin.lower())
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""
    host = parts.hostname or ""
    return f"{parts.scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _same_origin(request: Request, allowed: frozenset[str]) -> None:
    """Refuse a form posted from anywhere but this server's own configured address. Browsers send ``Origin`` with
    every POST; ``null`` (a sandboxed frame, a ``data:`` page, a redirect chain) is refused too. The client's
    ``Host`` header is not trusted: a page on a name that resolves here (DNS rebinding) sends a matching one."""
    origin = request.headers.get("origin")
    if origin is not None and _origin_key(origin) not in allowed:
        raise rating.NotAuthorized(f"a form from {origin} may not post here (cross-site request refused)", 403)


async def _read_form(request: Request, limit: int) -> dict[str, str]:
    """The URL-encoded form of ``request``, read only up to ``limit`` bytes.

    Raises:
        _TooLarge: ``Content-Length`` over ``limit`` (refused before a byte of the body is read), or a body
            streamed without a length that passes it.
    """
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > limit:
        raise _TooLarge(f"the request body ({declared} bytes) is over the {limit} allowed")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge(f"the request body is over the {limit} bytes allowed")
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


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


class _Served:
    """What every route shares: the store, the server's own origins and the request queue.

    Every request runs in one store session (one connection under the store's lock), taken in arrival order
    (``_FifoLock``), so concurrent raters queue for the database for a few milliseconds each and no write is lost.
    """

    def __init__(self, store: Store, origins: frozenset[str]):
        self.store = store
        self.origins = origins
        self.queue = _FifoLock()

    def guarded(self, request: Request, admin: bool, fn: Callable[[rating.Rater], Response]) -> Response:
        """``fn(rater)`` for the request's rater (an admin's where ``admin``) in one store session; an error page
        (401, 403, ...) for an ``EvalgateError``."""
        try:
            with self.queue.held(), self.store.session():
                return fn(_rater(self.store, request, admin))
        except EvalgateError as e:
            return _error(e)

    def admitted(self, request: Request) -> None:
        """Origin and token checked from the headers alone, before any body is read."""
        _same_origin(request, self.origins)
        with self.queue.held(), self.store.session():
            _rater(self.store, request)

    def login(self, token: str) -> str:
        """A new session for the token posted to ``/login`` (``rating.start_session``)."""
        with self.queue.held(), self.store.session():
            return rating.start_session(self.store, token)

    def logout(self, session: str | None) -> None:
        """End the session of the cookie posted to ``/logout``."""
        with self.queue.held(), self.store.session():
            rating.end_session(self.store, session)


def _login_routes(srv: _Served) -> APIRouter:
    """``GET /login`` (the form), ``POST /login`` (the token checked, a session started, its id set as the cookie)
    and ``POST /logout`` (the session ended in the store, the cookie dropped)."""
    router = APIRouter()

    @router.get("/login")
    def login_page() -> Response:
        return _page("login.html.j2", rater=None)

    @router.post("/login")
    async def login(request: Request) -> Response:
        try:
            _same_origin(request, srv.origins)
            token = (await _read_form(request, 4096)).get("token", "").strip()
            session = await run_in_threadpool(srv.login, token)
        except EvalgateError as e:
            return _error(e)
        resp = RedirectResponse("/", status_code=303, headers=_HEADERS)
        resp.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/",
                        max_age=int(rating.SESSION_TTL.total_seconds()))
        return resp

    @router.post("/logout")
    def logout(request: Request) -> Response:
        try:
            _same_origin(request, srv.origins)
        except EvalgateError as e:
            return _error(e)
        srv.logout(request.cookies.get(COOKIE))
        resp = RedirectResponse("/login", status_code=303, headers=_HEADERS)
        resp.delete_cookie(COOKIE, httponly=True, samesite="strict", path="/")
        return resp

    return router


def _rating_routes(srv: _Served) -> APIRouter:
    """The rater's pages: ``/`` (batches and progress), ``/batch/{id}`` (one blind sample at a time) and its
    form post ``/batch/{id}/rate``."""
    router, st = APIRouter(), srv.store

    @router.get("/")
    def home(request: Request) -> Response:
        def show(r: rating.Rater) -> Response:
            rows = [{**b.as_dict(), **rating.queue(st, b.batch_id, r.name)} for b in st.batches()]
            return _page("home.html.j2", rater=r, batches=rows)
        return srv.guarded(request, False, show)

    @router.get("/batch/{batch_id}")
    def rate_page(request: Request, batch_id: str, notice: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            b = rating.batch(st, batch_id)
            q = rating.queue(st, batch_id, r.name)
            if q["next"] is None:
                return _page("done.html.j2", rater=r, batch=b, q=q)
            view = rating.view_sample(st, b, r.name, q["next"].sample_key)
            return _page("rate.html.j2", rater=r, batch=b, q=q, view=view, notice=notice[:200],
                         note_max=rating.NOTE_MAX_CHARS, form_token=rating.issue_form_token(st, r.name),
                         scores=list(range(b.scale_min, b.scale_max + 1)))
        return srv.guarded(request, False, show)

    @router.post("/batch/{batch_id}/rate")
    async def rate_submit(request: Request, batch_id: str) -> Response:
        # the store work is synchronous: run it in the thread pool like the other pages
        try:
            await run_in_threadpool(srv.admitted, request)
            form = await _read_form(request, MAX_FORM_BYTES)
        except EvalgateError as e:
            return _error(e)

        def store_it(r: rating.Rater) -> Response:
            res = rating.submit(st, r.name, batch_id, form.get("form_token", ""), form.get("sample", ""),
                                form.get("score"), form.get("note"))
            note = "skipped" if res["action"] == "skipped" else f"{res['action']}: {int(res['score'])}"
            return RedirectResponse(f"/batch/{batch_id}?notice={note}", status_code=303, headers=_HEADERS)
        return await run_in_threadpool(srv.guarded, request, False, store_it)

    return router


def _run_view(st: Store, r: rating.Rater, run_id: str) -> Response:
    """``/dashboard/runs/{run_id}``: per-item outputs are a read of the split, checked and logged first."""
    from evalgate.splits.guard import SplitManager

    runs = st.runs(run_id=run_id)
    if not runs:
        raise BadInput(f"unknown run {run_id!r}")
    manager = SplitManager(st)
    manifest, _ = manager.check(runs[0].split, "dashboard", r.name, protocol_hash=runs[0].protocol_hash,
                                checkpoint_digest=runs[0].checkpoint_digest)
    manager.log_read(manifest, r.name, "dashboard", cached=True, run_id=run_id,
                     checkpoint_digest=runs[0].checkpoint_digest, protocol_hash=runs[0].protocol_hash)
    return _page("run.html.j2", rater=r, run=runs[0], samples=st.samples(run_id))


def _admin_routes(srv: _Served) -> APIRouter:
    """The admin pages (read-only): ``/agreement`` and ``/dashboard/runs``, ``/dashboard/runs/{id}``,
    ``/dashboard/gates``, ``/dashboard/access``."""
    router, st = APIRouter(), srv.store

    @router.get("/agreement")
    def agreement_page(request: Request) -> Response:
        from evalgate.human.agreement import agreement_by_checkpoint

        return srv.guarded(request, True, lambda r: _page("agreement.html.j2", rater=r,
                                                          runs=agreement_by_checkpoint(st)))

    @router.get("/dashboard/runs")
    def runs_page(request: Request, protocol: str = "", split: str = "", status: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            where = {k: v for k, v in (("protocol_name", protocol), ("split", split), ("status", status)) if v}
            return _page("runs.html.j2", rater=r, runs=list(reversed(st.runs(**where))),
                         filters={"protocol": protocol, "split": split, "status": status})
        return srv.guarded(request, True, show)

    @router.get("/dashboard/runs/{run_id}")
    def run_page(request: Request, run_id: str) -> Response:
        return srv.guarded(request, True, lambda r: _run_view(st, r, run_id))

    @router.get("/dashboard/gates")
    def gates_page(request: Request) -> Response:
        return srv.guarded(request, True, lambda r: _page("gates.html.j2", rater=r,
                                                          rows=[_gate_cells(g) for g in st.recent_gates()]))

    @router.get("/dashboard/access")
    def access_page(request: Request, split: str = "") -> Response:
        def show(r: rating.Rater) -> Response:
            from evalgate.views.audit import audit_summary

            rows = st.access_rows(split or None)[-200:]
            return _page("access.html.j2", rater=r, summary=audit_summary(st, split or None).as_dict(), split=split,
                         rows=list(reversed(rows)))
        return srv.guarded(request, True, show)

    return router


def _gate_cells(gate: GateRow) -> dict[str, Any]:
    """A gate verdict's row of the dashboard's table: column -> value, JSON columns as the JSON text stored."""
    return {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in gate.as_dict().items()}


def create_app(store: Store, url: str = "http://127.0.0.1:8765") -> FastAPI:
    """The application over ``store`` (the workspace's), reached at ``url``: the login,
    rating and admin routes (one ``APIRouter`` each) over one shared store and request queue (``_Served``).

    Args:
        store: the store served.
        url: the address raters open (``http(s)://HOST:PORT``); a form whose ``Origin`` is not this address (or,
            for a loopback address, another loopback name of it) is refused.

    Raises:
        BadInput: ``url`` is not an address a browser can show as an origin (``own_origins``).
    """
    srv = _Served(store, own_origins(url))
    app = FastAPI(title="evalgate", docs_url=None, redoc_url=None, openapi_url=None)
    for routes in (_login_routes, _rating_routes, _admin_routes):
        app.include_router(routes(srv))
    return app


def serve(host: str = "127.0.0.1", port: int = 8765, *, store: Store, url: str | None = None) -> None:
    """Run the application with uvicorn until interrupted (``evalgate serve``).

    Args:
        host: the interface to bind; port: its TCP port.
        store: the store served (the workspace's).
        url: the address raters open, checked against every form's ``Origin`` (default ``http://HOST:PORT``;
            needed when ``host`` is a wildcard such as 0.0.0.0).

    Raises:
        BadInput: the address cannot be bound (in use, not an address of this machine, a privileged port) or
            ``url`` is not an origin (``own_origins``).
    """
    import socket

    import uvicorn

    app = create_app(store, url or f"http://{f'[{host}]' if ':' in host else host}:{port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:  # bound here, not inside uvicorn, which logs the error and exits 1 (or 3 through the CLI)
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {e.strerror or e}; is another server on that port? pick "
                       "another --port (or stop it)") from None
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
