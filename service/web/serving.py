"""Running the HTTP server: gunicorn in production, Flask's server with --dev."""

from __future__ import annotations

import signal
import sys

import click
from gunicorn.app.base import BaseApplication

from service.accounts import count_admins
from service.config import Settings
from service.runtime import Runtime
from service.web.app import create_app


def _prepare(settings: Settings) -> Runtime:
    """Start the embedded database if needed, migrate, seed; say where things are."""
    runtime = Runtime.start(settings)
    if settings.database_url:
        click.echo(f"database: {runtime.engine.url.render_as_string(hide_password=True)}")
    else:
        click.echo(f"embedded PostgreSQL data directory: {settings.embedded_pgdata}")
    click.echo(f"embedding model: {runtime.embedder.model_name}")
    _explain_admin_setup(runtime)
    return runtime


def _explain_admin_setup(runtime: Runtime) -> None:
    """With no admin yet, say how to make one: there is deliberately no default account."""
    with runtime.session() as session:
        if count_admins(session):
            return
    click.echo("no admin account yet: create one with 'supportrag admin create --username NAME' "
               "(it asks for a password), then log in at /admin/login")


def serve_forever(*, host: str | None, port: int | None, dev: bool, workers: int, threads: int) -> None:
    """Serve until interrupted; host and port default to SUPPORTRAG_HOST and PORT (see Settings)."""
    settings = Settings.from_env()
    host = host or settings.host
    port = settings.port if port is None else port
    runtime = _prepare(settings)
    click.echo(f"serving on http://{host}:{port}  (API: /api, health: /healthz)")
    if dev:
        # Exit through SystemExit on SIGTERM so atexit handlers detach from (and stop) the embedded server.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        create_app(runtime=runtime).run(host=host, port=port, debug=False, use_reloader=False)
        return
    # Workers build their own runtime after fork; the master's pool must not be shared with them.
    runtime.close()
    _run_gunicorn(host=host, port=port, workers=workers, threads=threads)


def _run_gunicorn(*, host: str, port: int, workers: int, threads: int) -> None:
    """Serve the app under gunicorn's threaded workers."""
    class _Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in {
                "bind": f"{host}:{port}", "workers": workers, "threads": threads,
                "worker_class": "gthread", "timeout": 120, "accesslog": "-",
                # One shared control socket per user would clash between two services.
                "control_socket_disable": True,
            }.items():
                if key in self.cfg.settings:  # control_socket_disable is new in gunicorn 27
                    self.cfg.set(key, value)

        def load(self):
            return create_app()

    _Application().run()
