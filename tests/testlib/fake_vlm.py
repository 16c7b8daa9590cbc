"""A real OpenAI-compatible HTTP server that "sees": it answers from the pixels of the images it is sent.

SmolLM2 (the only GGUF here) is text-only, so llama-server rejects image parts. This stand-in records every request
body and answers the tiny_shapes questions by decoding each ``image_url`` data URI and naming the shape's colour (a
letter when the prompt lists options). A correct score therefore proves the image bytes crossed framework → Record →
pool → engine intact; a request without an image gets "no image".
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COLORS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 60, 220), "yellow": (230, 200, 20)}


def colour_of(data_uri: str) -> str:
    from PIL import Image

    img = Image.open(io.BytesIO(base64.b64decode(data_uri.split(",", 1)[1]))).convert("RGB")
    raw = img.tobytes()  # RGB triples; getdata() is deprecated in Pillow 13
    px = [p for p in (tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)) if p != (255, 255, 255)]
    mean = tuple(sum(c[i] for c in px) / max(1, len(px)) for i in range(3))
    return min(COLORS, key=lambda k: sum((a - b) ** 2 for a, b in zip(COLORS[k], mean, strict=True)))


def answer(messages: list[dict[str, Any]]) -> str:
    parts = [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]]
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    if not images:
        return "no image"
    colour = colour_of(images[0])
    text = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")
    option = re.search(rf"^([A-D])\. {colour}$", text, re.M)
    return option.group(1) if option else colour


@dataclass
class FakeVLM:
    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def image_parts(self) -> list[dict[str, Any]]:
        return [p for r in self.requests for m in r["messages"] if isinstance(m.get("content"), list)
                for p in m["content"] if p.get("type") == "image_url"]  # fmt: skip


@contextmanager
def fake_vlm() -> Iterator[FakeVLM]:
    state = FakeVLM(base_url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _send(self, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:  # noqa: N802
            self._send({"object": "list", "data": [{"id": "fake-vlm"}]})

        def do_POST(self) -> None:  # noqa: N802
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                state.requests.append(req)
            text = answer(req["messages"])
            self._send({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1}})  # fmt: skip

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield state
    finally:
        srv.shutdown()
        srv.server_close()
