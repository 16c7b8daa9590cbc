"""transformers backend: the model's own ``forward`` and KV cache under continuous batching (``serving._continuous``).

Requests join the running batch after their own prefill (short text prompts prefilled together within
``prefill_tokens``; a media prompt alone) and leave it the step they finish, each with its own sampling options,
``max_tokens``, stop strings and seed. A model the loop cannot carry (an encoder-decoder, media-dependent rotary
positions, a sliding-window or static cache, a generation_config with logits processors) is served by padded batched
``generate`` per step instead (``batching: static``), and the log says why. transformers' own ``generate_batch``
(paged, continuous) was 4x slower on CPU and sized its KV cache from free memory (9 GiB), so we do not use it.

Static batching takes the oldest waiting request's option group (temperature, top_p, max_tokens, stop, seed) per
``generate``. Either way the model computes off the event loop, so the replica keeps answering health checks and
stats, and always on the engine's one compute thread. OpenMP keeps a thread team per calling thread; steps handed to
whichever ``asyncio.to_thread`` worker was free alternated between two teams, and the same 26 video prefills on
2 cores took 19.3 s against 16.0 s on one thread (three runs each). ``OMP_WAIT_POLICY=passive`` and
``MALLOC_ARENA_MAX=1`` did not close the gap, so it is neither idle spinning nor malloc arenas; one thread does.

Multimodal checkpoints (a ``vision_config`` / ``audio_config`` in config.json) load with ``AutoProcessor`` and
``AutoModelForImageTextToText`` (or ``AutoModelForMultimodalLM`` for audio): a request with images or audio goes
through the model's own chat template and processor (image tiling, log-mel features, placeholder expansion). Video
reaches such a model as frames (``video_input: frames``).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from omnieval.core import GenerationOptions, MissingDependencyError, OmnievalUserError, ReplicaDead, RequestFailed
from serving._continuous import Row, RunningBatch, push, result, sample, unsupported
from serving._engine import Engine, pop_known
from serving._features import EngineFeatures, hf_features
from serving._isa import native_bf16
from serving._media import decode_audio
from serving._text import chat_token_ids, cut_at_stop, has_media, hf_chat
from serving._types import (
    ChoiceLogprob,
    EngineStats,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
)

TRANSFORMERS_PIP = "pip install 'omnieval[transformers]'"

_DEFAULTS: dict[str, Any] = {
    "max_batch_size": 8,
    "batch_wait_ms": 10.0,
    "dtype": "auto",
    "device": "auto",
    "threads": None,
    "trust_remote_code": False,
    "batching": "auto",
    "prefill_tokens": 512,
    "process": "replica",  # or "own": the engine in a process of its own, which the driver can start before Ray
}
_BATCHING = ("auto", "continuous", "static")
_T = TypeVar("_T")


def auto_dtype(device: str, checkpoint: str | None, bf16_native: bool) -> str:
    """``dtype: auto``: bfloat16 on CUDA; on CPU the checkpoint's own bfloat16 where the CPU multiplies bfloat16 in
    hardware (AVX512-BF16, AMX, Arm BF16), else float32.

    Why not always float32 on CPU: transformers' own ``auto`` is the checkpoint's dtype, and the frameworks run it so
    (lm-eval ``hf`` at ``dtype=auto``, lmms-eval's ``huggingface`` at bfloat16); float32 doubled the work. Measured on
    a 2-core Xeon (AMX), the plumbing VLM in one pool replica: 26 four-frame video questions 67.2 s end to end in
    float32, 36.9 s in bfloat16; 8 images busy 6.0 s vs 3.0 s. Why not bfloat16 everywhere: without those
    instructions PyTorch widens every operand to float32 and back. Greedy text can differ from float32's, and in
    bfloat16 a row's logits depend slightly on its batch; ``dtype: float32`` where tokens must not depend on either."""
    if device.startswith("cuda"):
        return "bfloat16"
    return "bfloat16" if checkpoint == "bfloat16" and bf16_native else "float32"


def options_key(o: GenerationOptions) -> tuple[Any, ...]:
    """Requests with equal keys can share one ``generate`` call; greedy requests ignore the seed."""
    greedy = o.temperature == 0
    return (greedy, None if greedy else o.temperature, None if greedy else o.top_p, o.max_tokens, tuple(o.stop),
            None if greedy else o.seed)  # fmt: skip


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[GenerationResult]
    enqueued: float = field(default_factory=time.monotonic)
    encoded: Any = None
    """Continuous batching: the request's token ids (text) or processor output (media), once encoded."""


_Done = tuple[_Pending, GenerationResult | Exception]
"""A finished request: its result, or the error it fails with."""


def _prompt_len(encoded: Any) -> int:
    """Prompt tokens of an encoded request: its token ids (text) or the processor's ``input_ids`` (media)."""
    return len(encoded) if isinstance(encoded, list) else int(encoded["input_ids"].shape[1])


def take_batch(pending: deque[_Pending], max_batch: int) -> list[_Pending]:
    """Up to ``max_batch`` waiting requests of the oldest one's option group, in FIFO order; others keep waiting."""
    if not pending:
        return []
    key = options_key(pending[0].request.options)
    batch: list[_Pending] = []
    rest: deque[_Pending] = deque()
    while pending:
        p = pending.popleft()
        if len(batch) < max_batch and options_key(p.request.options) == key:
            batch.append(p)
        else:
            rest.append(p)
    pending.extend(rest)
    return batch


class TransformersEngine(Engine):
    """In-process Hugging Face model; loads a GGUF (de-quantized via ``gguf_file``) or an HF checkpoint dir/repo."""

    option_defaults: ClassVar[dict[str, Any]] = _DEFAULTS

    name: ClassVar[str] = "transformers"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """Images (and so video as frames) and audio through the model's own processor; native video needs vLLM."""
        f = hf_features(model_path)
        return EngineFeatures(f.modalities & {"text", "image", "audio"}, False, f.source + " (transformers)")

    @classmethod
    def scoring(cls, kwargs: dict[str, Any]) -> str | None:
        """A forward pass over context + continuation, as lm-eval's ``hf`` model scores (``HFLM``)."""
        return "forward"

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model)
        self.opts = pop_known(kwargs, self.name, _DEFAULTS)
        self.max_batch_size = int(self.opts["max_batch_size"])
        if self.max_batch_size < 1:
            raise OmnievalUserError(f"engine 'transformers': max_batch_size must be >= 1, got {self.max_batch_size}")
        self.slots = self.max_batch_size
        if self.opts["batching"] not in _BATCHING:
            raise OmnievalUserError(f"engine 'transformers': batching must be one of {', '.join(_BATCHING)}, "
                                    f"got {self.opts['batching']!r}")  # fmt: skip
        self.prefill_tokens = int(self.opts["prefill_tokens"])
        if self.prefill_tokens < 1:
            raise OmnievalUserError(f"engine 'transformers': prefill_tokens must be >= 1, got {self.prefill_tokens}")
        self.batching: str | None = None
        """``continuous`` or ``static``, decided when the model loads."""
        self.batching_reason: str | None = None
        """Why a model under ``batching: auto`` is served by static ``generate``."""
        self.dtype: str | None = None
        """The dtype the weights compute in, decided when the model loads (``dtype: auto``: ``auto_dtype``)."""
        self.prefills = 0
        """Prefill forwards (continuous batching)."""
        self.decode_steps = 0
        """Decode steps; ``decode_rows / decode_steps`` is the mean decode batch."""
        self.decode_rows = 0
        self.peak_batch = 0
        """Most rows decoded in one step."""
        self._batch: RunningBatch | None = None
        self._extra: dict[str, Any] = {}
        self.model_path = model_path
        self.generate_calls = 0
        """Batched ``generate`` calls so far (tests check that concurrent requests share calls)."""
        self._pending: deque[_Pending] = deque()
        self._wake = asyncio.Event()
        self._running = 0
        self._loop_task: asyncio.Task[None] | None = None
        self._model: Any = None
        self._compute: ThreadPoolExecutor | None = None
        """The one thread every load, forward and ``generate`` runs on (one OpenMP team; module docstring)."""
        self._tok: Any = None
        self._processor: Any = None
        self._torch: Any = None
        self._version: str | None = None
        self._media_batching = True
        self.media_generate_calls = 0
        """``generate`` calls for media requests (tests check that waiting media requests share them)."""
        """False once the model's processor refused a batch of media requests (then served one by one)."""

    def version(self) -> str | None:
        return self._version

    async def _on_compute(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the engine's compute thread, awaited from the event loop."""
        if self._compute is None:
            self._compute = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"compute-{self._stats.replica_id}")
        return await asyncio.get_running_loop().run_in_executor(self._compute, functools.partial(fn, *args))

    async def start(self) -> None:
        await self._on_compute(self._load)
        self._wake = asyncio.Event()  # bind to the running loop
        self._loop_task = asyncio.get_running_loop().create_task(self._batch_loop())
        self._score_lock = asyncio.Lock()

    def _load(self) -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise MissingDependencyError("the transformers engine", TRANSFORMERS_PIP) from None
        self._torch, self._version = torch, f"transformers {transformers.__version__}"
        if self.opts["threads"]:
            torch.set_num_threads(int(self.opts["threads"]))
        device = self.opts["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        p = Path(self.model_path).expanduser()
        kw: dict[str, Any] = {"trust_remote_code": bool(self.opts["trust_remote_code"])}
        if p.is_file():
            if p.suffix != ".gguf":
                raise OmnievalUserError(f"{p}: the transformers engine takes a .gguf file or a checkpoint directory")
            try:
                import gguf  # noqa: F401
            except ImportError:
                raise MissingDependencyError("loading a GGUF with transformers", TRANSFORMERS_PIP) from None
            where, kw["gguf_file"] = str(p.parent), p.name
        else:
            where = str(p) if p.exists() else self.model_path  # a hub repo id
        media = hf_features(p if p.exists() else None).modalities - {"text"}
        if media:
            self._processor = transformers.AutoProcessor.from_pretrained(where, **kw)
            tok = self._processor.tokenizer
            auto = (
                transformers.AutoModelForImageTextToText
                if media == {"image"}
                else transformers.AutoModelForMultimodalLM
            )
        else:
            tok = transformers.AutoTokenizer.from_pretrained(where, **kw)
            auto = transformers.AutoModelForCausalLM
        dtype = self.opts["dtype"]
        if dtype == "auto":  # a GGUF is dequantised and has no dtype of its own; reading its config took 9.4 s
            own = None
            if "gguf_file" not in kw:
                own = getattr(transformers.AutoConfig.from_pretrained(where, **kw), "dtype", None)
            dtype = auto_dtype(device, str(own).removeprefix("torch.") if own is not None else None, native_bf16())
        self.dtype = dtype
        logging.getLogger("omnieval").info("engine 'transformers' %s: %s on %s", self._stats.replica_id, dtype, device)
        model = auto.from_pretrained(where, dtype=getattr(torch, dtype), **kw)
        tok.padding_side = "left"  # generated tokens must follow every prompt directly
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._tok, self._model = tok, model.to(device).eval()
        prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self._stats.prefix_token_id = None if prefix is None else int(prefix)
        self._stats.tokenizer_dir = str(p) if p.is_dir() else None
        self._choose_batching(torch)

    def _choose_batching(self, torch: Any) -> None:
        """Continuous batching unless the model cannot be carried by it (``serving._continuous.unsupported``)."""
        import inspect
        import logging

        if "logits_to_keep" in inspect.signature(self._model.forward).parameters:
            self._extra = {"logits_to_keep": 1}  # only the last position's logits: prompts can be long
        if self.opts["batching"] == "static":
            self.batching = "static"
            return
        prefix = self._stats.prefix_token_id if self._stats.prefix_token_id is not None else 0
        with torch.inference_mode():  # one token through the model shows its cache's layers
            probe = self._model(input_ids=torch.tensor([[prefix]], device=self._model.device), use_cache=True)
        reason = unsupported(self._model, probe.past_key_values)
        if reason is None:
            self.batching, self._batch = "continuous", RunningBatch(torch)
            return
        if self.opts["batching"] == "continuous":
            raise OmnievalUserError(f"engine 'transformers': batching: continuous is not possible for "
                                    f"{self.model_path}: {reason}. Use batching: static (or auto).")  # fmt: skip
        self.batching, self.batching_reason = "static", reason
        logging.getLogger("omnieval").warning("engine 'transformers': %s is served by padded batched generate "
                                              "(static batching) because %s", self.model_path, reason)  # fmt: skip

    async def _batch_loop(self) -> None:
        if self._batch is not None:
            await self._continuous_loop(self._batch)
        else:
            await self._static_loop()

    async def _continuous_loop(self, batch: RunningBatch) -> None:
        """Admit waiting requests into free rows, then one step in the worker thread: their prefill (within the
        token budget; the rest wait at the head of the queue) and one decode step of every running row."""
        wait_s = float(self.opts["batch_wait_ms"]) / 1000.0
        while True:
            if not self._pending and not batch:
                self._wake.clear()
                await self._wake.wait()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)  # let requests sent together share the first prefill
            gone = [i for i, r in enumerate(batch.rows) if r.handle.future.done()]  # cancelled by their caller
            if gone:
                batch.keep([i for i in range(len(batch)) if i not in gone])
            admit: list[_Pending] = []
            while self._pending and len(batch) + len(admit) < self.max_batch_size:
                p = self._pending.popleft()
                if not p.future.done():
                    admit.append(p)
            if not admit and not batch:
                continue
            self._running = len(batch) + len(admit)
            try:
                done, rest = await self._on_compute(self._step, admit)
            finally:
                self._running = len(batch)
            self._pending.extendleft(reversed(rest))
            for p, out in done:
                if p.future.done():
                    continue
                if isinstance(out, GenerationResult):
                    p.future.set_result(out)
                else:
                    p.future.set_exception(out)

    def _step(self, admit: list[_Pending]) -> tuple[list[_Done], list[_Pending]]:
        """Prefill admitted requests until ``prefill_tokens`` is spent (at least one group), then decode one token
        for every running row. Returns finished requests and the admitted ones left for the next step."""
        assert self._batch is not None
        done: list[_Done] = []
        rest = deque(admit)
        used = 0
        with self._torch.inference_mode():
            while rest and (used == 0 or used < self.prefill_tokens):
                group = self._take_group(rest, self.prefill_tokens - used, done)
                if not group:
                    continue
                used += sum(_prompt_len(p.encoded) for p in group)
                try:
                    self._prefill(group, done)
                except Exception as e:  # noqa: BLE001 - e.g. out of memory: fail these requests, keep serving
                    done += [(p, RequestFailed(f"transformers prefill failed: {e!r}")) for p in group]
            if self._batch:
                try:
                    self._decode(done)
                except Exception as e:  # noqa: BLE001 - the running rows share the failed forward
                    done += [(r.handle, RequestFailed(f"transformers decode failed: {e!r}")) for r in self._batch.rows]
                    self._batch.keep([])
        return done, list(rest)

    def _encode(self, p: _Pending) -> None:
        """Token ids for a text request; the processor's tensors for a media request (one at a time)."""
        r = p.request
        if not has_media(r.messages):
            tok = self._tok
            p.encoded = (chat_token_ids(tok, r.messages, self.name) if r.prompt is None
                         else [int(i) for i in tok.encode(r.prompt)])  # fmt: skip
            return
        if self._processor is None:
            raise RequestFailed(f"engine 'transformers': {self.model_path} is a text model; the request has media")
        enc, n_media = self._media_inputs([r], batched=False)
        self._stats.media_items += n_media
        p.encoded = enc

    def _take_group(self, rest: deque[_Pending], budget: int, done: list[tuple[_Pending, Any]]) -> list[_Pending]:
        """The head request, and with a text head the following text requests while the padded group
        (rows x longest prompt) stays within ``budget`` tokens. A request that cannot be encoded fails alone."""
        group: list[_Pending] = []
        width = 0
        while rest:
            p = rest[0]
            if p.encoded is None:
                try:
                    self._encode(p)
                except Exception as e:  # noqa: BLE001 - a bad image or prompt fails its own request only
                    rest.popleft()
                    done.append((p, e if isinstance(e, RequestFailed) else RequestFailed(f"transformers could not "
                                                                                         f"encode the request: {e!r}")))  # fmt: skip
                    continue
            text = isinstance(p.encoded, list)
            if group and (not text or (len(group) + 1) * max(width, len(p.encoded)) > budget):
                break
            group.append(rest.popleft())
            if not text:
                break
            width = max(width, len(p.encoded))
        return group

    def _row(self, p: _Pending, prompt_tokens: int) -> Row:
        torch, o = self._torch, p.request.options
        eos = self._model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos if eos is not None else self._tok.eos_token_id]
        gen = None
        if o.temperature > 0:
            gen = torch.Generator(device=self._model.device)
            if o.seed is not None:
                gen.manual_seed(int(o.seed))
            else:
                gen.seed()
        return Row(handle=p, request=p.request, prompt_tokens=prompt_tokens,
                   eos=frozenset(int(e) for e in eos if e is not None), generator=gen)  # fmt: skip

    def _prefill(self, group: list[_Pending], done: list[tuple[_Pending, Any]]) -> None:
        """One forward over the group's prompts; each row's first token; unfinished rows join the batch."""
        torch, model, dev = self._torch, self._model, self._model.device
        if isinstance(group[0].encoded, list):  # text, left-padded together
            ids = [p.encoded for p in group]
            width, pad = max(len(x) for x in ids), int(self._tok.pad_token_id)
            input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=dev)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=dev)
            position = (mask.cumsum(dim=1) - 1).clamp(min=0)
            out = model(input_ids=input_ids, attention_mask=mask, position_ids=position, use_cache=True, **self._extra)
            prompt = [len(x) for x in ids]
        else:  # one media request, unpadded: the model places its media tokens and positions itself
            enc = group[0].encoded
            out = model(**enc, use_cache=True, **self._extra)
            mask = torch.ones((1, out.past_key_values.get_seq_length()), dtype=torch.long, device=dev)
            prompt = [_prompt_len(enc)]
        self.prefills += 1
        self._stats.batches += 1
        self._stats.batch_rows += len(group)
        rows = [self._row(p, n) for p, n in zip(group, prompt, strict=True)]
        joining = RunningBatch(torch)
        joining.rows, joining.cache, joining.mask = rows, out.past_key_values, mask
        self._advance(joining, sample(torch, out.logits[:, -1, :], rows), done)
        if joining:
            assert self._batch is not None
            self._batch.add(joining.rows, joining.cache, joining.mask)

    def _decode(self, done: list[tuple[_Pending, Any]]) -> None:
        assert self._batch is not None
        batch, torch = self._batch, self._torch
        logits = batch.step(self._model, self._extra)
        self.decode_steps += 1
        self.decode_rows += len(batch)
        self.peak_batch = max(self.peak_batch, len(batch))
        self._stats.batches += 1
        self._stats.batch_rows += len(batch)
        batch.last = sample(torch, logits, batch.rows)
        self._advance(batch, batch.last, done)

    def _advance(self, batch: RunningBatch, tokens: list[int], done: list[tuple[_Pending, Any]]) -> None:
        """Each row's new token; finished rows leave the batch as their requests' results."""
        keep = []
        for i, (r, t) in enumerate(zip(batch.rows, tokens, strict=True)):
            reason = push(self._tok, r, t)
            if reason:
                done.append((r.handle, result(self._tok, r, reason)))
            else:
                keep.append(i)
        batch.keep(keep)

    async def _static_loop(self) -> None:
        wait_s = float(self.opts["batch_wait_ms"]) / 1000.0
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            if wait_s > 0:
                await asyncio.sleep(wait_s)  # let requests sent together join the same step
            batch = [p for p in take_batch(self._pending, self.max_batch_size) if not p.future.done()]
            if not batch:
                continue
            self._running = len(batch)
            try:
                results = await self._on_compute(self._generate_batch, [p.request for p in batch])
            except Exception as e:  # noqa: BLE001 - e.g. out of memory: fail this batch, keep serving
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(RequestFailed(f"transformers generate failed: {e!r}"))
            else:
                for p, r in zip(batch, results, strict=True):
                    if not p.future.done():
                        p.future.set_result(r)
            finally:
                self._running = 0
                self.generate_calls += 1
                self._stats.batches += 1
                self._stats.batch_rows += len(batch)

    def _generation_config(self, o: GenerationOptions) -> Any:
        gc = copy.deepcopy(self._model.generation_config)
        gc.max_new_tokens, gc.pad_token_id = o.max_tokens, self._tok.pad_token_id
        gc.max_length = None
        if o.temperature > 0:
            gc.update(do_sample=True, temperature=o.temperature, top_p=o.top_p, top_k=0)
        else:  # neutral sampling fields, so transformers does not warn that they are ignored
            gc.update(do_sample=False, temperature=1.0, top_p=1.0, top_k=50)
        gc.stop_strings = list(o.stop) or None
        return gc

    def _generate_batch(self, reqs: list[GenerationRequest]) -> list[GenerationResult]:
        media = [i for i, r in enumerate(reqs) if has_media(r.messages)]
        if not media:
            return self._generate_text(reqs)
        if self._processor is None:
            raise RequestFailed(f"engine 'transformers': {self.model_path} is a text model; the request has media")
        text = [r for i, r in enumerate(reqs) if i not in media]
        results: dict[int, GenerationResult] = dict(zip([i for i in range(len(reqs)) if i not in media],
                                                        self._generate_text(text) if text else [], strict=True))  # fmt: skip
        kinds: dict[tuple[bool, bool], list[int]] = {}  # requests with the same kinds of media share one call
        for i in media:
            _, imgs, auds = hf_chat(reqs[i].messages)
            kinds.setdefault((bool(imgs), bool(auds)), []).append(i)
        for idx in kinds.values():
            for i, res in zip(idx, self._generate_media_batch([reqs[i] for i in idx]), strict=True):
                results[i] = res
        return [results[i] for i in range(len(reqs))]

    def _generate_media_batch(self, reqs: list[GenerationRequest]) -> list[GenerationResult]:
        """Media requests through the processor together, left-padded like text: one ``generate`` for the batch.
        A processor that cannot batch (it raises on lists) is said once in the log and then served one by one."""
        if len(reqs) == 1 or not self._media_batching:
            return [self._generate_media(r) for r in reqs]
        try:
            return self._generate_media_rows(reqs)
        except (ValueError, TypeError, IndexError) as e:
            import logging

            self._media_batching = False
            logging.getLogger("omnieval").warning(
                "engine 'transformers': %s's processor does not batch media requests (%r); serving them one by one",
                self.model_path, e,
            )
            return [self._generate_media(r) for r in reqs]

    def _generate_media(self, r: GenerationRequest) -> GenerationResult:
        """One request through the model's processor: its chat template places the image tokens, its image
        processor resizes and tiles (the same code the model was released with)."""
        return self._generate_media_rows([r], batched=False)[0]

    def _media_inputs(self, reqs: list[GenerationRequest], batched: bool) -> tuple[Any, int]:
        """The processor's tensors for media requests (its chat template, image tiling, audio features) in the
        model's dtype and device, and how many media items they hold."""
        torch = self._torch
        texts: list[str] = []
        images: list[list[Any]] = []
        audios: list[Any] = []
        rate = 0
        for r in reqs:
            msgs, imgs, auds = hf_chat(r.messages)
            texts.append(self._processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
            if imgs:
                from transformers.image_utils import load_image

                images.append([load_image(u) for u in imgs])
            if auds:
                rate = int(self._processor.feature_extractor.sampling_rate)
                audios += [decode_audio(a["data"], rate) for a in auds]
        kw: dict[str, Any] = {}
        if images:
            kw["images"] = images if batched else images[0]
        if audios:
            kw["audio"], kw["sampling_rate"] = audios, rate
        if batched:
            kw["padding"] = True
        enc = self._processor(text=texts if batched else texts[0], return_tensors="pt", **kw).to(self._model.device)
        for k, v in enc.items():
            if torch.is_floating_point(v):
                enc[k] = v.to(self._model.dtype)
        return enc, sum(len(i) for i in images) + len(audios)

    def _generate_media_rows(self, reqs: list[GenerationRequest], batched: bool = True) -> list[GenerationResult]:
        torch, tok = self._torch, self._tok
        t0 = time.monotonic()
        enc, n_media = self._media_inputs(reqs, batched)
        o = reqs[0].options
        gc = self._generation_config(o)
        if o.temperature > 0 and o.seed is not None:
            torch.manual_seed(o.seed)
        with torch.inference_mode():
            out = self._model.generate(**enc, generation_config=gc, tokenizer=tok)
        self.media_generate_calls += 1
        self._stats.media_items += n_media
        width = enc["input_ids"].shape[1]
        lengths = enc["attention_mask"].sum(dim=1).tolist() if "attention_mask" in enc else [width] * len(reqs)
        pad = tok.pad_token_id if batched else None
        return [self._result(r, out[i, width:].tolist(), int(lengths[i]), gc, pad, t0) for i, r in enumerate(reqs)]

    def _result(self, r: GenerationRequest, row: list[int], prompt_tokens: int, gc: Any, pad: int | None,
                t0: float) -> GenerationResult:  # fmt: skip
        """A generated row as the request's result: cut after EOS (which counts) or at the batch's padding (which
        does not), then at the first stop string."""
        eos = gc.eos_token_id if isinstance(gc.eos_token_id, list) else [gc.eos_token_id]
        eos_ids = {int(e) for e in eos if e is not None}
        ends = eos_ids if pad is None else eos_ids | {int(pad)}
        n = next((i for i, t in enumerate(row) if t in ends), None)
        toks = row if n is None else row[: n + 1 if row[n] in eos_ids else n]
        text, hit_stop = cut_at_stop(self._tok.decode(toks, skip_special_tokens=True), list(r.options.stop))
        return GenerationResult(request_id=r.request_id, text=text,
                                finish_reason="stop" if (n is not None or hit_stop) else "length",
                                prompt_tokens=prompt_tokens, completion_tokens=len(toks),
                                engine_latency_s=time.monotonic() - t0)  # fmt: skip

    def _generate_text(self, reqs: list[GenerationRequest]) -> list[GenerationResult]:
        torch, tok = self._torch, self._tok
        t0 = time.monotonic()
        o = reqs[0].options
        ids = [
            chat_token_ids(tok, r.messages, self.name) if r.prompt is None else [int(i) for i in tok.encode(r.prompt)]
            for r in reqs
        ]  # a raw prompt is tokenized as is, with the tokenizer's own special-token default
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=self._model.device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=self._model.device)
        gc = self._generation_config(o)
        if o.temperature > 0 and o.seed is not None:
            torch.manual_seed(o.seed)
        with torch.inference_mode():
            out = self._model.generate(input_ids=input_ids, attention_mask=mask, generation_config=gc, tokenizer=tok)
        # a row that finished early is padded up to the batch's longest row
        return [self._result(r, row, len(prompt), gc, pad, t0)
                for r, prompt, row in zip(reqs, ids, out[:, width:].tolist(), strict=True)]  # fmt: skip

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._loop_task is None or self._loop_task.done():
            raise ReplicaDead("transformers engine is not running", replica_id=self._stats.replica_id)
        t0 = time.monotonic()
        with self._track():
            fut: asyncio.Future[GenerationResult] = asyncio.get_running_loop().create_future()
            self._pending.append(_Pending(request, fut))
            self._wake.set()
            result = await fut
            result.engine_latency_s = time.monotonic() - t0
        return self._account(result)

    async def tokenize(self, request: TokenizeRequest) -> TokenizeResult:
        if self._tok is None:
            raise ReplicaDead("transformers engine is not running", replica_id=self._stats.replica_id)
        ids = self._tok.encode(request.text, add_special_tokens=False)
        return TokenizeResult(request_id=request.request_id, tokens=[int(i) for i in ids],
                              replica_id=self._stats.replica_id)  # fmt: skip

    async def score(self, request: ScoreRequest) -> ScoreResult:
        if self._loop_task is None or self._loop_task.done():
            raise ReplicaDead("transformers engine is not running", replica_id=self._stats.replica_id)
        t0 = time.monotonic()
        with self._track():
            async with self._score_lock:  # one score queued on the compute thread at a time: generation steps interleave
                try:
                    choices = await self._on_compute(self._score, request)
                except Exception as e:  # noqa: BLE001 - e.g. out of memory: fail this request, keep serving
                    raise RequestFailed(f"transformers forward failed: {e!r}") from None
        n = len(request.context) + sum(len(c) for c in request.continuations)
        return ScoreResult(request_id=request.request_id, choices=choices, prompt_tokens=n,
                           engine_latency_s=time.monotonic() - t0, replica_id=self._stats.replica_id)  # fmt: skip

    def _score(self, request: ScoreRequest) -> list[ChoiceLogprob]:
        """lm-eval's ``HFLM._loglikelihood_tokens`` on one document's choices: the input is context + continuation
        minus its last token (right-padded), the log-softmax rows that predict the continuation are gathered."""
        torch = self._torch
        rows = [request.context + c for c in request.continuations]
        inputs = [r[:-1] for r in rows]
        width = max(len(x) for x in inputs)
        pad = int(self._tok.pad_token_id)
        dev = self._model.device
        ids = torch.tensor([x + [pad] * (width - len(x)) for x in inputs], device=dev)
        with torch.inference_mode():  # right padding under a causal mask changes no real position (as HFLM runs it)
            logits = self._model(input_ids=ids).logits
            logp = torch.log_softmax(logits.float(), dim=-1)
        out = []
        for i, cont in enumerate(request.continuations):
            n_in = len(inputs[i])
            rows_i = logp[i, n_in - len(cont) : n_in]
            target = torch.tensor(cont, device=dev)
            lps = rows_i.gather(1, target.unsqueeze(1)).squeeze(1).tolist()
            greedy = bool((rows_i.argmax(dim=-1) == target).all())
            out.append(ChoiceLogprob(logprob=float(sum(lps)), n_tokens=len(cont), is_greedy=greedy,
                                     token_logprobs=[float(x) for x in lps]))  # fmt: skip
        return out

    async def check_health(self) -> bool:
        return self._loop_task is not None and not self._loop_task.done()

    def stats(self) -> EngineStats:
        s = super().stats()
        s.queue_depth = len(self._pending)
        return s

    async def shutdown(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down either way
                pass
            self._loop_task = None
        running = [r.handle for r in self._batch.rows] if self._batch is not None else []
        if self._batch is not None:
            self._batch.keep([])
        for p in [*running, *self._pending]:
            if not p.future.done():
                p.future.set_exception(ReplicaDead("engine shut down", replica_id=self._stats.replica_id))
        self._pending.clear()
        self._model = self._tok = self._processor = None
        if self._compute is not None:  # a step still running finishes on it; nothing new is queued
            self._compute.shutdown(wait=False)
            self._compute = None
