"""A real Dovecot IMAP server on 127.0.0.1, started from a generated configuration in a temporary folder.

Dovecot refuses to log users in as root: its login processes run as the package's ``dovenull``, its internal
processes as ``dovecot``, and the mail belongs to ``dovenull``'s uid (``first_valid_uid``). Without dovecot (a
developer machine) the tests that need it skip, unless SUPPORTRAG_REQUIRE_IMAP=1 (CI) makes them fail.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping

import pytest

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
DOVEADM = shutil.which("doveadm") or "/usr/bin/doveadm"
IMAP_SERVER = Path("/usr/lib/dovecot/imap")  # what dovecot-imapd adds to dovecot-core
REQUIRE_VARIABLE = "SUPPORTRAG_REQUIRE_IMAP"
INSTALL_HINT = ("dovecot is not installed (apt-get install dovecot-imapd) or cannot run as root here: the IMAP "
                f"tests need a real IMAP server on loopback; {REQUIRE_VARIABLE}=1 makes this a failure")
USERNAME, PASSWORD = "support", "imap-test-password"
START_TIMEOUT_SECONDS = 20

CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
first_valid_uid = {uid}
last_valid_uid = {uid}
mail_location = maildir:{root}/mail/%u
mail_uid = {uid}
mail_gid = {gid}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/users
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"""


def free_port() -> int:
    """A loopback TCP port nothing listens on now (test_serve has the same; importing it here would be a cycle
    through conftest)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dovecot_usable() -> bool:
    """Whether this machine can run the fixture: dovecot installed, running as root, and its users present."""
    try:
        pwd.getpwnam("dovenull"), pwd.getpwnam("dovecot")
    except KeyError:
        return False
    return os.path.exists(DOVECOT) and IMAP_SERVER.exists() and os.geteuid() == 0


def require_dovecot(usable: bool, environ: Mapping[str, str] = os.environ) -> None:
    """Skip (a developer machine) or fail (CI: SUPPORTRAG_REQUIRE_IMAP=1) when Dovecot cannot run here."""
    if usable:
        return
    if environ.get(REQUIRE_VARIABLE, "") not in ("", "0"):
        pytest.fail(INSTALL_HINT)
    pytest.skip(INSTALL_HINT)


class DovecotServer:
    """Dovecot on a fixed loopback port with one account; ``stop``/``start`` keep the port and the mail."""

    def __init__(self, *, tls: bool = False) -> None:
        self.tls = tls
        self.root = Path(tempfile.mkdtemp(prefix="supportrag-dovecot-")).resolve()
        self.port = free_port()
        self.host, self.username, self.password = "127.0.0.1", USERNAME, PASSWORD
        self._process: subprocess.Popen | None = None
        self._write_config()

    def _write_config(self) -> None:
        mail_user = pwd.getpwnam("dovenull")
        uid, gid = mail_user.pw_uid, mail_user.pw_gid
        self.root.chmod(0o755)  # dovenull and dovecot must reach the sockets and the mail under it
        for name in ("run", "state", "mail", "home"):
            (self.root / name).mkdir()
        for name in ("mail", "home"):
            os.chown(self.root / name, uid, gid)
        (self.root / "users").write_text(
            f"{USERNAME}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{self.root}/home::\n", encoding="utf-8")
        self.config = self.root / "dovecot.conf"
        ssl = self._make_certificate() if self.tls else "ssl = no"
        self.config.write_text(CONFIG.format(root=self.root, port=self.port, uid=uid, gid=gid, ssl=ssl),
                               encoding="utf-8")

    def _make_certificate(self) -> str:
        """A self-signed certificate for 127.0.0.1 (``certificate``: what a client must trust); the ssl lines."""
        self.certificate, key = self.root / "cert.pem", self.root / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                        "-out", str(self.certificate)], check=True, capture_output=True, timeout=60)
        return f"ssl = yes\nssl_cert = <{self.certificate}\nssl_key = <{key}"

    def start(self) -> "DovecotServer":
        """Run ``dovecot -F`` and wait until the port accepts connections."""
        self._process = subprocess.Popen([DOVECOT, "-F", "-c", str(self.config)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"dovecot exited with {self._process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"dovecot did not listen on {self.port} in {START_TIMEOUT_SECONDS}s:\n{self.log()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM to the master, which ends its children): connections are then refused."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._listening():
            time.sleep(0.05)

    def _listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def set_uidvalidity(self, folder: str, value: int) -> None:
        """Give ``folder`` a new UIDVALIDITY, as a restored or rebuilt mailbox has (doveadm mailbox update)."""
        subprocess.run([DOVEADM, "-c", str(self.config), "mailbox", "update", "-u", USERNAME,
                        "--uid-validity", str(value), folder], check=True, capture_output=True, timeout=30)

    def log(self) -> str:
        """What dovecot logged."""
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        """Stop and delete everything."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
