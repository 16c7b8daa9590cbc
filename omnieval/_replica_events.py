"""Replica failures seen by the run that uses them: logged in the driver's output as they happen (so ``ray job logs``
says which replica, on which node, and where its engine's log is), and at the end each failed engine's log is
copied from its node into the run directory (``engine-logs/<replica>.log``, listed in ``replica-events.jsonl``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import ray

log = logging.getLogger("omnieval")
TAIL_BYTES = 2 << 20
"""The end of an engine log copied into the run (a crashed server's last words are at the end)."""


@ray.remote(num_cpus=0)
def _read_tail(path: str, n: int = TAIL_BYTES) -> bytes:
    p = Path(path)
    if not p.exists():  # reported while live, then moved out of the clean-stop removal when the server died
        p = p.parent.parent / "failed" / p.name
    with open(p, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - n))
        return f.read()


class ReplicaEvents:
    """Polls the controller's failure events for this run's models (``poll`` from the driver's heartbeat thread)."""

    def __init__(self, controller: Any, models: list[str]) -> None:
        self.controller = controller
        self.models = models
        self.seen: list[Any] = []
        earlier = ray.get(controller.events.remote(0, models), timeout=30)
        self.since = max((e.seq for e in earlier), default=0)  # earlier runs' failures are not this run's

    def poll(self) -> None:
        for e in ray.get(self.controller.events.remote(self.since, self.models), timeout=30):
            self.since = max(self.since, e.seq)
            self.seen.append(e)
            log.warning("replica %s of %s (engine %s, node %s) %s: %s; engine log: %s", e.replica_id, e.model,
                        e.engine, e.node_id, e.kind.replace("_", " "), e.detail, e.log or "none")  # fmt: skip

    def keep(self, run_dir: Path) -> list[Path]:
        """Write the events and copy each failed engine's log into the run directory; returns the copied logs."""
        try:
            self.poll()
        except Exception as err:  # noqa: BLE001 - the run's outcome matters more than its failure report
            log.warning("could not read the pool's replica events: %r", err)
        if not self.seen:
            return []
        with open(run_dir / "replica-events.jsonl", "w") as f:
            f.writelines(e.model_dump_json() + "\n" for e in self.seen)
        copied = []
        for e in {e.replica_id: e for e in self.seen if e.log and e.node_id}.values():
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            path = str(e.log).split(":", 1)[1]
            dest = run_dir / "engine-logs" / f"{e.replica_id}.log"
            try:
                data = ray.get(_read_tail.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    e.node_id, soft=False)).remote(path), timeout=60)  # fmt: skip
            except Exception as err:  # noqa: BLE001 - a node that is gone takes its log with it: say so
                log.warning("engine log of %s not copied from %s: %r", e.replica_id, e.log, err)
                continue
            dest.parent.mkdir(exist_ok=True)
            dest.write_bytes(data)
            copied.append(dest)
        if copied:
            log.warning("engine logs of %d failed replica(s) kept in %s", len(copied), run_dir / "engine-logs")
        return copied
