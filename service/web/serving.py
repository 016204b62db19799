"""Running the HTTP server: gunicorn in production, Flask's server with --dev."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

import json
from pathlib import Path

import click
from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker

from service.accounts import count_admins
from service.config import Settings
from service.intake.imap_poller import start_imap_poller
from service.knowledge.seeding import seeded_at
from service.links import base_url
from service.mail.worker import start_mail_worker, stop_mail_workers
from service.runtime import Runtime
from service.privacy.retention import start_retention_thread
from service.tickets.recovery import start_recovery_thread
from service.web.app import create_app


# The child that migrates, seeds and loads (first: exports) the local model for a gunicorn master.
_PREPARE_PROGRAM = "from service.web.serving import prepare_in_this_process; prepare_in_this_process()"


def prepare_in_this_process() -> None:
    """Migrate, seed on first run and load the local model (exporting it first if needed), then exit."""
    settings = Settings.from_env()
    runtime = Runtime.start(settings)
    if settings.embedding_provider == "local":
        runtime.embedder.embed(["warm up"])
    runtime.close()


def _prepare_in_child() -> None:
    """What loads the model, in a child process: gunicorn's master forks its workers, and a master that ran ONNX
    Runtime (or torch, to export) hands them thread pools that do not survive the fork: each worker then aborts
    on SIGTERM ("terminate called … std::system_error") and the master waits out the graceful timeout."""
    result = subprocess.run([sys.executable, "-c", _PREPARE_PROGRAM], check=False)
    if result.returncode != 0:
        raise click.ClickException(f"preparing the database and the model failed (exit {result.returncode})")


def _prepare(settings: Settings, *, in_child: bool = False) -> Runtime:
    """Start the embedded database if needed, migrate, seed; say where things are.

    ``in_child``: migrating, seeding and loading the model happen in a child process (gunicorn's master).
    """
    if in_child:
        _prepare_in_child()
    runtime = Runtime.start(settings, seed=False if in_child else None)
    if settings.database_url:
        click.echo(f"database: {runtime.engine.url.render_as_string(hide_password=True)}")
    else:
        click.echo(f"embedded PostgreSQL data directory: {settings.embedded_pgdata}")
    click.echo(f"embedding model: {runtime.embedder.model_name}")
    _explain_admin_setup(runtime)
    for line in mail_paths(settings):
        click.echo(line)
    _explain_seeded_defaults(runtime)
    return runtime


def mail_paths(settings: Settings) -> list[str]:
    """Which mail paths are on: outgoing SMTP, IMAP intake, the inbound webhook, and the links e-mails carry."""
    smtp = f"on ({settings.smtp_host}:{settings.smtp_port})" if settings.smtp_host else "off (no e-mail is sent)"
    imap = f"on ({settings.imap_host}, folder {settings.imap_folder})" if settings.imap_host else "off"
    webhook = "on (POST /api/inbound/email)" if settings.inbound_email_secret else "off"
    public = settings.public_url or f"unset: links use {base_url(settings)}"
    return [f"mail: SMTP {smtp}; IMAP {imap}; inbound webhook {webhook}", f"public URL for e-mail links: {public}"]


def _explain_seeded_defaults(runtime: Runtime) -> None:
    """Say when the five default articles were seeded, and how to remove them."""
    with runtime.session() as session:
        when = seeded_at(session)
    if when is not None:
        click.echo(f"default articles: seeded {when[:19].replace('T', ' ')} UTC; remove them with "
                   f"'{console_command()} seed --remove'")


def console_command() -> str:
    """How to run ``supportrag`` from any shell: the console script's full path, which needs no venv on PATH."""
    script = Path(sys.executable).parent / "supportrag"
    return str(script) if script.exists() else f"{sys.executable} -m service.cli.main"


def _explain_admin_setup(runtime: Runtime) -> None:
    """With no admin yet, say how to make one: there is deliberately no default account."""
    with runtime.session() as session:
        if count_admins(session):
            return
    click.echo(f"no admin account yet: create one with '{console_command()} admin create --username NAME' "
               "(it asks for a password), then log in at /admin/login")


THREADS_PER_WORKER = 4  # requests overlap their database waits; the embedder runs one at a time per thread
# One BLAS/OpenMP thread per worker: N workers × N torch threads on N cores would thrash.
# EMBEDDING_THREADS: ONNX Runtime's own pool (it ignores OMP_NUM_THREADS); one per worker, as for BLAS.
SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "EMBEDDING_THREADS")


@dataclass(frozen=True)
class ServerSize:
    """gunicorn workers × threads, and the database pool each worker needs for its threads."""

    workers: int
    threads: int
    pool_size: int


def size_server(*, cpus: int | None, workers: int | None = None, threads: int | None = None) -> ServerSize:
    """Defaults sized to the machine: a worker per core (embedding is CPU-bound and holds the GIL), a few
    threads each, and a pool as large as a worker's threads (each holds at most one connection)."""
    workers = workers or max(1, cpus or 1)
    threads = threads or THREADS_PER_WORKER
    return ServerSize(workers=workers, threads=threads, pool_size=threads)


