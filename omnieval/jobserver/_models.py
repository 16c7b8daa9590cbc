"""Request/response models of the job API and the mapping of each accepted body shape onto a ``SuiteConfig``.

The suite is typed as ``SuiteConfig`` so /openapi.json carries its full schema; every validation failure becomes one
readable line (the same wording as ``load_suite``) plus pydantic's structured errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from omnieval._suite import check_registered
from omnieval.core import SuiteConfig, describe_errors
from omnieval.jobserver._store import Job, JobState

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
JobName = Annotated[
    str, Field(pattern=NAME_PATTERN, description="Letters, digits, '.', '_', '-'; no '/' or leading '.' (no paths).")
]


class PaperArguments(BaseModel):
    """The flat ``{"arguments": {...}}`` form of the paper's /add_job call (§3.3)."""

    model_config = ConfigDict(extra="forbid")

    exp_name: JobName
    model_name_or_path: str = Field(min_length=1)
    benchmarks: str | list[str]
    """Comma-separated string or list of benchmark names."""
    inference_engine: str = "transformers"
    evaluation_engine: Literal["builtin"] = "builtin"


_ENGINE_ALIASES = {"huggingface": "transformers", "hf": "transformers", "llama.cpp": "llamacpp"}


class AddJobRequest(BaseModel):
    """Exactly one of ``suite``, ``suite_yaml`` or ``arguments``; ``name`` defaults to the suite's name."""

    model_config = ConfigDict(extra="forbid")

    name: JobName | None = None
    suite: SuiteConfig | None = None
    """The suite as a JSON object (``omnieval schema`` prints its schema)."""
    suite_yaml: str | None = Field(default=None, max_length=1_000_000)
    """The suite as YAML text, as in a suite file."""
    arguments: dict[str, Any] | None = None
    """The paper's form: flat ``PaperArguments``, or a suite object."""

    @model_validator(mode="after")
    def _one_source(self) -> AddJobRequest:
        given = [k for k in ("suite", "suite_yaml", "arguments") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'suite', 'suite_yaml', 'arguments' (got {given or 'none'})")
        return self


class AddJobResponse(BaseModel):
    id: str
    state: JobState


class JobSummary(BaseModel):
    id: str
    name: str
    state: JobState
    ray_job_id: str | None
    """The runner's id: a Ray submission id (``omnieval-<id>``) or ``local-<id>``."""
    created_at: float
    """Unix seconds."""
    updated_at: float
    message: str
    """Last status note from the runner or the job queue (why a job failed, for instance)."""

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        return cls(**{k: getattr(job, k) for k in cls.model_fields})


class JobDetail(JobSummary):
    suite: dict[str, Any]
    """The full validated suite (defaults filled in) as submitted: the server-side record for reproducibility."""


class JobList(BaseModel):
    jobs: list[JobSummary]


class JobLogs(BaseModel):
    id: str
    ray_job_id: str | None
    logs: str


class ErrorResponse(BaseModel):
    detail: str
    """One line naming the key path and the fix."""
    errors: list[dict[str, Any]] | None = None
    """pydantic's structured errors, when the body failed validation."""


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    queue_ticks: int = 0
    """Scheduler passes since start: a number that stops growing while jobs are active means a stuck queue."""


class SuiteError(ValueError):
    """An invalid suite or body: rendered as 422 ``ErrorResponse``."""

    def __init__(self, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors


def _jsonable(errors: Sequence[Any]) -> list[dict[str, Any]]:
    keep = ("type", "loc", "msg")
    return [{k: (list(e[k]) if k == "loc" else e[k]) for k in keep if k in e} for e in errors]


def _validate_suite(data: Any, where: str) -> SuiteConfig:
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: must be a mapping with keys name, models, benchmarks")
    try:
        return SuiteConfig.model_validate(data)
    except ValidationError as e:
        errs = e.errors()
        raise SuiteError(describe_errors(list(errs), (where,)), _jsonable(list(errs))) from None


def _from_paper(raw: dict[str, Any]) -> SuiteConfig:
    try:
        args = PaperArguments.model_validate(raw)
    except ValidationError as e:
        errs = e.errors()
        raise SuiteError(describe_errors(list(errs), ("arguments",)), _jsonable(list(errs))) from None
    names = args.benchmarks.split(",") if isinstance(args.benchmarks, str) else args.benchmarks
    engine = _ENGINE_ALIASES.get(args.inference_engine.lower(), args.inference_engine.lower())
    path = args.model_name_or_path
    is_path = path.startswith(("/", "./", "../", "~"))
    source = {"kind": "path", "path": path} if is_path else {"kind": "hf", "repo_id": path}
    suite = {
        "name": args.exp_name,
        "models": [{"name": args.exp_name, "source": source, "engine": engine}],
        "benchmarks": [{"name": n.strip()} for n in names if n.strip()],
    }
    return _validate_suite(suite, "arguments")


def suite_from_request(req: AddJobRequest) -> SuiteConfig:
    """The validated suite of a request, benchmark names checked against the registry like ``load_suite``."""
    import yaml

    if req.suite is not None:
        suite, where = req.suite, "suite"
    elif req.suite_yaml is not None:
        try:
            data = yaml.safe_load(req.suite_yaml)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise SuiteError(f"suite_yaml: invalid YAML{at} ({getattr(e, 'problem', e)}); fix the syntax") from None
        suite, where = _validate_suite(data, "suite_yaml"), "suite_yaml"
    else:
        raw = req.arguments or {}
        where = "arguments"
        suite = _validate_suite(raw, where) if "models" in raw else _from_paper(raw)

    problem = check_registered(suite, prefix=f"{where}.")
    if problem:
        raise SuiteError(problem)
    return suite
