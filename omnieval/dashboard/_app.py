"""FastAPI app: the dashboard page plus a small JSON API over an ``ArtifactIndex``.

Endpoints are sync so FastAPI runs them in its threadpool; parquet reads never block the event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from omnieval.dashboard._index import ArtifactIndex

STATIC_DIR = Path(__file__).parent / "static"


def create_app(runs_dir: Path | str) -> FastAPI:
    """App over ``runs_dir``; the directory is rescanned per request, so it may start empty or not exist yet."""
    index = ArtifactIndex(Path(runs_dir))
    app = FastAPI(title="omnieval dashboard", docs_url="/api/docs", redoc_url=None)
    app.state.index = index
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return (STATIC_DIR / "index.html").read_text(encoding="utf-8")

    @app.get("/api/leaderboard")
    def leaderboard(
        modality: str | None = None,
        engine: str | None = None,
        framework: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        return index.leaderboard(modality=modality, engine=engine, framework=framework, model=model)

    @app.get("/api/runs")
    def runs() -> list[dict[str, Any]]:
        return index.runs()

    @app.get("/api/runs/{run_id}/samples")
    def samples(
        run_id: str,
        benchmark: str | None = None,
        model: str | None = None,
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=1000),
    ) -> dict[str, Any]:
        if not index.has_run(run_id):
            raise HTTPException(404, f"unknown run {run_id!r}")
        return index.samples(run_id, benchmark=benchmark, model=model, offset=offset, limit=limit)

    @app.get("/api/compare")
    def compare(
        run_a: str,
        run_b: str,
        benchmark: str,
        model_a: str | None = None,
        model_b: str | None = None,
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=1000),
    ) -> dict[str, Any]:
        for r in (run_a, run_b):
            if not index.has_run(r):
                raise HTTPException(404, f"unknown run {r!r}")
        return index.compare(run_a, run_b, benchmark, model_a=model_a, model_b=model_b, offset=offset, limit=limit)

    return app
