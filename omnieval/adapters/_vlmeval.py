"""VLMEvalKit adapter (PyPI ``ms-vlmeval``): a VLMEvalKit model whose ``generate_inner`` calls the pool.

VLMEvalKit keeps its dataset classes, prompts (``build_prompt``) and scoring (``dataset.evaluate``); the model is an
API-style model (``is_api``), so ``infer_data_job`` runs it from a thread pool and the pool sees concurrent requests.
Data are TSVs in ``$LMUData``: any ``<name>.tsv`` there (base64 ``image`` column) is a custom MCQ/VQA dataset, and
built-in datasets use a pre-placed TSV with the right MD5 instead of downloading. Each run gets a private LMUData and
work dir, so parallel runs and VLMEvalKit's in-place mutation of its data never interfere.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from omnieval._artifacts import ScoreRow
from omnieval.adapters._base import FrameworkAdapter, FrameworkResult, cache_meta, import_framework
from omnieval.adapters._media import file_data_uri, modality, record_messages
from omnieval.core import (
    GenerationOptions,
    OmnievalUserError,
    Output,
    Record,
    RecordError,
    TextOutput,
    Usage,
)
from serving import GenerationRequest

PIP_LINE = "pip install 'omnieval[vlmeval]' (or its own venv: scripts/make_framework_venv.sh vlmeval)"
DATA_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "vlmeval"
"""TSVs shipped with omnieval (``TinyShapesMCQ``); used when ``$LMUData`` has no file of that name."""
MODEL_NAME = "omnieval-pool"
FAIL_MSG = "Failed to obtain answer via API."  # VLMEvalKit's own marker: failed rows are retried, never scored as text


def _import_vlmeval() -> Any:
    return import_framework("the VLMEvalKit adapter", PIP_LINE, "vlmeval", "vlmeval.vlm.base:BaseModel")


def _key(message: Any) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def make_pool_vlm(bridge: Any, generation: GenerationOptions) -> Any:
    """Build the ``BaseModel`` subclass lazily so importing omnieval never imports VLMEvalKit (or torch)."""
    _, BaseModel = _import_vlmeval()

    class PoolVLM(BaseModel):  # type: ignore[misc, valid-type]
        is_api = True  # threads in infer_data_api: concurrent pool requests
        INTERLEAVE = True  # keep VLMEvalKit's image/text order as content parts

        def __init__(self) -> None:
            super().__init__()
            self.sent: dict[str, tuple[list[dict[str, Any]], GenerationOptions, Any]] = {}
            self.options = GenerationOptions(temperature=generation.temperature,
                                             max_tokens=generation.max_tokens,
                                             seed=generation.seed)  # fmt: skip

        def generate(self, message: Any, dataset: str | None = None) -> str:
            # keyed before preproc_content (which rewrites items in place), so Records find build_prompt's struct
            key = _key(message)
            return self._send(key, super().preproc_content(message))

        def generate_inner(self, message: list[dict[str, str]], dataset: str | None = None) -> str:
            return self._send(_key(message), message)

        def _send(self, key: str, message: list[dict[str, str]] | None) -> str:
            parts: list[dict[str, Any]] = []
            for item in message or []:
                if item["type"] == "image":
                    parts.append({"type": "image_url", "image_url": {"url": file_data_uri(item["value"])}})
                elif item["type"] == "text":
                    parts.append({"type": "text", "text": item["value"]})
                else:
                    raise OmnievalUserError(
                        f"VLMEvalKit sent a {item['type']!r} item; only image and text reach the pool"
                    )
            msgs = [{"role": "user", "content": parts}]
            req = GenerationRequest(request_id=f"vlmeval/{len(self.sent)}", messages=msgs, options=self.options)
            (res,) = bridge.generate([req])
            self.sent[key] = (msgs, self.options, res)
            return FAIL_MSG if isinstance(res, BaseException) else res.text

    return PoolVLM()


@contextmanager
def _lmudata(root: Path) -> Any:
    """VLMEvalKit reads ``$LMUData`` at every call; point it at the run's private copy meanwhile."""
    old = os.environ.get("LMUData")
    os.environ["LMUData"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("LMUData", None)
        else:
            os.environ["LMUData"] = old


def _source_tsv(task: str, options: dict[str, Any]) -> Path | None:
    files = options.get("data_files") or {}
    if files:
        return Path(next(iter(files.values()))).resolve()
    for root in (os.environ.get("LMUData"), DATA_DIR):
        if root and (Path(root) / f"{task}.tsv").exists():
            return Path(root) / f"{task}.tsv"
    return None


class VLMEvalAdapter(FrameworkAdapter):
    name: ClassVar[str] = "vlmeval"
    pip_line: ClassVar[str] = PIP_LINE

    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        _import_vlmeval()
        lm = make_pool_vlm(bridge, generation)
        with (
            tempfile.TemporaryDirectory(prefix="omnieval-vlmeval-") as scratch,
            _lmudata(Path(scratch) / "LMUData") as root,
        ):
            root.mkdir()
            src = _source_tsv(task, options)
            if src is not None:
                shutil.copyfile(src, root / f"{task}.tsv")
            from vlmeval.dataset import build_dataset
            from vlmeval.inference import infer_data_job
            from vlmeval.smp import get_pred_file_path, load

            dataset = build_dataset(task)
            if dataset is None:
                raise OmnievalUserError(f"VLMEvalKit cannot build dataset {task!r}: put {task}.tsv in $LMUData or set "
                                        "options.data_files")  # fmt: skip
            rows = dataset.data.iloc[:limit] if limit else dataset.data
            structs = {row["index"]: dataset.build_prompt(row) for _, row in rows.iterrows()}
            labels = {row["index"]: self._label(row) for _, row in rows.iterrows()}
            work = Path(scratch) / "work"
            work.mkdir()
            infer_data_job(lm, work_dir=str(work), model_name=MODEL_NAME, dataset=dataset,
                           api_nproc=int(options.get("nproc", 8)), limit=limit)  # fmt: skip
            pred_file = get_pred_file_path(str(work), MODEL_NAME, dataset.dataset_name)
            preds = {r["index"]: r["prediction"] for _, r in load(pred_file).iterrows()}
            judge = dict(options.get("judge_kwargs") or {"model": "exact_matching"})
            acc = dataset.evaluate(pred_file, nproc=1, **judge)
            hits = self._hits(work, load)
        bench = f"vlmeval:{task}"
        records = []
        for i, (idx, struct) in enumerate(structs.items()):
            msgs, opts, res = lm.sent[_key(struct)]
            failed = isinstance(res, BaseException)
            label, choices = labels[idx]
            records.append(Record(
                benchmark=bench, index=i, model=model, sample_id=str(idx), messages=record_messages(msgs),
                generation_options=opts, label=label, options=choices,
                output=None if failed else Output(
                    text=TextOutput(prediction=[str(preds.get(idx, res.text))]), finish_reason=res.finish_reason,
                    replica=res.replica_id, usage=Usage(prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens),
                ),
                error=RecordError(kind="request_failed", message=f"{type(res).__name__}: {res}") if failed else None,
                metrics={"acc": float(hits[idx])} if idx in hits else {}, meta={"framework": "vlmeval", **cache_meta(res)},
            ))  # fmt: skip
        mean, se = _hits_mean_stderr(hits)

        def overall(metric: str, value: float) -> bool:  # the rows that are the per-sample verdicts' mean
            return se is not None and mean is not None and metric.endswith("/Overall") and abs(value - mean) < 1e-3

        scores = [ScoreRow(model=model, benchmark=bench, metric=metric, value=value, num_samples=len(records),
                           num_errors=sum(1 for r in records if r.error), framework="vlmeval",
                           modality=modality(records), scale=100.0, stderr=se if overall(metric, value) else None,
                           stderr_method="mean" if overall(metric, value) else None)
                  for metric, value in self._aggregates(acc).items()]  # fmt: skip
        return FrameworkResult(records=records, scores=scores,
                               versions={"ms-vlmeval": _version("ms-vlmeval"), "torch": _version("torch")},
                               raw={"evaluate": json.loads(_to_json(acc))})  # fmt: skip

    @staticmethod
    def _label(row: Any) -> tuple[Any, list[str] | None]:
        letters = [c for c in "ABCDEFGHIJ" if c in row and isinstance(row[c], str)]
        answer = row.get("answer")
        return (None if answer is None else str(answer)), ([str(row[c]) for c in letters] or None)

    @staticmethod
    def _hits(work: Path, load: Any) -> dict[Any, float]:
        """Per-sample verdicts from the scored table VLMEvalKit writes beside the predictions (``hit`` column)."""
        for f in sorted(work.glob(f"{MODEL_NAME}_*_result.*")):
            try:
                table = load(str(f))
            except Exception:  # noqa: BLE001 - an intermediate file of another format; the next one may do
                continue
            if hasattr(table, "columns") and {"index", "hit"} <= set(table.columns):
                return {r["index"]: float(r["hit"]) for _, r in table.iterrows()}
        return {}

    @staticmethod
    def _aggregates(acc: Any) -> dict[str, float]:
        """VLMEvalKit's accuracy table (rows = splits; Overall + per-category columns, 0-1) on omnieval's 0-100."""
        out: dict[str, float] = {}
        if hasattr(acc, "to_dict"):
            for row in acc.to_dict(orient="records"):
                split = row.pop("split", None)
                prefix = "acc" if split in (None, "none", "") or len(acc) == 1 else f"acc/{split}"
                for col, v in row.items():
                    if isinstance(v, (int, float)):
                        out[f"{prefix}/{col}"] = round(100.0 * float(v), 4)
        elif isinstance(acc, dict):
            for k, v in acc.items():
                if isinstance(v, (int, float)):
                    out[str(k)] = round(float(v), 4)
        return out


def _hits_mean_stderr(hits: dict[Any, float]) -> tuple[float | None, float | None]:
    """Mean of VLMEvalKit's per-sample verdicts and its standard error (0-100): the error of the rows that are that
    mean (its Overall accuracy). VLMEvalKit computes none itself."""
    from omnieval.metrics import mean_stderr

    v = list(hits.values())
    if not v:
        return None, None
    se = mean_stderr(sum(v), sum(x * x for x in v), len(v))
    return 100.0 * sum(v) / len(v), None if se is None else round(100.0 * se, 4)


def _to_json(obj: Any) -> str:
    if hasattr(obj, "to_json"):
        return str(obj.to_json(orient="records"))
    return json.dumps(obj, default=str)


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "?"
