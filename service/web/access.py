"""Who may call what: the access policy, bearer tokens, session logins, CSRF, the cookie's signing key."""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
from dataclasses import dataclass

from flask import Flask, Response, current_app, g, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from sqlalchemy.exc import SQLAlchemyError

from service.accounts import (
    Admin,
    end_all_sessions,
    end_session,
    load_secret_key,
    session_admin,
    start_session,
    token_identity,
)
from service.web.errors import ApiError, error_response, is_page

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD, CSRF_HEADER = "csrf_token", "X-CSRF-Token"

# Every endpoint not listed here needs an admin, so a new endpoint is private until someone decides otherwise.
PUBLIC_ENDPOINTS = frozenset({
    "static", "health.healthz", "admin.login",
    # The help-center content and its counts hold nothing private.
    "api.articles_index", "api.articles_show", "api.stats",
    # The customer's help center: articles, and a ticket page that checks the ticket's own secret.
    "help_root.root", "help.index", "help.articles", "help.article", "help.ticket",
    # The API's own description.
    "openapi.spec", "openapi.docs",
    # Inbound e-mail from the mail server: authenticated by its HMAC signature, not by an account.
    "inbound.email",
    # A customer's attachment: the view checks the ticket's secret (cookie or X-Ticket-Secret), as its page does.
    "attachments.customer_download",
    # The help center's brand: its colour as a style sheet, its logo.
    "help_brand.style", "help_brand.logo",
    # The chat widget's script and iframe page (framing is limited by WIDGET_ALLOWED_ORIGINS, not by a login).
    "widget.loader", "widget.frame",
})
# Public unless the named setting is turned off (SUPPORTRAG_PUBLIC_SEARCH / SUPPORTRAG_PUBLIC_TICKETS).
TOGGLED_ENDPOINTS = {
    "api.search": "public_search",
    "tickets_api.tickets_create": "public_tickets",
    "tickets_api.tickets_feedback": "public_tickets",  # the customer who asked rates the answer
    "help.ask": "public_tickets", "help.solved": "public_tickets", "help.escalate": "public_tickets",
    "help.follow_up": "public_tickets",
    # The customer rates a solved ticket (its secret, or the reply token of the solve e-mail's link).
    "desk_api.rating": "public_tickets", "help_rating.rate_page": "public_tickets", "help_rating.rate": "public_tickets",
    # The chat widget's API: each call but the first carries the visitor's signed token (service/widget).
    "widget.session_start": "public_tickets", "widget.ask": "public_tickets", "widget.messages": "public_tickets",
    "widget.handoff": "public_tickets", "widget.feedback": "public_tickets",
}


# Roles: an admin may do everything; an agent works tickets and reads the knowledge base. Writes are denied to
# agents unless listed here, so a new write endpoint is admin-only until someone decides otherwise.
AGENT_WRITE_ENDPOINTS = frozenset({
    "admin.logout", "admin_api.preview",
    "tickets_api.tickets_replies", "tickets_api.tickets_assign", "tickets_api.tickets_feedback",
    "mail_api.retry", "inbox_mail.retry",  # an agent sends a failed e-mail of their ticket again
    # Issue 25: an agent ends their own sessions, and saves the reply they are typing.
    "admin.logout_everywhere", "agent_work_api.composer_save",
    "desk_api.tags", "desk_api.bulk", "desk_api.presence_beat", "desk_api.presence_leave",
    "gate_api.review",  # issue 34: an agent labels the AI's answer from the review queue
    "tickets_api.tickets_draft_create",  # issue 33: reading a draft never writes; an agent makes one by POST
})
AGENT_WRITE_PREFIXES = ("inbox.", "desk.")  # the agent inbox's forms, the ticket list's and the settings page
ADMIN_ONLY_ENDPOINTS = frozenset({"admin.article_new", "admin_import.upload"})  # pages that only lead to a write
# A customer's whole record is for admins, even to read (issue 36).
ADMIN_ONLY_ENDPOINTS |= {"privacy_api.customer_export"}


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: a logged-in admin (``session``) or a script (``token``), with a role."""

    kind: str
    id: int
    name: str
    role: str = "admin"


def role_allows(role: str, endpoint: str, method: str) -> bool:
    """Whether an account or token with ``role`` may call ``endpoint`` with ``method``."""
    if role == "admin":
        return True
    if endpoint in ADMIN_ONLY_ENDPOINTS:
        return False
    return method in SAFE_METHODS or endpoint in AGENT_WRITE_ENDPOINTS or endpoint.startswith(AGENT_WRITE_PREFIXES)


def may(endpoint: str, method: str = "POST") -> bool:
    """For templates: whether the caller's role may use ``endpoint`` (so agents never see an admin-only button)."""
    identity = g.get("identity")
    return identity is not None and role_allows(identity.role, endpoint, method)


def is_public(endpoint: str, settings) -> bool:
    """Whether anonymous callers may use ``endpoint`` under these settings."""
    if endpoint in PUBLIC_ENDPOINTS:
        return True
    flag = TOGGLED_ENDPOINTS.get(endpoint)
    return flag is not None and bool(getattr(settings, flag))


def is_form_page(path: str) -> bool:
    """Pages whose forms must echo the CSRF token: the admin and the customer's help center."""
    return is_page(path) or path == "/help" or path.startswith("/help/")


