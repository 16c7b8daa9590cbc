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
from omnieval.adapters._lmeval_tasks import (
    LOGLIKELIHOOD_TYPES,
    evaluate_kwargs,
    generative_variants,
    output_types,
    parse_options,
    resolve_task,
    task_manager,
    task_spec,
    top_name,
)
from omnieval.adapters._loglik import (
    ContextGroup,
    encode_pair,
    group_by_context,
    rolling_windows,
    texts_to_tokenize,
    truncate,
)
from omnieval.core import (
    ChoiceScore,
    GenerationOptions,
    Message,
    OmnievalUserError,
    Output,
    Record,
    RecordError,
    TextOutput,
    Usage,
)
from serving import ChoiceLogprob, GenerationRequest, GenerationResult, ScoreRequest

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


def make_pool_lm(bridge: Any, generation: GenerationOptions, max_length: int = 2048) -> Any:
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
            self.scored: dict[tuple[str, str | None], list[ChoiceLogprob]] = {}
            self.replica_of: dict[str, str] = {}
            """Context (or document) -> the replica that scored it."""
            """Per (context, continuation) — (document, None) for rolling — what the replica returned."""
            self.max_length = max_length
            self.requests_s = 0.0
            self.tokenize_s = 0.0
            """Of ``requests_s``, the part spent tokenizing with the served model's tokenizer (log-likelihood tasks)."""
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

        def _tokens(self, texts: list[str]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            t0 = time.monotonic()
            answers = bridge.tokenize(texts)
            self.requests_s += time.monotonic() - t0
            self.tokenize_s += time.monotonic() - t0
            for text, toks in zip(texts, answers, strict=True):
                if isinstance(toks, BaseException):
                    raise OmnievalUserError(f"the replica could not tokenize {text[:80]!r}: {toks}")
                out[text] = toks
            return out

        def _score(self, encoded: list[tuple[list[int], list[int]]], labels: list[str],
                   share_context: bool = True) -> list[tuple[ChoiceLogprob | str, str]]:  # fmt: skip
            """(score, replica that answered) of (context ids, continuation ids) pairs; a failed request's pairs get
            its error text."""
            empty = ChoiceLogprob(logprob=0.0, n_tokens=0, is_greedy=True)
            out: list[tuple[ChoiceLogprob | str, str]] = [(empty, "")] * len(encoded)
            todo = [(i, e) for i, e in enumerate(encoded) if e[1]]  # an empty continuation scores 0, greedy
            # a document's choices share a context: one request, one replica. Rolling windows do not (every first
            # window's context is the same prefix token), so they go as requests of their own, in parallel
            groups = group_by_context([e for _, e in todo]) if share_context else [
                ContextGroup(context=list(c), continuations=[list(k)], members=[i]) for i, (_, (c, k)) in enumerate(todo)]
            reqs = [(ScoreRequest(request_id=f"lmeval/score/{n}", context=g.context, continuations=g.continuations),
                     labels[todo[g.members[0]][0]]) for n, g in enumerate(groups)]  # fmt: skip
            t0 = time.monotonic()
            answers = bridge.score(reqs)
            self.requests_s += time.monotonic() - t0
            for g, res in zip(groups, answers, strict=True):
                for j, m in enumerate(g.members):
                    failed = isinstance(res, BaseException)
                    out[todo[m][0]] = (f"{type(res).__name__}: {res}", "") if failed else (res.choices[j], res.replica_id)
            return out

        def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
            pairs = []
            for r in requests:
                ctx, cont = r.args
                if _chat(ctx) is not None:
                    raise OmnievalUserError("a log-likelihood task scores raw text, not a chat: set the task's option "
                                            "apply_chat_template: false (lm-eval's own chat clients cannot score either)")  # fmt: skip
                pairs.append((str(ctx), str(cont)))
            tok = self._tokens(texts_to_tokenize(pairs))
            prefix = bridge.prefix_token_id()
            encoded = [truncate(*encode_pair(c, k, tok, prefix), self.max_length) for c, k in pairs]
            scores = self._score(encoded, [c for c, _ in pairs])
            out = []
            for (ctx, cont), (sc, rid) in zip(pairs, scores, strict=True):
                if isinstance(sc, str):
                    self.failures[ctx] = sc
                    out.append((float("-inf"), False))
                else:
                    self.scored[(ctx, cont)] = [sc]
                    self.replica_of[ctx] = rid
                    out.append((sc.logprob, sc.is_greedy))
            return out

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
            docs = [str(r.args[0]) for r in requests]
            tok = self._tokens(list(dict.fromkeys(docs)))
            prefix = bridge.prefix_token_id()
            windows = [rolling_windows(tok[d], prefix, self.max_length) for d in docs]
            flat = [w for ws in windows for w in ws]
            scores = self._score(flat, [""] * len(flat), share_context=False)
            out = []
            k = 0
            for d, ws in zip(docs, windows, strict=True):
                got, rids = [s for s, _ in scores[k : k + len(ws)]], [r for _, r in scores[k : k + len(ws)]]
                k += len(ws)
                bad = [s for s in got if isinstance(s, str)]
                if bad:
                    self.failures[d] = bad[0]
                    out.append(float("-inf"))
                else:
                    self.scored[(d, None)] = [s for s in got if not isinstance(s, str)]
                    self.replica_of[d] = next((r for r in rids if r), "")
                    out.append(sum(s.logprob for s in self.scored[(d, None)]))
            return out

    return PoolLM()


def _is_loglikelihood(args: list[Any]) -> bool:
    """lm-eval's arguments of a log-likelihood sample are (context, continuation) or (document,) strings; a
    generation sample's are (context, generation kwargs)."""
    return bool(args) and isinstance(args[0], (tuple, list)) and all(isinstance(x, str) for x in args[0])


def _choice_scores(args: list[Any], scored: dict[tuple[str, str | None], list[ChoiceLogprob]]) -> list[ChoiceScore] | None:
    """A log-likelihood sample's scores as the Record keeps them (each choice, or each rolling window of the
    document); None when a request of the sample failed (the Record then carries the error)."""
    keys = [(str(args[0][0]), None)] if len(args[0]) == 1 else [(str(a[0]), str(a[1])) for a in args]
    got = [scored.get(k) for k in keys]
    if any(g is None for g in got):
        return None
    return [ChoiceScore(option=k[1], logprob=c.logprob, n_tokens=c.n_tokens, is_greedy=c.is_greedy)
            for k, g in zip(keys, got, strict=True) for c in (g or [])]  # fmt: skip


SCORING_ENGINES = "a vllm, sglang, transformers or llamacpp replica (an external server: engine_kwargs.scoring)"


def check(task: str, options: dict[str, Any], where: str,
          scorers: dict[str, tuple[str, str | None]] | None = None) -> None:  # fmt: skip
    """Pre-deploy check of a suite entry (name, options, local files, and that every model can answer it); raises
    ``OmnievalUserError``. Cheap: lm-eval's task modules are imported only for the user's own task folders, and
    task YAMLs are read only when a model cannot score or the chat template is on."""
    resolved = resolve_task(task, options, where=where)
    incapable = {m: e for m, (e, how) in (scorers or {}).items() if how is None}
    chat = bool(parse_options(options).apply_chat_template)
    if not incapable and not chat:
        return
    types = output_types(resolved, task_manager(resolved))
    needs = sorted({t for t in types.values() if t in LOGLIKELIHOOD_TYPES})
    if not needs:
        return
    which = next(n for n, t in types.items() if t in LOGLIKELIHOOD_TYPES)
    if chat:
        raise OmnievalUserError(f"{where}: lmeval:{task} scores log-likelihoods ({which}: output_type {needs[0]}) of raw "
                                "text; set options.apply_chat_template: false (lm-eval's own chat clients cannot score "
                                "either)")  # fmt: skip
    model, engine = next(iter(incapable.items()))
    variants = generative_variants(task)
    alt = f", or a generative variant of the task ({', '.join(variants)})" if variants else ""
    raise OmnievalUserError(f"{where}: lmeval:{task} needs log-likelihoods ({which}: output_type {needs[0]}); model "
                            f"{model!r} runs on engine {engine!r}, which cannot score them (no prompt "
                            f"log-probabilities). Use {SCORING_ENGINES}{alt}")  # fmt: skip


class LMEvalAdapter(FrameworkAdapter):
    name: ClassVar[str] = "lmeval"
    pip_line: ClassVar[str] = PIP_LINE

    def check(self, task: str, options: dict[str, Any], where: str,
              scorers: dict[str, tuple[str, str | None]] | None = None) -> None:  # fmt: skip
        check(task, options, where, scorers)

    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        t0 = time.monotonic()
        lm_eval, _ = _import_lm_eval()
        compile_templates_once()
        resolved = resolve_task(task, options)
        tm = task_manager(resolved, options)  # built once: simple_evaluate reuses it
        spec = task_spec(resolved, tm, options)
        lm = make_pool_lm(bridge, generation, parse_options(options).max_length)
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
        raw["timings"] = {"import_and_index_s": t1 - t0, "evaluate_s": t2 - t1, "requests_s": lm.requests_s,
                          "tokenize_s": lm.tokenize_s}
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
            if _is_loglikelihood(s.get("arguments") or []):
                choices = _choice_scores(s["arguments"], lm.scored)
                failure = failure or (None if choices is not None else "a scoring request of this document failed")
                rec = Record(
                    benchmark=bench, index=doc_id, model=model, sample_id=s.get("doc_hash"),
                    messages=[Message.text("user", str(ctx))], label=s.get("target"),
                    options=[str(a[1]) for a in s["arguments"]] if len(s["arguments"][0]) > 1 else None,
                    output=None if failure or choices is None else Output(
                        choices=choices, replica=lm.replica_of.get(str(ctx)) or None),
                    error=RecordError(kind="request_failed", message=failure) if failure else None,
                    metrics=numeric, meta={"framework": "lmeval", "raw_prompt": True},
                )  # fmt: skip
                by_doc[doc_id] = rec
                continue
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
