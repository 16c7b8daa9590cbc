"""Continuous batching over a Hugging Face causal LM's own KV cache (``DynamicCache``).

A padded batched ``generate`` runs every row until the longest one finishes and prefills long prompts padded
together. On the federated bench's video turns (plumbing Idefics3, ~1,000-token frame prompts, 2 cores) one 64-token
answer among seven 1-token answers made a batch of eight decode 64 steps for all eight, and the padded prefill of
eight prompts took 22.6 s against 17.0 s one by one: the batched engine was 1.55x *slower* than batch 1.

Here each request is prefilled alone (short text prompts together, within a token budget), its cache rows are
left-padded into the running batch, every decode step serves all running rows, and a row leaves the batch the step
it finishes (EOS, its own ``max_tokens``, its own stop strings). Rows carry their own sampling options and seeded
generator, so requests with different options share steps and a seeded sample does not depend on its neighbours.

The model's ``forward`` does the work (attention, rotary positions from explicit ``position_ids``, cache updates);
this module only keeps the rows, the padding mask and the cache's batch dimension in step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from serving._text import cut_at_stop
from serving._types import GenerationRequest, GenerationResult

_PROCESSORS = {  # generation_config fields that add logits processors generate() would apply and this loop does not
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "bad_words_ids": None,
    "suppress_tokens": None, "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
    "sequence_bias": None, "min_new_tokens": None, "min_length": 0, "typical_p": 1.0, "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0, "min_p": None, "exponential_decay_length_penalty": None, "guidance_scale": None,
}  # fmt: skip


def unsupported(model: Any, probe_cache: Any) -> str | None:
    """Why this model cannot be batched continuously here (then ``generate`` serves it), or None."""
    cfg = model.config
    if getattr(cfg, "is_encoder_decoder", False):
        return "it is an encoder-decoder model"
    if any(hasattr(m, "rope_deltas") for m in (model, getattr(model, "model", None)) if m is not None):
        return "its rotary positions depend on the media (rope_deltas), which a merged batch cannot carry"
    gc = model.generation_config
    for name, neutral in _PROCESSORS.items():
        value = getattr(gc, name, neutral)
        if value not in (neutral, None) and not (name == "min_length" and not value):
            return f"its generation_config sets {name}={value!r}, a logits processor this loop does not apply"
    layers = getattr(probe_cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers or []}) or [type(probe_cache).__name__]
        return f"its KV cache is not plain full attention ({', '.join(kinds)})"
    return None


@dataclass
class Row:
    """One request in the running batch."""

    handle: Any
    """The engine's own handle for the request (its future), returned with the result."""
    request: GenerationRequest
    prompt_tokens: int
    eos: frozenset[int]
    generator: Any
    """The row's seeded ``torch.Generator`` when it samples; None when greedy."""
    t0: float = field(default_factory=time.monotonic)
    tokens: list[int] = field(default_factory=list)


def sample(torch: Any, logits: Any, rows: list[Row]) -> list[int]:
    """The next token of every row: argmax for greedy rows; for sampled rows temperature, then nucleus (top_p)
    filtering as transformers' ``TopPLogitsWarper`` does it, then a draw from the row's own generator."""
    logits = logits.float()
    out = logits.argmax(dim=-1).tolist()
    for i, r in enumerate(rows):
        o = r.request.options
        if o.temperature <= 0:
            continue
        x = logits[i] / o.temperature
        if o.top_p < 1.0:
            srt, idx = torch.sort(x, descending=False)
            cum = srt.softmax(dim=-1).cumsum(dim=-1)
            drop = cum <= (1 - o.top_p)
            drop[-1] = False  # keep at least the most likely token
            x = x.scatter(0, idx[drop], float("-inf"))
        out[i] = int(torch.multinomial(x.softmax(dim=-1), 1, generator=r.generator).item())
    return out


def result(tok: Any, r: Row, reason: str) -> GenerationResult:
    """The row as its request's result: the EOS token counts but is not shown; text ends before a stop string."""
    text, _ = cut_at_stop(tok.decode(r.tokens, skip_special_tokens=True), list(r.request.options.stop))
    return GenerationResult(request_id=r.request.request_id, text=text, finish_reason=reason,
                            prompt_tokens=r.prompt_tokens, completion_tokens=len(r.tokens),
                            engine_latency_s=time.monotonic() - r.t0)  # fmt: skip


def push(tok: Any, r: Row, token: int) -> str | None:
    """Append a generated token; the finish reason if the row is done."""
    r.tokens.append(token)
    if token in r.eos:
        return "stop"
    stop = r.request.options.stop
    if stop and cut_at_stop(tok.decode(r.tokens, skip_special_tokens=True), list(stop))[1]:
        return "stop"
    return "length" if len(r.tokens) >= r.request.options.max_tokens else None


class RunningBatch:
    """The rows decoding together, their left-padded attention mask ``[B, T]`` and their shared cache
    ``[B, heads, T, head_dim]`` per layer, kept in the same row order."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.rows: list[Row] = []
        self.cache: Any = None
        self.mask: Any = None
        self.last: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, rows: list[Row], cache: Any, mask: Any) -> None:
        """Join rows prefilled together (their cache and mask, already left-padded among themselves)."""
        torch = self.torch
        if not self.rows:
            self.rows, self.cache, self.mask = list(rows), cache, mask
        else:
            width = max(self.mask.shape[1], mask.shape[1])

            def left(x: Any, dim: int) -> Any:
                n = width - x.shape[dim]
                if n == 0:
                    return x
                shape = list(x.shape)
                shape[dim] = n
                return torch.cat([x.new_zeros(shape), x], dim=dim)

            for mine, theirs in zip(self.cache.layers, cache.layers, strict=True):
                mine.keys = torch.cat([left(mine.keys, 2), left(theirs.keys, 2)], dim=0)
                mine.values = torch.cat([left(mine.values, 2), left(theirs.values, 2)], dim=0)
            self.mask = torch.cat([left(self.mask, 1), left(mask, 1)], dim=0)
            self.rows += rows
        self.last += [r.tokens[-1] for r in rows]

    def keep(self, keep: list[int]) -> None:
        """Keep only these rows (in order), then drop padding columns no remaining row attends to."""
        torch = self.torch
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        self.last = [self.last[i] for i in keep]
        if not keep:
            self.cache = self.mask = None
            return
        idx = torch.tensor(keep, device=self.mask.device)
        self.cache.batch_select_indices(idx)
        self.mask = self.mask[idx]
        lead = int(self.mask.any(dim=0).int().argmax())
        if lead:
            self.mask = self.mask[:, lead:]
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, lead:], layer.values[:, :, lead:]

    def step(self, model: Any, extra: dict[str, Any]) -> Any:
        """One decode step for every row: the logits of each row's next token ``[B, vocab]``."""
        torch = self.torch
        dev = self.mask.device
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self.rows), 1))], dim=1)
        position = self.mask.sum(dim=1, keepdim=True) - 1
        ids = torch.tensor(self.last, device=dev).unsqueeze(1)
        out = model(input_ids=ids, attention_mask=self.mask, position_ids=position, past_key_values=self.cache,
                    use_cache=True, **extra)  # fmt: skip
        self.cache = out.past_key_values
        return out.logits[:, -1, :]
