"""Issue 33 item 5: a model export that belongs to no worker (a child process under a file lock, an atomic
manifest, clean after a killed run), and a first ``serve`` that stops on SIGTERM like any later one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from service.providers import onnx_model
from service.providers.onnx_model import (
    DATA_FILE,
    GRAPH_FORMAT,
    INT8_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    ensure_model,
    model_folder,
    verified_model,
)

from .test_serve import SUPPORTRAG, free_port, server_env, wait_until_healthy

# A stand-in for the real export (which takes a minute of CPU): counts its runs, takes a while, writes files and a
# manifest that verify, in the same order as the real one.
FAKE_EXPORT = """
import hashlib, json, sys, time
from pathlib import Path
from service.providers.onnx_model import *
from service.providers.onnx_model import _remove_stale_staging
folder = model_folder(Path(sys.argv[1]))
_remove_stale_staging(folder)
with open(folder / "runs", "a") as runs:
    runs.write("run\\n")
time.sleep(0.5)
digests = {}
for name in (MODEL_FILE, DATA_FILE, INT8_FILE):
    (folder / name).write_bytes(name.encode())
    digests[name] = hashlib.sha256(name.encode()).hexdigest()
(folder / MANIFEST_FILE).write_text(json.dumps({"format": GRAPH_FORMAT, "sha256": digests[MODEL_FILE],
    "data_sha256": digests[DATA_FILE], "int8_sha256": digests[INT8_FILE]}))
"""


def test_processes_starting_together_export_once_in_a_child_and_clean_a_killed_run(monkeypatch, tmp_path):
    monkeypatch.setattr(onnx_model, "_EXPORT_PROGRAM", FAKE_EXPORT)
    folder = model_folder(tmp_path)
    (folder / ".export-4242").mkdir(parents=True)  # what a killed export left
    (folder / ".export-4242" / "traced.onnx").write_bytes(b"half")
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(ensure_model(tmp_path))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [folder / MODEL_FILE] * 4
    assert (folder / "runs").read_text() == "run\n"  # one export; the others waited on the lock, then found it
    assert not list(folder.glob(".export-*"))
    assert verified_model(tmp_path) == folder / MODEL_FILE and verified_model(tmp_path, "int8") == folder / INT8_FILE


def test_a_failed_export_is_an_error_not_a_half_model(monkeypatch, tmp_path):
    monkeypatch.setattr(onnx_model, "_EXPORT_PROGRAM", "import sys; sys.exit(3)")
    with pytest.raises(onnx_model.ModelExportError, match="exited with 3"):
        ensure_model(tmp_path)
    assert verified_model(tmp_path) is None


def test_the_caller_never_imports_torch(tmp_path):
    program = ("import sys; from pathlib import Path; from service.providers import onnx_model; "
               f"onnx_model._EXPORT_PROGRAM = {FAKE_EXPORT + 'import torch'!r}; "
               "onnx_model.ensure_model(Path(sys.argv[1])); print('torch' in sys.modules)")
    result = subprocess.run([str(Path(SUPPORTRAG).parent / "python"), "-c", program, str(tmp_path)],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def _maps_torch(pid: int) -> bool:
    """Whether the process has a torch library mapped."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text(errors="replace")


def test_the_first_serve_exports_in_a_child_and_stops_on_sigterm_within_15_s(fresh_database_url, tmp_path):
    env = server_env(fresh_database_url, tmp_path) | {"SUPPORTRAG_MODEL_DIR": str(tmp_path / "models"),
                                                      "WEB_CONCURRENCY": "2"}
    port, log_path = free_port(), tmp_path / "server.log"
    with open(log_path, "wb") as log, subprocess.Popen([str(SUPPORTRAG), "serve", "--port", str(port)], env=env,
                                                       stdout=log, stderr=subprocess.STDOUT) as process:
        try:
            wait_until_healthy(process, f"http://127.0.0.1:{port}", log_path)
            assert not _maps_torch(process.pid), "gunicorn's master loaded torch"
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            status = process.wait(timeout=15)
            stopped_in = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
    output = log_path.read_text(errors="replace")
    assert status == 0 and stopped_in < 15, output
    assert "terminate called" not in output and "SIGABRT" not in output and "was terminated" not in output, output
    assert "exporting all-MiniLM-L6-v2" in output
    folder = model_folder(tmp_path / "models")
    assert json.loads((folder / MANIFEST_FILE).read_text())["format"] == GRAPH_FORMAT
    assert not list(folder.glob(".export-*"))
    assert all(os.stat(folder / name).st_mode & 0o044 == 0o044 for name in (MODEL_FILE, DATA_FILE, INT8_FILE))
