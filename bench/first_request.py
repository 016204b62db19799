"""The first search a `supportrag serve` worker answers on an already seeded database (issue 16, item 10).

    python bench/first_request.py [CODE_ROOT]     # CODE_ROOT: a checkout to run (default: this one)

A throwaway embedded PostgreSQL, seeded first (so serve's master loads no model before forking), one worker;
prints the first and the second search's latency after /healthz answers.
"""

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import temporary_postgres  # noqa: E402  (the repository root on the path first)
from tests.test_serve import free_port, server_env, stop, wait_until_healthy  # noqa: E402

code_root = sys.argv[1] if len(sys.argv) > 1 else str(ROOT)
with temporary_postgres("supportrag-test-", "first") as (url, _, root):
    env = server_env(url, root) | {"PYTHONPATH": code_root}
    subprocess.run([sys.executable, "-c", "from service.cli.main import main; main()", "seed"], env=env,
                   cwd=code_root, check=True, capture_output=True)  # seeded already: serve's master loads no model
    port, log_path = free_port(), root / "server.log"
    with open(log_path, "wb") as log, subprocess.Popen(
            [sys.executable, "-c", "from service.cli.main import main; main()", "serve", "--port", str(port),
             "--workers", "1"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=code_root) as process:
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_healthy(process, base, log_path)
            time.sleep(1)
            started = time.monotonic()
            request = urllib.request.Request(f"{base}/api/search", data=json.dumps({"query": "refund"}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()
            first = time.monotonic() - started
            started = time.monotonic()
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()
            print(f"{code_root}: first search {first:.2f} s, second {time.monotonic() - started:.2f} s")
        finally:
            stop(process)
