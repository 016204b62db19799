"""A small OpenAI-compatible HTTP server for tests: real wire format on 127.0.0.1.

It implements ``POST /v1/embeddings`` (deterministic vectors derived from the
text) and ``POST /v1/chat/completions`` and records every request. Tests can
queue failures: ``server.fail_next(status, times)``, ``server.stall_next(seconds,
times)`` or ``server.malformed_next(times)``. ``state.chat_reply`` is the
assistant's text, or a callable that receives the request body and returns it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import numpy as np


def text_vector(text: str, dimensions: int) -> list[float]:
    """A unit vector seeded by the text: equal texts, equal vectors; different texts, nearly orthogonal."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).standard_normal(dimensions)
    return (vector / np.linalg.norm(vector)).round(7).tolist()


@dataclass
class _Fault:
    kind: str  # "status" | "stall" | "malformed"
    value: float = 0
    times: int = 1


@dataclass
class FakeOpenAIState:
    """What the server received and what it should do next."""

    requests: list[dict] = field(default_factory=list)
    faults: list[_Fault] = field(default_factory=list)
    native_dimensions: int = 1536
    # The assistant's text, or a function of the request body that returns it.
    chat_reply: str | Callable[[dict], str] = "Please follow the steps in the article [1]."
    # ``stream=True`` requests: the reply in word-sized chunks, this many seconds apart (the model "thinking").
    stream_delay: float = 0.0
    stream_finished_at: list[float] = field(default_factory=list)  # perf_counter() when each stream ended
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_fault(self) -> _Fault | None:
        with self.lock:
            if not self.faults:
                return None
            fault = self.faults[0]
            fault.times -= 1
            if fault.times <= 0:
                self.faults.pop(0)
            return fault


class _Handler(BaseHTTPRequestHandler):
    server: "FakeOpenAIServer"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, status: int, payload: dict | str) -> None:
        body = payload if isinstance(payload, str) else json.dumps(payload)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        state = self.server.state
        with state.lock:
            state.requests.append({"path": self.path, "body": body,
                                   "authorization": self.headers.get("Authorization")})
        fault = state.take_fault()
        if fault and fault.kind == "stall":
            time.sleep(fault.value)
        if fault and fault.kind == "status":
            self._send(int(fault.value), {"error": {"message": "injected failure", "type": "server_error"}})
            return
        if fault and fault.kind == "malformed":
            self._send(200, "{not json")
            return
        if self.path.endswith("/embeddings"):
            self._embeddings(body)
        elif self.path.endswith("/chat/completions"):
            self._chat(body)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _embeddings(self, body: dict) -> None:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = body.get("dimensions") or self.server.state.native_dimensions
        data = [{"object": "embedding", "index": i, "embedding": text_vector(text, dims)}
                for i, text in enumerate(inputs)]
        data.reverse()  # the API does not promise order; clients must use "index"
        tokens = sum(len(text.split()) for text in inputs)
        self._send(200, {"object": "list", "data": data, "model": body["model"],
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _chat(self, body: dict) -> None:
        reply = self.server.state.chat_reply
        if callable(reply):
            reply = reply(body)
        if body.get("stream"):
            self._stream(body, reply)
            return
        self._send(200, {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        })


    def _stream_chunk(self, model: str, delta: dict, finish: str | None = None) -> None:
        chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()

    def _stream(self, body: dict, reply: str) -> None:
        """The OpenAI streaming wire format: server-sent chunks, then ``data: [DONE]``."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self._stream_chunk(body["model"], {"role": "assistant", "content": ""})
        for word in reply.split(" "):
            time.sleep(self.server.state.stream_delay)
            self._stream_chunk(body["model"], {"content": word + " "})
        self._stream_chunk(body["model"], {}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.server.state.stream_finished_at.append(time.perf_counter())
        self.close_connection = True


class FakeOpenAIServer(ThreadingHTTPServer):
    """Start with ``with FakeOpenAIServer() as server:``; ``server.base_url`` ends in /v1."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = FakeOpenAIState()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a stalled reply (its timeout) is expected; report anything else."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def fail_next(self, status: int, times: int = 1) -> None:
        self.state.faults.append(_Fault("status", status, times))

    def stall_next(self, seconds: float, times: int = 1) -> None:
        self.state.faults.append(_Fault("stall", seconds, times))

    def malformed_next(self, times: int = 1) -> None:
        self.state.faults.append(_Fault("malformed", 0, times))

    def embedding_requests(self) -> list[dict]:
        return [r for r in self.state.requests if r["path"].endswith("/embeddings")]

    def chat_requests(self) -> list[dict]:
        """Every chat-completion request received, failed or not, oldest first."""
        return [r for r in self.state.requests if r["path"].endswith("/chat/completions")]
