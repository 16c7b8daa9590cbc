"""lmms-eval adapter: a chat-protocol ``lmms`` model whose requests go through the pool, images included.

lmms-eval keeps its task prompts, ``doc_to_visual`` and metrics; each request's ``doc_to_messages`` becomes OpenAI
messages (base64 ``image_url`` parts) sent as one concurrent batch through the ``PoolBridge``. Records keep the image
as a cached file path (small records), and lmms-eval's own per-sample scores and aggregates.

lmms-eval pins torch/transformers/filelock, so it normally runs in its own venv (scripts/make_framework_venv.sh lmms)
given to the suite as ``frameworks: {lmms: {python: ...}}``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from omnieval.adapters._base import FrameworkAdapter, FrameworkResult, cache_meta, harness_rows, import_framework
from omnieval.adapters._media import modality, record_messages
from omnieval.core import (
    GenerationOptions,
    OmnievalUserError,
    Output,
    Record,
    RecordError,
    TextOutput,
    Usage,
)
from serving import GenerationRequest, GenerationResult

PIP_LINE = "pip install 'omnieval[lmms]' (or its own venv: scripts/make_framework_venv.sh lmms)"
TASK_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "lmms"
"""Local lmms-eval tasks shipped with omnieval (``tiny_shapes``); always on the task path."""
_UNIT_METRICS = {"acc", "acc_norm", "exact_match", "f1", "anls", "relaxed_accuracy", "pass@1"}
"""Metrics lmms-eval reports on 0-1; omnieval scores are 0-100."""


def _import_lmms() -> Any:
    return import_framework("the lmms-eval adapter", PIP_LINE, "lmms_eval", "lmms_eval.api.model:lmms")


def _options(kw: dict[str, Any], generation: GenerationOptions) -> GenerationOptions:
    until = kw.get("until") or []
    return GenerationOptions(
        temperature=float(kw.get("temperature", generation.temperature) or 0.0),
        max_tokens=int(kw.get("max_new_tokens") or generation.max_tokens),
        stop=[until] if isinstance(until, str) else list(until)[:4],
        seed=generation.seed,
    )


def make_pool_lmms(bridge: Any, generation: GenerationOptions) -> Any:
    """Build the ``lmms`` subclass lazily so importing omnieval never imports lmms-eval (or torch)."""
    _, lmms = _import_lmms()
    from lmms_eval.api.instance import GenerationResult as LmmsResult
    from lmms_eval.api.instance import TokenCounts
    from lmms_eval.protocol import ChatMessages

    class PoolLMMS(lmms):  # type: ignore[misc, valid-type]
        """Chat protocol (``is_simple = False``): media stay typed content parts, so the engine gets real images."""

        is_simple = False

        def __init__(self) -> None:
            super().__init__()
            self.sent: dict[tuple[str, int], tuple[list[dict[str, Any]], GenerationOptions, Any]] = {}

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
            reqs, keys = [], []
            for r in requests:
                _, doc_to_messages, kw, doc_id, task, split = r.args
                raw = doc_to_messages(self.task_dict[task][split][doc_id])
                msgs = ChatMessages(messages=raw).to_openai_messages()
                reqs.append(GenerationRequest(request_id=f"lmms/{task}/{doc_id}", messages=msgs,
                                              options=_options(kw or {}, generation)))  # fmt: skip
                keys.append((task, int(doc_id)))
            out = []
            for key, req, res in zip(keys, reqs, bridge.generate(reqs), strict=True):
                # the Record keeps the image as a cached file, not the base64 payload
                self.sent[key] = (req.messages, req.options, res)
                if isinstance(res, BaseException):
                    out.append(LmmsResult(text="", token_counts=TokenCounts()))
                else:
                    out.append(LmmsResult(text=res.text, token_counts=TokenCounts(
                        input_tokens=res.prompt_tokens, output_tokens=res.completion_tokens)))  # fmt: skip
            return out

        def generate_until_multi_round(self, requests: list[Any]) -> list[Any]:
            raise OmnievalUserError("multi-round lmms-eval tasks are not supported through the pool yet")

        def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
            raise OmnievalUserError(
                "this lmms-eval task needs loglikelihood; the pool's engines serve chat completions without prompt "
                "logprobs — use a generate_until task"
            )

    return PoolLMMS()


def yaml_output_type(path: str | Path) -> str:
    """A task YAML's ``output_type`` (lmms-eval's default ``generate_until``), following ``include:`` and reading
    ``!function`` tags as text (nothing imported)."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: str(node.value))
    p = Path(path)
    for _ in range(8):  # an include chain is short; a cycle must not hang the check
        cfg = yaml.load(p.read_text(), Loader=_Loader) or {}  # noqa: S506 - SafeLoader plus one text-only tag
        if cfg.get("output_type"):
            return str(cfg["output_type"])
        inc = cfg.get("include")
        if not inc:
            break
        p = p.parent / str(inc[0] if isinstance(inc, list) else inc)
    return "generate_until"


