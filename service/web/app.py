"""The Flask application factory."""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from flask import Flask, g
from werkzeug.middleware.proxy_fix import ProxyFix

from service.runtime import Runtime, default_runtime
from service.web.access import init_access
from service.web.admin.api import admin_api
from service.web.agent_work import agent_work_api
from service.web.admin.dashboard import admin_dashboard
from service.web.admin.importing import admin_import
from service.web.admin.canned import canned
from service.web.admin.desk import register_desk
from service.web.admin.inbox import inbox
from service.web.admin.learning import admin_learning
from service.web.admin.mail import admin_mail
from service.web.admin.pages import admin
from service.web.api import api, health
from service.web.attachments import attachments
from service.web.desk import desk_api
from service.web.errors import register_error_handlers
from service.web.gate import gate_api
from service.web.admin.gate_pages import admin_gate
from service.web.headers import add_security_headers
from service.web.help.brand import register_brand
from service.web.help.pages import help_pages, help_root
from service.web.inbound import inbound
from service.web.learning import learning_api
from service.web.limits import enforce_rate_limits
from service.web.mail import init_mail_views
from service.web.openapi import openapi, refuse_unknown_query_parameters
from service.web.requests import apply_request_cap, check_query_string
from service.web.tickets import tickets_api
from service.web.versions import versions_api
from service.web.admin.history import admin_history
from service.web.privacy import privacy_api
from service.web.article_drafts import drafts_api

log = logging.getLogger(__name__)

def create_app(test_config: dict[str, Any] | None = None, *, runtime: Runtime | None = None) -> Flask:
    """Build the app on ``runtime`` (default: the process-wide one from the environment)."""

    app = Flask(__name__)
    runtime = runtime or default_runtime()
    app.config.update(MAX_CONTENT_LENGTH=runtime.settings.max_request_bytes)
    app.json.sort_keys = False  # keep documented field order (Flask 3.1 ignores JSON_SORT_KEYS)
    app.before_request(apply_request_cap)  # first: the e-mail webhook and replies take more than the JSON APIs
    app.before_request(check_query_string)  # before access, so nothing below ever sees a NUL
    app.before_request(refuse_unknown_query_parameters)
    init_access(app, runtime.settings)  # every endpoint not declared public needs an admin (service/access.py)
    app.before_request(enforce_rate_limits)  # after access: admins are not limited
    app.after_request(add_security_headers)
    if runtime.settings.proxy_hops:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=runtime.settings.proxy_hops)  # type: ignore[method-assign]
    if test_config:
        app.config.update(test_config)
    app.extensions["supportrag"] = runtime
    app.register_blueprint(api)
    app.register_blueprint(tickets_api)
    app.register_blueprint(agent_work_api)
    app.register_blueprint(desk_api)
    app.register_blueprint(learning_api)
    app.register_blueprint(health)
    app.register_blueprint(admin_api)
    app.register_blueprint(admin)
    app.register_blueprint(admin_import)
    app.register_blueprint(admin_learning)
    app.register_blueprint(admin_dashboard)
    app.register_blueprint(inbox)
    app.register_blueprint(canned)
    app.register_blueprint(admin_mail)
    app.register_blueprint(help_pages)
    app.register_blueprint(help_root)
    app.register_blueprint(openapi)
    app.register_blueprint(inbound)
    init_mail_views(app)  # failed outgoing e-mail: retry API, workspace button, dashboard count
    app.register_blueprint(attachments)
    app.register_blueprint(gate_api)
    app.register_blueprint(admin_gate)
    register_desk(app)  # the one ticket list, team panel, settings, CSAT (issue 25 items 4-6)
    app.register_blueprint(versions_api)  # issue 36: article history
    app.register_blueprint(admin_history)
    app.register_blueprint(privacy_api)  # issue 36: customer export and erasure
    app.register_blueprint(drafts_api)  # issue 36: article drafts and trash
    register_brand(app)  # SUPPORTRAG_BRAND_*: the help center's name, colour and logo (issue 37)
    register_error_handlers(app)

    @app.teardown_appcontext
    def _close_session(exc: BaseException | None) -> None:
        session = g.pop("db", None)
        if session is None:
            return
        try:
            if exc is not None:
                session.rollback()
            session.close()
        except sa.exc.SQLAlchemyError as error:  # the server went away mid-request: the answer is already made
            log.warning("closing the request's database session failed: %s", type(error).__name__)
            session.invalidate()

    return app
