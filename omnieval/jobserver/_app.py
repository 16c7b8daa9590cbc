"""The FastAPI app: the paper's ``/add_job`` (§3.3) plus job listing, inspection, cancellation and logs.

Everything except ``/health`` needs ``Authorization: Bearer <token>``: a job runs arbitrary evaluation code on the
cluster, so an open server would be remote code execution.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from omnieval.jobserver._executors import JobRunner
from omnieval.jobserver._models import (
    AddJobRequest,
    AddJobResponse,
    ErrorResponse,
    Health,
    JobDetail,
    JobList,
    JobLogs,
    JobSummary,
    SuiteError,
    _jsonable,
    describe_errors,
    suite_from_request,
)
from omnieval.jobserver._queue import JobConflictError, JobQueue
from omnieval.jobserver._store import JobState, JobStore

_ERR: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing or wrong bearer token"},
    422: {"model": ErrorResponse, "description": "Invalid request"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "Unknown job id"}}


_bearer = HTTPBearer(auto_error=False, description="The token from the server's --token-env variable")


def _auth_dependency(token: str) -> Any:
    expected = token.encode()

    async def require_token(cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        given = cred.credentials.encode() if cred is not None else b""
        # constant-time, and run even for a missing token, so timing says nothing about the expected value
        if not hmac.compare_digest(given, expected):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                detail="missing or wrong bearer token; send 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_token


def create_app(
    store: JobStore,
    runner: JobRunner,
    *,
    token: str,
    max_concurrent: int = 1,
    poll_interval_s: float = 2.0,
) -> FastAPI:
    """Build the app; the job queue starts with it (lifespan) and re-attaches to jobs left active."""
    if not token:
        raise ValueError("the job server needs an API token; refusing to serve without authentication")
    job_queue = JobQueue(store, runner, max_concurrent=max_concurrent, poll_interval_s=poll_interval_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        job_queue.start()
        try:
            yield
        finally:
            await job_queue.stop()

    app = FastAPI(
        title="omnieval job server",
        version="1",
        description="Submit evaluation suites as jobs; each runs as a Ray job (`omnieval run`).",
        lifespan=lifespan,
    )
    app.state.job_queue = job_queue
    app.state.store = store

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        body = ErrorResponse(detail=describe_errors(errors), errors=_jsonable(errors))
        return JSONResponse(body.model_dump(), status_code=422)

    @app.exception_handler(SuiteError)
    async def _invalid_suite(_: Request, exc: SuiteError) -> JSONResponse:
        return JSONResponse(ErrorResponse(detail=exc.detail, errors=exc.errors).model_dump(), status_code=422)

    @app.get("/health", response_model=Health, tags=["meta"])
    async def health() -> Health:
        """Liveness; the only endpoint without authentication."""
        return Health(queue_ticks=job_queue.ticks)

    api = APIRouter(dependencies=[Depends(_auth_dependency(token))], responses=_ERR, tags=["jobs"])

    def _job_or_404(job_id: str) -> Any:
        job = store.get(job_id)
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"unknown job {job_id!r}")
        return job

    @api.post(
        "/add_job",
        status_code=status.HTTP_201_CREATED,
        response_model=AddJobResponse,
        responses={422: {"model": ErrorResponse, "description": "Invalid body, name or suite"}},
    )
    async def add_job(req: AddJobRequest) -> AddJobResponse:
        """Queue a suite for evaluation; it starts when one of ``max_concurrent`` slots is free."""
        suite = suite_from_request(req)
        job = store.add(req.name or suite.name, suite.model_dump(mode="json"))
        job_queue.wake()
        return AddJobResponse(id=job.id, state=job.state)

    @api.get("/jobs", response_model=JobList)
    async def list_jobs(
        state: Annotated[JobState | None, Query(description="Only jobs in this state")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> JobList:
        """Jobs, newest first."""
        return JobList(jobs=[JobSummary.of(j) for j in store.list_jobs(state, limit=limit)])

    @api.get("/jobs/{job_id}", response_model=JobDetail, responses=_NOT_FOUND)
    async def get_job(job_id: str) -> JobDetail:
        job = _job_or_404(job_id)
        return JobDetail(**JobSummary.of(job).model_dump(), suite=job.suite)

    @api.post(
        "/jobs/{job_id}/cancel",
        response_model=JobSummary,
        responses={
            **_NOT_FOUND,
            409: {"model": ErrorResponse, "description": "The job already succeeded or failed"},
            502: {"model": ErrorResponse, "description": "The runner could not stop the job"},
        },
    )
    async def cancel_job(job_id: str) -> JobSummary:
        """Stop a pending or running job; cancelling a cancelled job is a no-op."""
        try:
            job = await job_queue.cancel(job_id)
        except JobConflictError as e:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=str(e)) from None
        except Exception as e:
            raise HTTPException(status.HTTP_502_BAD_GATEWAY, detail=f"could not stop the job: {e}") from None
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"unknown job {job_id!r}")
        return JobSummary.of(job)

    @api.get("/jobs/{job_id}/logs", response_model=JobLogs, responses=_NOT_FOUND)
    async def job_logs(job_id: str) -> JobLogs:
        """The job's output so far (tail); empty before it is submitted."""
        job = _job_or_404(job_id)
        try:
            text = await job_queue.logs(job)
        except Exception as e:
            raise HTTPException(status.HTTP_502_BAD_GATEWAY, detail=f"could not read logs: {e}") from None
        return JobLogs(id=job.id, ray_job_id=job.ray_job_id, logs=text)

    app.include_router(api)
    return app
