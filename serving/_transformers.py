"""transformers backend: one padded batched ``model.generate`` per step over the requests waiting at that moment.

This is *static* batching per step, not continuous batching: a batch runs until its longest member finishes, and
requests arriving meanwhile wait for the next step. On CPU that still beats one request at a time by ~4x (B=8: 64
tok/s vs 16 tok/s for SmolLM2-135M), while transformers' own ``generate_batch`` (paged, continuous) was 4x slower on
CPU and sized its KV cache from free memory (9 GiB), so we do not use it.

Requests in one batch must share their decoding options (temperature, top_p, max_tokens, stop, seed): each step
takes the oldest waiting request's option group. ``generate`` runs in a worker thread so the replica's event loop
keeps answering health checks and stats while the model computes.

Multimodal checkpoints (a ``vision_config`` / ``audio_config`` in config.json) load with ``AutoProcessor`` and
``AutoModelForImageTextToText`` (or ``AutoModelForMultimodalLM`` for audio): a request with images or audio goes
through the model's own chat template and processor (image tiling, log-mel features, placeholder expansion). Media
requests waiting together go through the processor as one batch, left-padded like text (each result counts its own
prompt tokens): one ``generate`` per batch and kind of media. Video reaches such a model as frames (``video_input: frames``).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omnieval.core import GenerationOptions, MissingDependencyError, OmnievalUserError, ReplicaDead, RequestFailed
from serving._engine import Engine, pop_known
from serving._features import EngineFeatures, hf_features
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
}


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
        self.model_path = model_path
        self.generate_calls = 0
        """Batched ``generate`` calls so far (tests check that concurrent requests share calls)."""
        self._pending: deque[_Pending] = deque()
        self._wake = asyncio.Event()
        self._running = 0
        self._loop_task: asyncio.Task[None] | None = None
        self._model: Any = None
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

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
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
        dtype = self.opts["dtype"]
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
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
        model = auto.from_pretrained(where, dtype=getattr(torch, dtype), **kw)
        tok.padding_side = "left"  # generated tokens must follow every prompt directly
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._tok, self._model = tok, model.to(device).eval()
        prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self._stats.prefix_token_id = None if prefix is None else int(prefix)
        self._stats.tokenizer_dir = str(p) if p.is_dir() else None

    async def _batch_loop(self) -> None:
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
                results = await asyncio.to_thread(self._generate_batch, [p.request for p in batch])
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

    def _generate_media_rows(self, reqs: list[GenerationRequest], batched: bool = True) -> list[GenerationResult]:
        torch, tok = self._torch, self._tok
        t0 = time.monotonic()
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
        o = reqs[0].options
        gc = self._generation_config(o)
        if o.temperature > 0 and o.seed is not None:
            torch.manual_seed(o.seed)
        with torch.inference_mode():
            out = self._model.generate(**enc, generation_config=gc, tokenizer=tok)
        self.media_generate_calls += 1
        self._stats.media_items += sum(len(i) for i in images) + len(audios)
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
            async with self._score_lock:  # one forward at a time: they would only split the same cores
                try:
                    choices = await asyncio.to_thread(self._score, request)
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
        while self._pending:
            p = self._pending.popleft()
            if not p.future.done():
                p.future.set_exception(ReplicaDead("engine shut down", replica_id=self._stats.replica_id))
        self._model = self._tok = self._processor = None