def _include_paths(options: dict[str, Any]) -> list[str]:
    """omnieval's task dir, then ``options.include_path`` made absolute (actors may run on other nodes)."""
    extra = options.get("include_path") or []
    return [str(TASK_DIR), *[str(Path(p).resolve()) for p in ([extra] if isinstance(extra, str) else extra)]]


def task_manager(task: str, options: dict[str, Any], scratch: Path) -> tuple[Any, str]:
    """The TaskManager that knows ``task`` and the name to evaluate, optionally with its dataset replaced.

    omnieval's own task dir and ``options.include_path`` (absolute: actors may run on other nodes) are indexed first
    (fast, no built-in index); lmms-eval's bundled tasks only when the name is not found there. ``options.data_files`` swaps in local JSON files, keeping
    the task's prompts and metrics (an ``include:`` of its YAML), like the lm-eval adapter.
    """
    from lmms_eval.tasks import TaskManager

    include = _include_paths(options)
    tm = TaskManager(verbosity="WARNING", include_path=include, include_defaults=False)
    if task not in tm.all_tasks:
        tm = TaskManager(verbosity="WARNING", include_path=include)
    if task not in tm.all_tasks:
        import difflib

        close = difflib.get_close_matches(task, list(tm.all_tasks), n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise OmnievalUserError(f"lmms-eval has no task {task!r} (searched {include} and its bundled tasks).{hint}")
    if "data_files" not in options:
        return tm, task
    import yaml

    alias = str(options.get("alias", f"{task}_local"))
    override = {"include": tm.task_index[task]["yaml_path"], "task": alias, "dataset_path": "json",
                "dataset_name": None, "dataset_kwargs": {"data_files": options["data_files"]}}  # fmt: skip
    (scratch / f"{alias}.yaml").write_text(yaml.safe_dump(override))
    return TaskManager(verbosity="WARNING", include_path=str(scratch), include_defaults=False), alias


def _index_key(include: list[str], defaults: bool) -> str:
    """What an index depends on: lmms-eval's version (its bundled tasks) and every local YAML's path, size and
    modification time (a task added or edited there makes a new index)."""
    import hashlib
    import importlib.metadata as md

    h = hashlib.sha256(f"{md.version('lmms_eval')}|{defaults}".encode())
    for root in include:
        for f in sorted(Path(root).rglob("*.y*ml")):
            st = f.stat()
            h.update(f"|{f}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def task_index(include: list[str], defaults: bool) -> dict[str, dict[str, Any]]:
    """lmms-eval's own task index (name -> ``type``, ``yaml_path``) over ``include`` (and its bundled tasks when
    ``defaults``), cached under the omnieval cache: importing ``lmms_eval.tasks`` takes ~5 s (torch, transformers'
    image processors), and the pre-deploy check would pay it on every run before anything starts."""
    from omnieval.core import cache_dir

    path = cache_dir() / "lmms-task-index" / f"{_index_key(include, defaults)}.json"
    if path.exists():
        try:
            cached: dict[str, dict[str, Any]] = json.loads(path.read_text())
            return cached
        except (OSError, ValueError):
            pass  # a torn write: rebuilt below
    from lmms_eval.tasks import TaskManager

    tm = TaskManager(verbosity="WARNING", include_path=include, include_defaults=defaults)
    out = {name: {"type": e.get("type"), "yaml_path": e["yaml_path"] if isinstance(e.get("yaml_path"), str) else None}
           for name, e in tm.task_index.items()}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{id(out)}")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)
    return out


def task_entry(task: str, options: dict[str, Any], where: str) -> dict[str, Any]:
    """The task's index entry, found as ``task_manager`` finds it (omnieval's task dir and ``include_path`` first,
    then the bundled tasks), from the cached index; an unknown name is an error with lmms-eval's close names."""
    include = _include_paths(options)
    for p in include:
        if not Path(p).is_dir():
            raise OmnievalUserError(f"{where}.options.include_path: {p} is not a folder; fix the path")
    index = task_index(include, defaults=False)
    if task not in index:
        index = task_index(include, defaults=True)
    if task not in index:
        import difflib

        close = difflib.get_close_matches(task, list(index), n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise OmnievalUserError(f"{where}.name: lmms-eval has no task {task!r} (searched {include} and its bundled "
                                f"tasks).{hint}")  # fmt: skip
    return index[task]


def evaluate_kwargs(options: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``simple_evaluate``'s arguments for a suite task (besides model, tasks and task manager): the adapter and
    ``bench federated``'s conventional baseline run the task identically."""
    seed = options.get("seed", [0, 1234, 1234, 1234])  # lmms-eval's CLI default, as lm-eval's
    seeds = [seed] * 4 if isinstance(seed, int) else list(seed)
    return dict(
        num_fewshot=options.get("num_fewshot"), limit=limit, log_samples=True,
        bootstrap_iters=int(options.get("bootstrap_iters", 100000)), random_seed=seeds[0], numpy_random_seed=seeds[1],
        torch_random_seed=seeds[2], fewshot_random_seed=seeds[3],
        process_docs_parallel=1, verbosity="WARNING",  # omnieval's: one process per actor, quiet logs
    )  # fmt: skip


class LMMSEvalAdapter(FrameworkAdapter):
    name: ClassVar[str] = "lmms"
    pip_line: ClassVar[str] = PIP_LINE

    def check(self, task: str, options: dict[str, Any], where: str,
              scorers: dict[str, tuple[str, str | None]] | None = None) -> None:  # fmt: skip
        """The task name resolves (lmms-eval's own index, omnieval's task dir and ``include_path`` first), local
        data files exist, and the task is one the pool can answer (generation), before anything is deployed."""
        for split, f in (options.get("data_files") or {}).items():
            if "://" not in str(f) and not Path(f).exists():
                raise OmnievalUserError(f"{where}.options.data_files.{split}: {f} does not exist; fix the path")
        entry = task_entry(task, options, where)
        kind = yaml_output_type(entry["yaml_path"]) if entry.get("yaml_path") and entry.get("type") == "task" else None
        if kind in ("loglikelihood", "multiple_choice"):
            raise OmnievalUserError(
                f"{where}: lmms:{task} needs log-likelihoods of its (media + text) prompts (output_type {kind}); "
                "lmms-eval's chat model interface, which omnieval's lmms path uses, has no log-likelihood (only its "
                "simple/ HF models score, in-process), so the pool cannot answer it. Run the task's generative form "
                f"({task.replace('_mcppl', '').replace('_ppl', '')} where lmms-eval has it), or a text task "
                "through framework: lmeval"
            )

    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        _import_lmms()
        from lmms_eval.evaluator import simple_evaluate

        lm = make_pool_lmms(bridge, generation)
        with tempfile.TemporaryDirectory(prefix="omnieval-lmms-") as scratch:
            tm, name = task_manager(task, options, Path(scratch))
            res = simple_evaluate(model=lm, tasks=[name], task_manager=tm, **evaluate_kwargs(options, limit))
        if not res:
            raise OmnievalUserError(f"lmms-eval returned no results for {task!r}")
        bench = f"lmms:{task}"
        records = self._records(res["samples"][name], lm, res["results"][name], name=name, bench=bench, model=model)
        scores = harness_rows(res, top=name, benchmark=bench, model=model, records=records, framework="lmms",
                              unit_metrics=_UNIT_METRICS, modality=modality(records))  # fmt: skip
        return FrameworkResult(
            records=records, scores=scores, versions={"lmms-eval": _version("lmms-eval"), "torch": _version("torch")},
            raw={"results": json.loads(json.dumps(res["results"], default=str)),
                 "configs": json.loads(json.dumps(res.get("configs", {}), default=str))},
        )  # fmt: skip

    @staticmethod
    def _records(samples: list[dict[str, Any]], lm: Any, results: dict[str, Any], *, name: str, bench: str,
                 model: str) -> list[Record]:  # fmt: skip
        """One Record per doc. lmms-eval logs one sample per (filter, doc) without naming the filter, in the order of
        the filters, so the k-th sample of a doc belongs to the k-th filter in the results keys."""
        keys = [k.split(",", 1) for k in results if "," in k and "_stderr" not in k]
        filters = list(dict.fromkeys(f for _, f in keys))
        metric_names = {m for m, _ in keys}
        by_doc: dict[int, Record] = {}
        seen: dict[int, int] = {}
        for s in samples:
            doc_id = int(s["doc_id"])
            k = seen[doc_id] = seen.get(doc_id, -1) + 1
            filt = filters[k] if k < len(filters) else str(k)
            metrics = {
                f"{m}/{filt}": float(v) for m, v in s.items() if m in metric_names and isinstance(v, (int, float))
            }
            filtered = s["filtered_resps"][0] if s.get("filtered_resps") else None
            if doc_id in by_doc:
                by_doc[doc_id].metrics.update(metrics)
                by_doc[doc_id].meta["filtered"][filt] = filtered
                continue
            msgs, opts, res = lm.sent[(name, doc_id)]
            gen: GenerationResult | None = None if isinstance(res, BaseException) else res
            raw = s["resps"][0][0] if s.get("resps") and s["resps"][0] else ""
            by_doc[doc_id] = Record(
                benchmark=bench, index=doc_id, model=model, sample_id=s.get("doc_hash"),
                messages=record_messages(msgs), generation_options=opts, label=s.get("target"),
                output=None if gen is None else Output(
                    text=TextOutput(prediction=[str(raw)], prediction_postprocessed=[None if filtered is None else str(filtered)]),
                    finish_reason=gen.finish_reason, replica=gen.replica_id,
                    usage=Usage(prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens),
                ),
                error=None if gen is not None else RecordError(kind="request_failed", message=f"{type(res).__name__}: {res}"),
                metrics=metrics, meta={"framework": "lmms", "filtered": {filt: filtered}, **cache_meta(gen)},
            )  # fmt: skip
        return [by_doc[k] for k in sorted(by_doc)]


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "?"
