"""lm-evaluation-harness adapter: a registered lm-eval ``LM`` whose requests go through the pool.

Any lm-eval task, group or task file runs with lm-eval's own prompts, filters, metrics, aggregation and standard
errors, at lm-eval's own defaults. Requests go out as lm-eval's API clients would send them: a raw prompt to
``/v1/completions`` (``local-completions``), or chat messages when ``apply_chat_template`` is on
(``local-chat-completions``), so the same server scores the same through omnieval and through ``lm_eval``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from typing import Any, ClassVar

from omnieval.adapters._base import FrameworkAdapter, FrameworkResult, cache_meta, harness_rows, import_framework
from omnieval.adapters._lmeval_tasks import evaluate_kwargs, resolve_task, task_manager, task_spec, top_name
from omnieval.core import (
    GenerationOptions,
    Message,
    OmnievalUserError,
    Output,
    Record,
    RecordError,
    TextOutput,
    Usage,
)
from serving import GenerationRequest, GenerationResult

PIP_LINE = "pip install 'omnieval[lmeval]'"
_UNIT_METRICS = {"acc", "acc_norm", "exact_match", "f1", "mcc", "em", "pass@1", "pass_at_1", "brier_score"}
_SENT_KWARGS = {"until", "max_gen_toks", "max_tokens", "temperature", "top_p", "do_sample"}
"""Generation kwargs the pool sends (as lm-eval's API clients do); others are reported, not silently dropped."""
log = logging.getLogger("omnieval")


def _import_lm_eval() -> Any:
    return import_framework("the lm-eval adapter", PIP_LINE, "lm_eval", "lm_eval.api.model:LM")


def compile_templates_once() -> None:
    """lm-eval compiles a task's Jinja template anew for every document and field (``utils.apply_template`` calls
    ``env.from_string`` each time: 24,000 compiles for 4,000 gsm8k documents, most of lm-eval's own time). Here each
    template string is compiled once, in lm-eval's own environment, and renders exactly the same text."""
    import lm_eval.utils as u

    if getattr(u.apply_template, "omnieval_compiled_once", False):
        return
    compiled = functools.lru_cache(maxsize=4096)(u.env.from_string)

    def apply_template(template: str, doc: dict[str, Any]) -> str:
        return str(compiled(template).render(**doc))

    apply_template.omnieval_compiled_once = True  # type: ignore[attr-defined]
    u.apply_template = apply_template


class ChatPrompt(str):
    """A templated context: the chat as JSON (what ``PoolLM.apply_chat_template`` returns), told apart from a raw
    prompt by its type, never by its text."""


def _chat(ctx: Any) -> list[dict[str, Any]] | None:
    """The chat messages of a templated context, None for a raw prompt."""
    if isinstance(ctx, ChatPrompt):
        text = str(ctx)
    elif hasattr(ctx, "prompt"):  # lm-eval's own JsonChatStr
        text = ctx.prompt
    else:
        return None
    msgs = json.loads(text)
    if not (isinstance(msgs, list) and all(isinstance(m, dict) and "role" in m for m in msgs)):
        raise OmnievalUserError(f"lm-eval gave a chat context that is not a message list: {text[:200]}")
    return msgs


def _key(ctx: Any) -> str:
    return str(getattr(ctx, "prompt", ctx))


def request_for(i: int, ctx: Any, kw: dict[str, Any], generation: GenerationOptions) -> GenerationRequest:
    """One ``generate_until`` request as lm-eval's ``local-completions`` / ``local-chat-completions`` build it:
    ``max_gen_toks`` (else the suite's ``max_tokens``, 256 = lm-eval's default), temperature 0 unless set, the
    task's ``until`` as stop strings (chat: the first 4, as lm-eval sends them)."""
    kw = dict(kw or {})
    msgs = _chat(ctx)
    max_tokens = kw.get("max_tokens", kw.get("max_gen_toks", generation.max_tokens))
    until = kw.get("until") or []
    stop = [until] if isinstance(until, str) else list(until)
    opts = GenerationOptions(
        temperature=float(kw.get("temperature", 0.0) or 0.0), top_p=float(kw.get("top_p", 1.0)),
        max_tokens=int(max_tokens), stop=stop[:4] if msgs is not None else stop, seed=generation.seed,
    )  # fmt: skip
    if msgs is not None:
        return GenerationRequest(request_id=f"lmeval/{i}", messages=msgs, options=opts)
    return GenerationRequest(request_id=f"lmeval/{i}", messages=[], prompt=str(ctx), options=opts)


def make_pool_lm(bridge: Any, generation: GenerationOptions) -> Any:
    """Build the ``LM`` subclass lazily so importing omnieval never imports lm-eval."""
    _, LM = _import_lm_eval()

    class PoolLM(LM):  # type: ignore[misc, valid-type]
        """``apply_chat_template`` returns the chat as JSON so the engine applies the model's own template; a
        framework batch is sent as concurrent pool requests."""

        def __init__(self) -> None:
            super().__init__()
            self.failures: dict[str, str] = {}
            self.results: dict[str, GenerationResult] = {}
            self.ignored_kwargs: set[str] = set()
            self.requests_s = 0.0
            """Seconds spent waiting for the pool's answers (the rest of the task is lm-eval's own work)."""

        @property
        def tokenizer_name(self) -> str:
            return "omnieval-pool"

        def chat_template(self, chat_template: bool | str = False) -> str:
            return "omnieval-pool"

        def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
            return ChatPrompt(json.dumps(chat_history, ensure_ascii=False))

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            reqs = []
            for i, r in enumerate(requests):
                ctx, kw = r.args
                extra = set(kw or {}) - _SENT_KWARGS
                if extra - self.ignored_kwargs:
                    log.warning("lm-eval generation kwargs %s are not sent through the pool (sent: %s)",
                                sorted(extra - self.ignored_kwargs), sorted(_SENT_KWARGS))  # fmt: skip
                    self.ignored_kwargs |= extra
                reqs.append(request_for(i, ctx, kw, generation))
            out = []
            t0 = time.monotonic()
            answers = bridge.generate(reqs)
            self.requests_s += time.monotonic() - t0
            for r, res in zip(requests, answers, strict=True):
                key = _key(r.args[0])
                if isinstance(res, BaseException):
                    self.failures[key] = f"{type(res).__name__}: {res}"
                    out.append("")
                else:
                    self.results[key] = res
                    out.append(res.text)
            return out

        def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
            raise OmnievalUserError(
                "this lm-eval task needs loglikelihood (multiple_choice output); the pool's engines here serve "
                "chat completions without prompt logprobs — use a generate_until variant of the task"
            )

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
            return self.loglikelihood(requests)  # type: ignore[return-value]

    return PoolLM()


def check(task: str, options: dict[str, Any], where: str) -> None:
    """Pre-deploy check of a suite entry (name, options, local files); raises ``OmnievalUserError``. Cheap: lm-eval's
    task modules are imported only for the user's own task folders."""
    resolve_task(task, options, where=where)


class LMEvalAdapter(FrameworkAdapter):
    name: ClassVar[str] = "lmeval"
    pip_line: ClassVar[str] = PIP_LINE

    def check(self, task: str, options: dict[str, Any], where: str) -> None:
        check(task, options, where)

    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        t0 = time.monotonic()
        lm_eval, _ = _import_lm_eval()
        compile_templates_once()
        resolved = resolve_task(task, options)
        tm = task_manager(resolved)  # built once: simple_evaluate reuses it
        spec = task_spec(resolved, tm, options)
        lm = make_pool_lm(bridge, generation)
        t1 = time.monotonic()
        res = lm_eval.simple_evaluate(model=lm, tasks=[spec], task_manager=tm, **evaluate_kwargs(options, limit))
        t2 = time.monotonic()
        if not res or not res.get("results"):
            raise OmnievalUserError(f"lm-eval returned no results for {task!r}")
        bench = f"lmeval:{task if not task.endswith(('.yaml', '.yml')) else os.path.splitext(os.path.basename(task))[0]}"
        top = top_name(spec)
        if top not in res["results"] and len(res["samples"]) == 1:
            top = next(iter(res["samples"]))
        records = [r for leaf, samples in res["samples"].items()
                   for r in self._records(samples, lm, bench=bench if leaf == top else f"{bench}/{leaf}", model=model)]  # fmt: skip
        scores = harness_rows(res, top=top, benchmark=bench, model=model, records=records, framework="lmeval",
                              unit_metrics=_UNIT_METRICS)  # fmt: skip
        keep = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples")
        raw = json.loads(json.dumps({k: res[k] for k in keep if k in res}, default=str))
        if lm.ignored_kwargs:
            raw["ignored_gen_kwargs"] = sorted(lm.ignored_kwargs)
        raw["timings"] = {"import_and_index_s": t1 - t0, "evaluate_s": t2 - t1, "requests_s": lm.requests_s}
        return FrameworkResult(records=records, scores=scores, benchmark=bench,
                               versions={"lm-eval": getattr(lm_eval, "__version__", "?")}, raw=raw)  # fmt: skip

    @staticmethod
    def _records(samples: list[dict[str, Any]], lm: Any, *, bench: str, model: str) -> list[Record]:
        by_doc: dict[int, Record] = {}
        for s in samples:
            doc_id = int(s["doc_id"])
            filt = s.get("filter", "none")
            numeric = {f"{m}/{filt}": float(s[m]) for m in s.get("metrics", []) if isinstance(s.get(m), (int, float))}
            if doc_id in by_doc:
                rec = by_doc[doc_id]
                rec.metrics.update(numeric)
                rec.meta.setdefault("filtered", {})[filt] = s["filtered_resps"][0]
                continue
            ctx = s["arguments"][0][0] if s.get("arguments") else ""
            chat = _chat(ctx)
            key = _key(ctx)
            msgs: list[dict[str, Any]] = chat if chat is not None else [{"role": "user", "content": str(ctx)}]
            raw = s["resps"][0][0] if s.get("resps") and s["resps"][0] else ""
            gen = lm.results.get(key)
            failure = lm.failures.get(key)
            filtered = s["filtered_resps"][0] if s.get("filtered_resps") else None
            rec = Record(
                benchmark=bench, index=doc_id, model=model, sample_id=s.get("doc_hash"),
                messages=[Message.text(m["role"], m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
                          for m in msgs],
                label=s.get("target"),
                output=None if failure else Output(
                    text=TextOutput(prediction=[str(raw)], prediction_postprocessed=[None if filtered is None else str(filtered)]),
                    finish_reason=gen.finish_reason if gen else None, replica=gen.replica_id if gen else None,
                    usage=Usage(prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens) if gen else None,
                ),
                error=RecordError(kind="request_failed", message=failure) if failure else None,
                metrics=numeric,
                meta={"filtered": {filt: filtered}, "framework": "lmeval", **({"raw_prompt": True} if chat is None else {}),
                      **cache_meta(gen)},
            )  # fmt: skip
            by_doc[doc_id] = rec
        return [by_doc[k] for k in sorted(by_doc)]
