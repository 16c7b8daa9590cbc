"""``python -m serving._process_server``: an in-process engine (transformers) in a process of its own, owned by a
replica (``serving._process_engine``) and answering it and the pool's clients over HTTP.

Why a process of its own: the driver can then start it before Ray (``pool.prestart``), so the engine's imports and
weights load on the core Ray's start-up leaves idle, instead of after Ray, Serve and the replica's worker are up.

The protocol is omnieval's own request and result models as JSON, not OpenAI's: a request crosses it unchanged
(media parts, clip sampling, log-prob and scoring requests alike), so the engine answers exactly as it does inside a
replica. Routes: ``GET /health`` (200 once the engine runs), ``GET /stats``, ``GET /v1/models``, ``POST
/v1/generate``, ``/v1/score``, ``/v1/tokenize``; clients send requests straight to it (``Endpoint.dialect``
``omnieval``), as to llama-server. A failed request answers 422 with ``{"kind": "request_failed" | "replica_dead",
"message", "timeout"}``. Inside a Ray cluster it listens on every interface behind the replica's bearer key
(``--api-key``), as the engines' own servers do (``serving._managed``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

log = logging.getLogger("omnieval.serving")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m serving._process_server", description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", required=True, help="engine name in serving.ENGINES or its module:Class target")
    p.add_argument("--model", required=True, help="the suite's model name")
    p.add_argument("--model-path", required=True, help="local weights (the replica resolved them)")
    p.add_argument("--kwargs", default="{}", help="the engine's engine_kwargs as JSON")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--api-key", default=None, help="bearer key every request but /health must carry")
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    from omnieval.core import ENGINES, ReplicaDead, RequestFailed, import_target
    from serving._types import GenerationRequest, ScoreRequest, TokenizeRequest

    cls: Any = import_target(args.engine) if ":" in args.engine else ENGINES.get(args.engine)
    engine = cls(replica_id=f"{args.model}-process", model=args.model, model_path=args.model_path,
                 **json.loads(args.kwargs))  # fmt: skip
    await engine.start()

    def failed(e: Exception) -> web.Response:
        kind = "replica_dead" if isinstance(e, ReplicaDead) else "request_failed"
        return web.json_response({"kind": kind, "message": str(e), "timeout": bool(getattr(e, "timeout", False))},
                                 status=422)  # fmt: skip

    def route(model: Any, call: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            try:
                req = model.model_validate_json(await request.read())
            except ValueError as e:
                return web.json_response({"kind": "request_failed", "message": f"bad request body: {e}",
                                          "timeout": False}, status=400)  # fmt: skip
            try:
                out = await call(req)
            except (RequestFailed, ReplicaDead) as e:
                return failed(e)
            except Exception as e:  # noqa: BLE001 - an engine error fails this request, as in a replica
                return failed(RequestFailed(f"{type(e).__name__}: {e}"))
            return web.Response(body=out.model_dump_json(), content_type="application/json")

        return handle

    async def health(_: web.Request) -> web.Response:
        ok = await engine.check_health()
        return web.json_response({"healthy": ok, "version": engine.version()}, status=200 if ok else 503)

    async def stats(_: web.Request) -> web.Response:
        s = await engine.poll_stats()
        return web.Response(body=s.model_dump_json(), content_type="application/json")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": args.model, "object": "model"}]})

    want = f"Bearer {args.api_key}" if args.api_key else None

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        if want is not None and request.path != "/health" and request.headers.get("Authorization") != want:
            return web.json_response({"kind": "request_failed", "message": "missing or wrong bearer key",
                                      "timeout": False}, status=401)  # fmt: skip
        return await handler(request)

    app = web.Application(client_max_size=1024**3, middlewares=[auth])  # media parts travel inline
    app.add_routes([
        web.get("/health", health), web.get("/stats", stats), web.get("/v1/models", models),
        web.post("/v1/generate", route(GenerationRequest, engine.generate)),
        web.post("/v1/score", route(ScoreRequest, engine.score)),
        web.post("/v1/tokenize", route(TokenizeRequest, engine.tokenize)),
    ])  # fmt: skip
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    log.info("engine %s for %s serving on %s:%d", args.engine, args.model, args.host, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    await engine.shutdown()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(parse_args(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
