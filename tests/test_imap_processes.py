"""IMAP intake as real processes: ``mail fetch`` killed with SIGKILL mid-fetch and restarted, and ``serve``
fetching by itself while a second fetcher stands aside (one per deployment)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from imapclient import IMAPClient

from service.db.engine import create_engine

from .test_imap import build_message, message_id
from .test_serve import SUPPORTRAG, free_port, server_env, stop, wait_until_healthy

MESSAGES = 20
TIMEOUT_SECONDS = 180


def imap_env(env: dict[str, str], dovecot, folder: str, embeddings_url: str) -> dict[str, str]:
    """``env`` pointed at the test's folder on the loopback Dovecot, polling every second; embeddings come from
    the fake OpenAI server, so that each process starts in a second rather than loading MiniLM."""
    return {**env, "EMBEDDING_BASE_URL": embeddings_url, "IMAP_HOST": dovecot.host, "IMAP_PORT": str(dovecot.port), "IMAP_USERNAME": dovecot.username,
            "IMAP_PASSWORD": dovecot.password, "IMAP_TLS": "false", "IMAP_FOLDER": folder,
            "IMAP_POLL_SECONDS": "1", "SUPPORTRAG_AUTO_SEED": "0"}


def fill_folder(dovecot, subjects: list[str]) -> tuple[str, list[str]]:
    """A new folder holding one message per subject; returns its name and the Message-IDs."""
    folder = f"support-{uuid.uuid4().hex[:8]}"
    client = IMAPClient(dovecot.host, port=dovecot.port, ssl=False, timeout=10)
    client.login(dovecot.username, dovecot.password)
    client.create_folder(folder)
    raws = [build_message(subject) for subject in subjects]
    for raw in raws:
        client.append(folder, raw)
    client.logout()
    return folder, [message_id(raw) for raw in raws]


def email_message_ids(engine: sa.Engine) -> list[str]:
    """Every stored e-mail Message-ID, one per thread message (an empty list before the schema exists)."""
    try:
        with engine.connect() as connection:
            return list(connection.scalars(sa.text(
                "SELECT email_message_id FROM ticket_messages WHERE email_message_id IS NOT NULL")))
    except sa.exc.DBAPIError:  # the process is still migrating the new database
        return []


def wait_for(predicate, process: subprocess.Popen, log_path: Path, what: str) -> None:
    """Poll until ``predicate()``; fail with the process's output if it exits or time runs out."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"{what}: the process exited with {process.returncode}:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {TIMEOUT_SECONDS}s:\n{log_path.read_text()}")
        time.sleep(0.02)


def test_kill_9_during_a_fetch_then_a_restart_makes_every_ticket_exactly_once(fresh_database_url, dovecot,
                                                                             fake_openai, tmp_path):
    folder, ids = fill_folder(dovecot, [f"Question number {n}" for n in range(MESSAGES)])
    env = imap_env(server_env(fresh_database_url, tmp_path), dovecot, folder, fake_openai.base_url)
    engine = create_engine(fresh_database_url, pool_size=1)
    log_path = tmp_path / "fetch.log"
    try:
        with open(log_path, "wb") as log, subprocess.Popen([str(SUPPORTRAG), "-v", "mail", "fetch"], env=env,
                                                           stdout=log, stderr=subprocess.STDOUT) as process:
            try:
                wait_for(lambda: len(email_message_ids(engine)) >= 3, process, log_path, "the first tickets")
                process.send_signal(signal.SIGKILL)
            finally:
                process.kill()
        assert process.returncode == -signal.SIGKILL
        before = len(email_message_ids(engine))
        taken_before = log_path.read_text().count("IMAP message UID")
        assert 3 <= before < MESSAGES, "the kill must land in the middle of the fetch"
        restart = subprocess.run([str(SUPPORTRAG), "mail", "fetch", "--once"], env=env, capture_output=True,
                                 text=True, timeout=TIMEOUT_SECONDS)
        assert restart.returncode == 0, restart.stderr
        report = json.loads(restart.stdout)
        stored = email_message_ids(engine)
    finally:
        engine.dispose()
    assert sorted(stored) == sorted(ids)  # every message, each in one ticket: none lost, none twice
    assert report["outcomes"].get("new_ticket", 0) == MESSAGES - before
    print(f"IMAP across kill -9: {MESSAGES} messages; killed after {before} tickets ({taken_before} recorded as "
          f"taken); the restart fetched {report['fetched']} ({report['outcomes']}); tickets made: {len(stored)}")


def test_serve_fetches_by_itself_and_a_second_fetcher_stands_aside(fresh_database_url, dovecot, fake_openai,
                                                                    tmp_path):
    folder, ids = fill_folder(dovecot, ["Asked while serve runs"])
    env = imap_env(server_env(fresh_database_url, tmp_path), dovecot, folder, fake_openai.base_url)
    engine = create_engine(fresh_database_url, pool_size=1)
    port, log_path = free_port(), tmp_path / "server.log"
    try:
        with open(log_path, "wb") as log, subprocess.Popen(
                [str(SUPPORTRAG), "serve", "--port", str(port), "--workers", "1", "--threads", "2"], env=env,
                stdout=log, stderr=subprocess.STDOUT) as process:
            try:
                wait_until_healthy(process, f"http://127.0.0.1:{port}", log_path)
                wait_for(lambda: email_message_ids(engine) == ids, process, log_path, "the e-mail's ticket")
                second = subprocess.run([str(SUPPORTRAG), "mail", "fetch", "--once"], env=env, capture_output=True,
                                        text=True, timeout=TIMEOUT_SECONDS)
            finally:
                stop(process)
        assert second.returncode == 0 and "another process is fetching" in second.stderr, second.stderr
    finally:
        engine.dispose()