def _configure_workers(size: ServerSize) -> None:
    """What the forked workers read from the environment (unless already set): pool size, one BLAS thread."""
    os.environ.setdefault("DATABASE_POOL_SIZE", str(size.pool_size))
    for name in SINGLE_THREAD_ENV:
        os.environ.setdefault(name, "1")


def _post_fork(_server, _worker) -> None:
    """A torch the master loaded before forking (seeding) keeps its thread count: make it one."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _worker_exit(_server, _worker) -> None:
    """A worker leaving (SIGTERM, a restart): its mail thread finishes or releases its send before the exit."""
    stop_mail_workers()


def serve_forever(*, host: str | None, port: int | None, dev: bool, workers: int | None,
                  threads: int | None) -> None:
    """Serve until interrupted; host and port default to SUPPORTRAG_HOST and PORT (see Settings)."""
    size = size_server(cpus=os.cpu_count(), workers=workers or Settings.from_env().web_concurrency, threads=threads)
    _configure_workers(size)
    settings = Settings.from_env()
    host = host or settings.host
    port = settings.port if port is None else port
    runtime = _prepare(settings, in_child=not dev)
    click.echo(f"serving on http://{host}:{port}  (help center: /help, admin: /admin, API: /api, "
               "health: /healthz)")
    if dev:
        # Exit through SystemExit on SIGTERM so atexit handlers detach from (and stop) the embedded server.
        signal.signal(signal.SIGTERM, lambda *_: (stop_mail_workers(), sys.exit(0)))
        start_mail_worker(runtime)
        start_imap_poller(runtime)
        start_recovery_thread(runtime, interval_seconds=RECOVERY_INTERVAL_SECONDS)  # as each gunicorn worker does
        create_app(runtime=runtime).run(host=host, port=port, debug=False, use_reloader=False)
        return
    # Workers build their own runtime after fork; the master's pool must not be shared with them.
    runtime.close()
    click.echo(f"gunicorn: {size.workers} workers × {size.threads} threads, "
               f"database pool {settings.database_pool_size} per worker")
    _run_gunicorn(host=host, port=port, workers=size.workers, threads=size.threads)


# The access log names the path only: a query string may hold a ticket's secret link (?key=…), never logged.
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)ss'


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's answer to a request it cannot parse (bad header, line too long), in the one JSON error shape.

    The message is the reason only: gunicorn's detail can quote what the client sent.
    """
    code = reason.lower().replace(" ", "_")
    body = json.dumps({"error": {"code": code, "message": f"{reason}: the request could not be read",
                                 "details": {}}}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Content-Type-Options: nosniff\r\n\r\n").encode("latin-1")
    gunicorn_util.write_nonblock(sock, head + body)


class JsonErrorWorker(ThreadWorker):
    """gunicorn's threaded worker, answering unparseable requests in JSON rather than its HTML page."""

    def init_process(self) -> None:
        # gunicorn writes those answers through util.write_error, which it offers no setting for; this worker
        # process replaces it for itself (the master and other programs keep gunicorn's).
        gunicorn_util.write_error = write_json_error
        super().init_process()


RECOVERY_INTERVAL_SECONDS = 60  # how often each worker looks for tickets a dead worker left unanswered


def load_app():
    """The app for one worker, with the local model loaded now: the first request must not wait for it."""
    app = create_app()
    runtime = app.extensions["supportrag"]
    if runtime.settings.embedding_provider == "local":
        runtime.embedder.embed(["warm up"])
        click.echo(f"worker {os.getpid()} ready: local embedding model loaded", err=True)
    start_recovery_thread(runtime, interval_seconds=RECOVERY_INTERVAL_SECONDS)
    start_retention_thread(runtime)  # issue 36: raw mail and solved tickets past their retention
    return app


def _run_gunicorn(*, host: str, port: int, workers: int, threads: int) -> None:
    """Serve the app under gunicorn's threaded workers."""
    class _Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in {
                "bind": f"{host}:{port}", "workers": workers, "threads": threads,
                "worker_class": "service.web.serving.JsonErrorWorker", "timeout": 120, "accesslog": "-",
                "access_log_format": ACCESS_LOG_FORMAT,
                # One shared control socket per user would clash between two services.
                "control_socket_disable": True, "post_fork": _post_fork, "worker_exit": _worker_exit,
            }.items():
                if key in self.cfg.settings:  # control_socket_disable is new in gunicorn 27
                    self.cfg.set(key, value)

        def load(self):
            # In each worker, after the fork: every worker runs a mail thread and an IMAP poller; advisory locks
            # let one send and one fetch.
            app = load_app()
            start_mail_worker(app.extensions["supportrag"])
            start_imap_poller(app.extensions["supportrag"])
            return app

    _Application().run()
