"""The Record: the one intermediate schema every engine and framework adapter reads and writes (paper §3.1, App. A).

A sample of any modality has the same shape; modalities differ only in the content entries of its messages.
Postprocessing writes beside the raw prediction so that metrics can read either.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class TextContent(_Strict):
    type: Literal["text"] = "text"
    value: str
    """The text."""


class ImageContent(_Strict):
    type: Literal["image"] = "image"
    value: str
    """Local path, http(s) URL or ``data:`` URI of the image."""


class VideoContent(_Strict):
    type: Literal["video"] = "video"
    value: str
    """Local path or URL of the video file."""
    num_frames: int | None = Field(default=None, ge=1)
    """Frames the engine samples from the clip; None leaves it to the engine."""
    sampling_strategy: Literal["uniform", "fps", "keyframe"] | None = None
    """How frames are picked."""
    fps: float | None = Field(default=None, gt=0)
    """Frame rate when ``sampling_strategy='fps'``."""


class AudioContent(_Strict):
    type: Literal["audio"] = "audio"
    value: str
    """Local path or URL of the audio file."""
    sampling_rate: int | None = Field(default=None, gt=0)
    """Sampling rate (Hz) the engine resamples to; None keeps the file's own."""


Content = Annotated[TextContent | ImageContent | VideoContent | AudioContent, Field(discriminator="type")]


class Message(_Strict):
    role: Literal["system", "user", "assistant"]
    """Chat role."""
    content: list[Content]
    """Ordered content entries; text and media interleave."""

    @classmethod
    def text(cls, role: Literal["system", "user", "assistant"], text: str) -> Message:
        return cls(role=role, content=[TextContent(value=text)])

    def text_value(self) -> str:
        """All text entries joined; media entries are skipped."""
        return "".join(c.value for c in self.content if isinstance(c, TextContent))


class GenerationOptions(_Strict):
    """Decoding parameters sent to the engine; greedy by default so reruns reproduce."""

    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature; 0 is greedy."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int = Field(default=256, ge=1)
    """Maximum new tokens."""
    stop: list[str] = Field(default_factory=list)
    """Stop strings."""
    seed: int | None = 0
    """Sampling seed passed to engines that take one."""
    grammar: str | None = None
    """GBNF grammar the reply must match (llama-server's ``grammar``, vLLM's ``structured_outputs``; a plain OpenAI
    endpoint has none), for replies a program parses, such as a judge's verdict. None: free text."""


class TextOutput(_Strict):
    prediction: list[str]
    """Raw generations (one per sample; n>1 for multi-sample decoding)."""
    prediction_postprocessed: list[str | None] = Field(default_factory=list)
    """Postprocessed predictions, same length as ``prediction``; None where extraction found nothing."""


class Usage(_Strict):
    prompt_tokens: int = 0
    """Prompt tokens counted by the engine."""
    completion_tokens: int = 0
    """Generated tokens counted by the engine."""


class ChoiceScore(_Strict):
    """One scored continuation of a log-likelihood request (a multiple-choice option, or one rolling window of a
    perplexity document): the numbers lm-eval's ``acc`` / ``acc_norm`` / perplexities are computed from."""

    option: str | None
    """The continuation's text (a choice, with lm-eval's target delimiter); None for a rolling window."""
    logprob: float
    """Sum of the continuation tokens' natural-log probabilities."""
    n_tokens: int = Field(ge=0)
    """Continuation tokens scored (the served model's tokenizer)."""
    is_greedy: bool
    """Every continuation token was the model's most likely next token."""


class Output(_Strict):
    text: TextOutput | None = None
    """Text sub-output for text-producing benchmarks."""
    choices: list[ChoiceScore] | None = None
    """Log-likelihood of each option (multiple-choice) or of each rolling window (perplexity), in request order;
    None for generation."""
    reasoning_content: str | None = None
    """Separate thinking trace, when the model emits one."""
    finish_reason: str | None = None
    """Engine finish reason (stop, length, ...)."""
    usage: Usage | None = None
    """Token counts reported by the engine."""
    replica: str | None = None
    """Pool replica that produced the output."""


ErrorKind = Literal[
    "request_failed", "replica_dead", "timeout", "bad_input", "bad_output", "postprocess", "metric", "judge"
]


class RecordError(_Strict):
    kind: ErrorKind
    """Error class; request_failed/timeout are retried on another replica before landing here."""
    message: str
    """Human-readable cause."""
    attempts: int = 1
    """How many times the request was tried."""


class Record(_Strict):
    """One benchmark sample through every stage: input, raw + postprocessed output, metric scores."""

    benchmark: str
    """Benchmark name (registry name)."""
    index: int = Field(ge=0)
    """Position of the sample in the benchmark; with ``benchmark`` and ``model`` it is the sample key."""
    model: str = ""
    """Suite model name the record was produced by."""
    sample_id: str | None = None
    """The dataset's own id, when it has one."""
    messages: list[Message]
    """Chat input."""
    generation_options: GenerationOptions = Field(default_factory=GenerationOptions)
    """Decoding parameters used for this sample."""
    label: Any = None
    """Reference answer(s)."""
    options: list[str] | None = None
    """Choices for multiple-choice samples, in letter order."""
    output: Output | None = None
    """Engine output; None until inference ran (or when it failed)."""
    error: RecordError | None = None
    """Per-sample failure; a failed sample is kept, never dropped."""
    latency: float | None = None
    """Seconds from dispatch to response."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Per-sample metric values."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form benchmark metadata (subject, difficulty, turn, ...)."""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.model, self.benchmark, self.index)

    @property
    def prediction(self) -> str | None:
        if self.output is None or self.output.text is None or not self.output.text.prediction:
            return None
        return self.output.text.prediction[0]

    @property
    def prediction_postprocessed(self) -> str | None:
        if self.output is None or self.output.text is None or not self.output.text.prediction_postprocessed:
            return None
        return self.output.text.prediction_postprocessed[0]

    def modalities(self) -> set[str]:
        return {c.type for m in self.messages for c in m.content}

    def media_paths(self) -> list[str]:
        """Media given as local file paths (not URLs or data URIs): what a client must be able to read."""
        return [c.value for m in self.messages for c in m.content
                if c.type != "text" and not c.value.startswith(("http://", "https://", "data:"))]  # fmt: skip
