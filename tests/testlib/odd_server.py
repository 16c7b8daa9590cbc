"""A real OpenAI-compatible HTTP server that misbehaves on request, standing in for a broken external endpoint.

The prompt text selects the behaviour: ``EMPTY`` → empty content, ``HUGE`` → 3 MB of text, ``BADUTF8`` → invalid
UTF-8 bytes in the body, ``HTTP500`` → server error; anything else is echoed back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, json.dumps({"object": "list", "data": [{"id": "odd"}]}).encode())

    def do_POST(self) -> None:  # noqa: N802
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = json.dumps(req["messages"])
        if "BADUTF8" in prompt:
            self._send(200, b'{"choices": [{"message": {"content": "\xff\xfe\xfa"}, "finish_reason": "stop"}]}')
            return
        if "HTTP500" in prompt:
            self._send(500, b'{"error": "boom"}')
            return
        text = "" if "EMPTY" in prompt else ("x" * 3_000_000 if "HUGE" in prompt else f"echo {prompt[:40]}")
        body = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": max(1, len(text) // 4)}}  # fmt: skip
        self._send(200, json.dumps(body).encode())


@contextmanager
def odd_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.shutdown()
        srv.server_close()
