"""A background load generator: workers keep a model's replicas busy through a real Dispatcher until stopped."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

from omnieval.core import GenerationOptions, PoolConfig
from pool import Dispatcher
from schedulers import RoutingRequest
from serving import GenerationRequest


class Pump:
    """``concurrency`` closed-loop clients on their own thread/loop; ``served`` counts results per replica id."""

    def __init__(self, controller: Any, model: str, *, concurrency: int, pool: dict[str, Any] | None = None) -> None:
        self.controller = controller
        self.model = model
        self.concurrency = concurrency
        self.cfg = PoolConfig.model_validate({"request_timeout_s": 120, "max_retries": 2, **(pool or {})})
        self.served: Counter[str] = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True, name=f"pump-{model}")

    def start(self) -> Pump:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 180) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "load generator did not stop"

    def served_by(self, replica_id: str) -> int:
        return dict(self.served).get(replica_id, 0)

    async def _main(self) -> None:
        d = Dispatcher(self.model, self.controller, self.cfg, seed=0)

        async def worker(i: int) -> None:
            n = 0
            while not self._stop.is_set():
                text = f"Say the number {i * 100 + n} once."
                req = GenerationRequest(
                    request_id=f"pump-{i}-{n}",
                    messages=[{"role": "user", "content": text}],
                    options=GenerationOptions(max_tokens=6, temperature=0.0, seed=0),
                )
                try:
                    res, _, _ = await d.submit(req, RoutingRequest(model=self.model, prompt_text=text, est_tokens=6))
                    self.served[res.replica_id] += 1
                except Exception as e:  # noqa: BLE001 - recorded; the test asserts there were none
                    self.errors.append(repr(e))
                n += 1

        await asyncio.gather(*(worker(i) for i in range(self.concurrency)))
        await d.flush()  # the controller's view of this client's load ends with it
        await d.close()
