"""lm-evaluation-harness adapter: a registered lm-eval ``LM`` whose requests go through the pool.

Any lm-eval task runs by name with its own prompts, filters and metrics; the scores are lm-eval's own. Bundled tasks
run offline on local files by overriding their dataset (``data_files``), keeping prompt, filters and metrics.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from omnieval.adapters._base import FrameworkAdapter, FrameworkResult, cache_meta, harness_scores, import_framework
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
_UNIT_METRICS = {"acc", "acc_norm", "exact_match", "f1", "mcc", "em", "pass@1"}


def _import_lm_eval() -> Any:
    return import_framework("the lm-eval adapter", PIP_LINE, "lm_eval", "lm_eval.api.model:LM")


def _messages(ctx: Any) -> list[dict[str, Any]]:
    text = getattr(ctx, "prompt", ctx)
    if isinstance(text, str) and text.startswith("["):
        try:
            msgs = json.loads(text)
            if isinstance(msgs, list) and all(isinstance(m, dict) and "role" in m for m in msgs):
                return msgs
        except json.JSONDecodeError:
            pass
    return [{"role": "user", "content": str(text)}]


def make_pool_lm(bridge: Any, generation: GenerationOptions) -> Any:
    """Build the ``LM`` subclass lazily so importing omnieval never imports lm-eval."""
    _, LM = _import_lm_eval()

    class PoolLM(LM):  # type: ignore[misc, valid-type]
        """Keeps chat messages structured (``apply_chat_template`` returns JSON) so the engine applies the model's
        own chat template; a framework batch is sent as concurrent pool requests."""

        def __init__(self) -> None:
            super().__init__()
            self.failures: dict[str, str] = {}
            self.results: dict[str, GenerationResult] = {}

        @property
        def tokenizer_name(self) -> str:
            return "omnieval-pool"

        def chat_template(self, chat_template: bool | str = False) -> str:
            return "omnieval-pool"

        def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
            return json.dumps(chat_history)

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            reqs = []
            for i, r in enumerate(requests):
                ctx, kw = r.args
                until = kw.get("until") or []
                opts = GenerationOptions(
                    temperature=float(kw.get("temperature", generation.temperature) or 0.0),
                    max_tokens=int(kw.get("max_gen_toks", generation.max_tokens)),
                    stop=[until] if isinstance(until, str) else list(until)[:4],
                    seed=generation.seed,
                )
                reqs.append(GenerationRequest(request_id=f"lmeval/{i}", messages=_messages(ctx), options=opts))
            out = []
            for req, res in zip(reqs, bridge.generate(reqs), strict=True):
                key = json.dumps(req.messages)
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


def task_config(task: str, options: dict[str, Any]) -> Any:
    """The task by name, or the bundled task with its dataset replaced by local files (fully offline)."""
    if "data_files" not in options:
        return task
    import copy

    from lm_eval.tasks import TaskManager

    tm = TaskManager()
    if task not in tm.task_index:
        raise OmnievalUserError(f"lm-eval has no task {task!r}; `lm-eval ls tasks` lists them")
    cfg = copy.deepcopy(dict(tm.task_index[task].cfg))  # the bundled YAML with its includes resolved
    cfg.update(
        task=options.get("alias", f"{task}_local"), tag=[], dataset_path="json", dataset_name=None,
        dataset_kwargs={"data_files": options["data_files"]},
    )  # fmt: skip
    for split in ("training_split", "validation_split", "fewshot_split"):
        if cfg.get(split) and cfg[split] not in options["data_files"]:
            cfg[split] = None
    return cfg


def evaluate_kwargs(options: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``simple_evaluate``'s arguments for a suite task (besides model and tasks): the adapter and ``bench
    federated``'s conventional baseline run the task identically."""
    return dict(
        num_fewshot=options.get("num_fewshot"), limit=limit, log_samples=True,
        apply_chat_template=bool(options.get("apply_chat_template", True)),
        fewshot_as_multiturn=bool(options.get("fewshot_as_multiturn", True)), random_seed=0, numpy_random_seed=0,
        torch_random_seed=0, fewshot_random_seed=0, bootstrap_iters=0,
    )  # fmt: skip


class LMEvalAdapter(FrameworkAdapter):
    name: ClassVar[str] = "lmeval"
    pip_line: ClassVar[str] = PIP_LINE

    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        lm_eval, _ = _import_lm_eval()
        lm = make_pool_lm(bridge, generation)
        cfg = task_config(task, options)
        res = lm_eval.simple_evaluate(model=lm, tasks=[cfg], **evaluate_kwargs(options, limit))
        name = next(iter(res["results"]))
        bench = f"lmeval:{task}"
        records = self._records(res["samples"][name], lm, bench=bench, model=model)
        scores = harness_scores(res["results"][name], model=model, benchmark=bench, records=records,
                                framework="lmeval", unit_metrics=_UNIT_METRICS)  # fmt: skip
        return FrameworkResult(
            records=records, scores=scores, versions={"lm-eval": getattr(lm_eval, "__version__", "?")},
            raw={"results": res["results"], "configs": json.loads(json.dumps(res.get("configs", {}), default=str))},
        )  # fmt: skip

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
            msgs = _messages(ctx)
            raw = s["resps"][0][0] if s.get("resps") and s["resps"][0] else ""
            key = json.dumps(msgs)
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
                metrics=numeric, meta={"filtered": {filt: filtered}, "framework": "lmeval", **cache_meta(gen)},
            )  # fmt: skip
            by_doc[doc_id] = rec
        return [by_doc[k] for k in sorted(by_doc)]