class DatabaseKeySessionInterface(SecureCookieSessionInterface):
    """Signed-cookie sessions whose key comes from the settings or app_state, loaded once per process.

    The key is fetched when a request starts, in its own committed unit of work, before the
    request's session exists. If the database is down then, the request gets an empty session
    and carries on, so /healthz can still report the outage in the error shape.
    """

    _lock = threading.Lock()

    def _ensure_key(self, app: Flask) -> None:
        if app.secret_key:
            return
        with self._lock:
            if not app.secret_key:
                with app.extensions["supportrag"].session() as db_session:
                    app.secret_key = load_secret_key(db_session)

    def open_session(self, app: Flask, request):
        try:
            self._ensure_key(app)
        except SQLAlchemyError:
            log.warning("session key unavailable (database down?); continuing without a session", exc_info=True)
            return self.session_class()
        return super().open_session(app, request)

    def get_signing_serializer(self, app: Flask):
        self._ensure_key(app)
        return super().get_signing_serializer(app)


def csrf_token() -> str:
    """This session's CSRF token, created on first use (forms and the admin JS send it back)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """403 unless the request echoes the session's CSRF token in a form field or header."""
    expected = session.get("csrf")
    sent = request.headers.get(CSRF_HEADER) or request.form.get(CSRF_FIELD)
    if not expected or not sent or not hmac.compare_digest(expected.encode(), sent.encode()):
        raise ApiError(403, "csrf_failed", "missing or invalid CSRF token; reload the page and try again")


def log_in(admin: Admin) -> None:
    """Start a fresh server-side session for ``admin``: the cookie holds only its key (and a new CSRF token)."""
    settings = current_app.extensions["supportrag"].settings
    key = _lookup(start_session, admin, lifetime_seconds=settings.session_lifetime_seconds)
    session.clear()
    session.permanent = True
    session.update(sid=key, admin_name=admin.username)
    csrf_token()


def log_out() -> None:
    """End this session on the server (copies of the cookie stop working too), then forget it here."""
    key = session.get("sid")
    if isinstance(key, str):
        _lookup(end_session, key)
    session.clear()


def log_out_everywhere(identity: Identity) -> int:
    """End every session of the logged-in admin (every browser); returns how many were open."""
    ended = _lookup(end_all_sessions, identity.id)
    session.clear()
    return ended


def _lookup(function, *args, **kwargs):
    """Run an identity lookup in its own short unit of work, finished before the view starts.

    Using the request's session here would open its transaction before the view runs and keep
    it open across slow work, e.g. answering a ticket, which commits in steps around an LLM call.
    """
    with current_app.extensions["supportrag"].session() as db_session:
        return function(db_session, *args, **kwargs)


def _token_caller() -> Identity | None:
    """The token's identity for ``Authorization: Bearer …``; 401 if one is sent but unknown or revoked."""
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None  # other schemes (e.g. a proxy's Basic auth) are not ours to judge
    token = _lookup(token_identity, secret.strip()) if secret.strip() else None
    if token is None:
        raise ApiError(401, "invalid_token", "the API token is unknown or revoked")
    return Identity("token", token.id, token.name, token.role)


def _session_caller() -> Identity | None:
    """The logged-in admin, while the server-side session lives: not logged out (here or everywhere), not idle
    past the timeout, not past its lifetime, the admin not deleted and their password unchanged."""
    key = session.get("sid")
    if not isinstance(key, str):
        return None
    idle = current_app.extensions["supportrag"].settings.session_idle_seconds
    admin = _lookup(session_admin, key, idle_seconds=idle)
    if admin is None:
        session.clear()
        return None
    return Identity("session", admin.id, admin.username, admin.role)


def _login_redirect() -> Response:
    target = request.full_path if request.query_string else request.path
    return redirect(url_for("admin.login", next=target))


def enforce_access() -> Response | None:
    """Before every request: apply the policy, then CSRF for cookie-authenticated writes."""
    endpoint = request.endpoint
    if endpoint is None:
        return None  # unrouted: 404/405 in the usual shape
    caller = _token_caller()
    unsafe = request.method not in SAFE_METHODS
    page = is_page(request.path)
    if is_form_page(request.path) and unsafe and caller is None:
        check_csrf()  # every form, the login form and the help center's included
    if is_public(endpoint, current_app.extensions["supportrag"].settings):
        if caller is None and (caller := _session_caller()) is not None and unsafe and not page:
            check_csrf()  # a cookie-authenticated write to a public endpoint counts as the admin's: it needs CSRF
        g.identity = caller
        return None
    caller = caller or _session_caller()
    if caller is None:
        if page:
            return _login_redirect()
        response = error_response(401, "unauthorized",
                                  "this endpoint needs an admin: log in or send 'Authorization: Bearer <token>'")
        response.headers["WWW-Authenticate"] = 'Bearer realm="supportrag"'
        return response
    if unsafe and caller.kind == "session" and not page:
        check_csrf()  # the admin pages' JavaScript calls the JSON API with the cookie
    g.identity = caller
    if not role_allows(caller.role, endpoint, request.method):
        raise ApiError(403, "forbidden", f"this needs the admin role; {caller.name!r} is an {caller.role}")
    return None


def init_access(app: Flask, settings) -> None:
    """Cookie flags, the session key and the policy hook."""
    app.config.update(
        SESSION_COOKIE_NAME="supportrag_session", SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.secure_cookies, PERMANENT_SESSION_LIFETIME=settings.session_lifetime_seconds,
    )
    if settings.secret_key:
        app.secret_key = settings.secret_key
    app.session_interface = DatabaseKeySessionInterface()
    app.before_request(enforce_access)
    app.jinja_env.globals["csrf_token"] = csrf_token
    app.jinja_env.globals["may"] = may
