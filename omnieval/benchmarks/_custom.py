"""Benchmarks a suite defines over its own data file (``benchmarks[].define``): rows → Records through a Jinja
template, scored by the same registered postprocessors and metrics as every built-in benchmark.

The whole file is checked when the suite loads (mapped columns, answers, media files, template), so bad data is one
line naming the row and the fix before anything is deployed; a run then streams the rows again as it dispatches.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import itertools
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from omnieval.benchmarks._loaders import LETTERS, jsonl_rows, options_block
from omnieval.benchmarks._spec import UNIFORM, BenchmarkSpec, MetricSpec
from omnieval.core import (
    AudioContent,
    BenchmarkDefinition,
    Content,
    GenerationOptions,
    ImageContent,
    Message,
    OmnievalUserError,
    Record,
    TextContent,
    VideoContent,
    path_sha256,
)

if TYPE_CHECKING:
    import jinja2

    from omnieval.core import BenchmarkConfig

MC_TEMPLATE = "{{ question }}\n{{ options }}\nAnswer with the letter of the correct option only."
_URL = ("http://", "https://", "data:")
_LETTER = re.compile(r"^\s*\(?([A-Ja-j])(?:[.):]\s*.*)?$", re.S)


class DefinitionError(OmnievalUserError):
    """Bad data or template in a suite-defined benchmark: one line, naming the row and the fix."""


class CustomBenchmarkSpec(BenchmarkSpec):
    """A ``BenchmarkSpec`` built from a suite's definition; Records come from the definition, not a loader."""

    definition: BenchmarkDefinition
    """The validated definition (absolute paths)."""

    def data_sha256(self) -> str:
        """Covers what a sample is made of: the data, the worked examples and every media file the rows name."""
        d = self.definition
        h = hashlib.sha256()
        for path in [Path(d.data), *([Path(d.fewshot_data)] if d.fewshot_data else []), *sorted(_media_files(d))]:
            h.update(f"{path}\0{path_sha256(path)}\n".encode())
        return h.hexdigest()

    def iter_records(
        self,
        *,
        model: str,
        generation: GenerationOptions,
        limit: int | None = None,
        prompt: Literal["native", "uniform"] = "native",
        overrides: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> Iterator[Record]:
        d = self.definition
        gen = self.generation_options(generation, overrides)
        template = _template(self.prompt_template if prompt == "native" else self.uniform_prompt_template)
        shots, rows = _fewshot_and_rows(d)
        history: list[Message] = []
        if d.system_prompt and prompt == "native":
            history.append(Message.text("system", d.system_prompt))
        for n, row in shots if prompt == "native" else []:
            s = _sample(d, row, n, _where(d, n, d.fewshot_data))
            history.append(Message(role="user", content=[*s["media"], TextContent(value=_render(template, s))]))
            history.append(Message.text("assistant", _target(d, s)))
        for i, (n, row) in enumerate(itertools.islice(rows, limit)):
            s = _sample(d, row, n, _where(d, n))
            text = TextContent(value=_render(template, s))
            yield Record(
                benchmark=self.name, index=i, model=model, sample_id=s["id"],
                messages=[*history, Message(role="user", content=[*s["media"], text])],
                generation_options=gen, label=s["label"], options=s["choices"],
                meta={"prompt": prompt, "row": n, **({"cluster": s["cluster"]} if d.fields.cluster else {})},
            )  # fmt: skip


def custom_spec(cfg: BenchmarkConfig) -> CustomBenchmarkSpec:
    """The spec of a suite-defined benchmark, scoring from its task type unless the definition names its own."""
    from omnieval.benchmarks._task_types import TASK_TYPES

    d = cfg.define
    assert d is not None
    kind = TASK_TYPES.get(d.task_type) if d.task_type else None
    metrics = tuple(MetricSpec(name=m) for m in d.metrics) if d.metrics else kind.metrics if kind else ()
    template = native_template(d)
    uniform = UNIFORM + ("{{ question }}" if d.fields.question else d.template or "")
    if d.fields.question and d.fields.choices:
        uniform += "\n{{ options }}"
    return CustomBenchmarkSpec(
        name=cfg.name, version=d.version, modality=d.derived_modality, task_type=d.task_type or "custom",
        framework="builtin", data_file=d.data, loader="", prompt_template=template, uniform_prompt_template=uniform,
        template_format="jinja", system_prompt=d.system_prompt,
        postprocessor=d.postprocessor or (kind.postprocessor if kind else "strip"), metrics=metrics,
        generation=d.generation.as_dict(), description=d.description or f"suite-defined over {Path(d.data).name}",
        cluster_by="cluster" if d.fields.cluster else None, definition=d,
    )  # fmt: skip


def native_template(d: BenchmarkDefinition) -> str:
    """The definition's template, else ``{{ question }}`` (with the options and the letter instruction for mc)."""
    return d.template or (MC_TEMPLATE if d.task_type == "mc" else "{{ question }}")


def check_definition(d: BenchmarkDefinition) -> str | None:
    """Every row of the data (and worked examples) checked once at load; the first problem as one line."""
    from omnieval.benchmarks._task_types import TASK_TYPES
    from omnieval.metrics import METRICS
    from omnieval.postprocess import POSTPROCESSORS

    if d.task_type is not None and d.task_type not in TASK_TYPES:
        return f"task_type: {TASK_TYPES.unknown_message(d.task_type)}"
    if d.postprocessor is not None and d.postprocessor not in POSTPROCESSORS:
        return f"postprocessor: {POSTPROCESSORS.unknown_message(d.postprocessor)}"
    for j, m in enumerate(d.metrics or []):
        if m not in METRICS:
            return f"metrics[{j}]: {METRICS.unknown_message(m)}"
    if d.task_type == "mc" and d.fields.choices is None:
        return "fields.choices: an mc benchmark needs its options; map choices to a list column or to option columns"
    try:
        shot_rows, rows = _fewshot_and_rows(d)
        shots = list(shot_rows)
        if len(shots) < d.fewshot:
            where = d.fewshot_data or d.data
            return f"fewshot: {d.fewshot} examples asked for, {where} has {len(shots)}; lower fewshot or add rows"
        templates = [_template(native_template(d)), *([_template(d.target_template)] if d.target_template else [])]
        evaluated = 0
        for k, (n, row) in enumerate(itertools.chain(shots, rows)):
            is_shot = k < len(shots)
            s = _sample(d, row, n, _where(d, n, d.fewshot_data if is_shot else None))
            if k in (0, len(shots)):  # a template error shows on the first row it meets
                for t in templates:
                    _render(t, s)
            evaluated += not is_shot
        if not evaluated:
            return f"data: {d.data} has no rows to evaluate; add rows (the first {d.fewshot} are worked examples)"
    except OmnievalUserError as e:  # DefinitionError, or a corrupt JSONL line
        return str(e)
    return None


def _where(d: BenchmarkDefinition, n: int, path: str | None = None) -> str:
    return f"{path or d.data} row {n}"


def _media_files(d: BenchmarkDefinition) -> set[Path]:
    shots, rows = _fewshot_and_rows(d)
    out: set[Path] = set()
    for _, row in itertools.chain(shots, rows):
        for kind in ("image", "video", "audio"):
            col = getattr(d.fields, kind)
            if col is None:
                continue
            for v in _as_list(row.get(col)):
                if isinstance(v, str) and not v.startswith(_URL):
                    out.add(_media_path(d, v))
    return out


# --- reading rows -------------------------------------------------------------------------------------------------


def iter_rows(path: str, fmt: str, split: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, row)`` from 1, streamed: a large file is never read whole."""
    p = Path(path)
    if fmt == "hf":
        yield from _hf_rows(p, split)
        return
    if not p.is_file():
        raise DefinitionError(f"data file not found: {p}; fix the path (relative to the file defining it)")
    if fmt == "jsonl":
        yield from ((n, row) for n, (_, row) in enumerate(jsonl_rows(p), 1))
    elif fmt == "csv":
        with open(p, encoding="utf-8", newline="") as f:
            yield from enumerate(csv.DictReader(f), 1)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(p).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                n += 1
                yield n, row
    else:  # guarded by the config's Literal
        raise DefinitionError(f"unknown data format {fmt!r}; use jsonl, csv, parquet or hf")


def _hf_rows(p: Path, split: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import datasets
    except ImportError:
        raise DefinitionError(f"{p} is a saved datasets directory; pip install datasets") from None
    if not p.is_dir():
        raise DefinitionError(f"data directory not found: {p}; fix the path (relative to the file defining it)")
    try:
        ds = datasets.load_from_disk(str(p))
    except (FileNotFoundError, ValueError) as e:
        raise DefinitionError(
            f"{p}: not a directory written by save_to_disk ({e}); save it with save_to_disk"
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        names = sorted(ds)
        if split is None and len(names) != 1:
            raise DefinitionError(f"{p} holds splits {names}; set split to one of them")
        name = split if split is not None else names[0]
        if name not in ds:
            raise DefinitionError(f"split {name!r} is not in {p}; its splits are {names}")
        ds = ds[name]
    elif split is not None:
        raise DefinitionError(f"{p} is a single dataset, not a DatasetDict; drop split")
    yield from enumerate(ds, 1)


def _fewshot_and_rows(
    d: BenchmarkDefinition,
) -> tuple[Iterator[tuple[int, dict[str, Any]]], Iterator[tuple[int, dict[str, Any]]]]:
    """Worked examples and the rows to evaluate: from ``fewshot_data``, or the first ``fewshot`` rows of the data."""
    rows = iter_rows(d.data, d.data_format, d.split)
    if d.fewshot == 0:
        return iter(()), rows
    if d.fewshot_data is not None:
        from omnieval.core import infer_data_format

        try:
            fmt = infer_data_format(d.fewshot_data)
        except ValueError as e:
            raise DefinitionError(f"fewshot_data: {e}") from None
        return itertools.islice(iter_rows(d.fewshot_data, fmt), d.fewshot), rows
    shots = list(itertools.islice(rows, d.fewshot))
    return iter(shots), rows


# --- one row → one sample ---------------------------------------------------------------------------------------


def _column(row: dict[str, Any], col: str, field: str, where: str) -> Any:
    if col not in row:
        cols = ", ".join(sorted(map(str, row)))
        raise DefinitionError(f"{where}: no column {col!r} (fields.{field}); the columns are {cols}; fix the mapping")
    return row[col]


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _choices(d: BenchmarkDefinition, row: dict[str, Any], where: str) -> list[str] | None:
    spec = d.fields.choices
    if spec is None:
        return None
    if isinstance(spec, list):
        return [str(_column(row, c, "choices", where)) for c in spec]
    v = _column(row, spec, "choices", where)
    if isinstance(v, str):
        raise DefinitionError(
            f"{where}: choices column {spec!r} holds a string, not a list; store a list, or map fields.choices to "
            "one column per option"
        )
    choices = [str(c) for c in v]
    if not 2 <= len(choices) <= len(LETTERS):
        raise DefinitionError(f"{where}: {len(choices)} options; a multiple-choice row needs 2 to {len(LETTERS)}")
    return choices


def _mc_letter(answer: Any, choices: list[str], where: str) -> str:
    """The option letter of an mc answer given as the option's text, its letter or its 0-based index."""
    if isinstance(answer, bool):
        answer = str(answer)
    if isinstance(answer, int):
        if 0 <= answer < len(choices):
            return LETTERS[answer]
    elif isinstance(answer, str):
        text = answer.strip()
        if text in choices:
            return LETTERS[choices.index(text)]
        m = _LETTER.match(text)
        if m and LETTERS.index(m.group(1).upper()) < len(choices):
            return m.group(1).upper()
        if text.isdigit() and int(text) < len(choices):
            return LETTERS[int(text)]
    raise DefinitionError(
        f"{where}: answer {answer!r} is none of the {len(choices)} options, their letters A-{LETTERS[len(choices) - 1]}"
        " or 0-based indices; fix the row or the fields.answer mapping"
    )


def _media_path(d: BenchmarkDefinition, value: str) -> Path:
    root = Path(d.media_root) if d.media_root else Path(d.data).parent
    p = Path(value).expanduser()
    return p if p.is_absolute() else root / p


def _media_value(d: BenchmarkDefinition, kind: str, v: Any, where: str) -> str:
    if isinstance(v, dict) and v.get("bytes"):  # a datasets Image/Audio column stored as bytes
        v = v["bytes"]
    elif isinstance(v, dict) and v.get("path"):
        v = v["path"]
    if isinstance(v, (bytes, bytearray)):
        return f"data:{_mime(bytes(v), kind)};base64,{base64.b64encode(v).decode()}"
    if hasattr(v, "save") and kind == "image":  # a decoded PIL image (datasets' Image feature)
        buf = io.BytesIO()
        v.save(buf, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    if not isinstance(v, str) or not v.strip():
        raise DefinitionError(
            f"{where}: {kind} column holds {type(v).__name__}, not a path or URL; store file paths or URLs there"
        )
    if v.startswith(_URL):
        return v
    p = _media_path(d, v)
    if not p.is_file():
        raise DefinitionError(
            f"{where}: {kind} file not found: {p}; fix the path, or set media_root to the directory it is relative to"
        )
    return str(p)


def _mime(data: bytes, kind: str) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF":
        return "audio/wav"
    return {"image": "image/png", "audio": "audio/wav", "video": "video/mp4"}[kind]


def _sample(d: BenchmarkDefinition, row: dict[str, Any], n: int, where: str) -> dict[str, Any]:
    """Template variables, label, options and media of one row."""
    f = d.fields
    choices = _choices(d, row, where)
    answer = _column(row, f.answer, "answer", where)
    if answer is None or answer == "" or answer == []:
        raise DefinitionError(f"{where}: empty answer in column {f.answer!r}; fill it or drop the row")
    label: str | list[str]
    if d.task_type == "mc" and choices is not None:
        label = _mc_letter(answer, choices, where)
    elif isinstance(answer, (list, tuple)):
        label = [str(a) for a in answer]
    else:
        label = str(answer)
    media: list[Content] = []
    for kind in ("image", "video", "audio"):
        col = getattr(f, kind)
        if col is None:
            continue
        values = _as_list(_column(row, col, kind, where))
        if not values:
            raise DefinitionError(f"{where}: empty {kind} column {col!r}; give a path or URL, or drop the row")
        for v in values:
            value = _media_value(d, kind, v, where)
            if kind == "image":
                media.append(ImageContent(value=value))
            elif kind == "video":
                media.append(VideoContent(value=value, num_frames=d.num_frames))
            else:
                media.append(AudioContent(value=value, sampling_rate=d.sampling_rate))
    variables = {str(k): v for k, v in row.items()}
    if f.question is not None:
        variables["question"] = _column(row, f.question, "question", where)
    variables["answer"] = answer
    if choices is not None:
        variables["choices"] = choices
        variables["options"] = options_block(choices)
    sid = _column(row, f.id, "id", where) if f.id else None
    cluster = _column(row, f.cluster, "cluster", where) if f.cluster else None
    if f.cluster and (cluster is None or cluster == ""):
        raise DefinitionError(f"{where}: empty cluster column {f.cluster!r}; name the row's unit or drop fields.cluster")
    return {
        "vars": variables,
        "label": label,
        "choices": choices,
        "media": media,
        "id": None if sid is None else str(sid),
        "cluster": None if cluster is None else str(cluster),
        "where": where,
    }


def _target(d: BenchmarkDefinition, s: dict[str, Any]) -> str:
    if d.target_template:
        return _render(_template(d.target_template), s)
    label = s["label"]
    return label if isinstance(label, str) else label[0]


# --- templates ----------------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _template(text: str) -> jinja2.Template:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)
    try:
        return env.from_string(text)
    except jinja2.TemplateSyntaxError as e:
        raise DefinitionError(f"template line {e.lineno}: {e.message}; fix the Jinja syntax") from None


def _render(t: jinja2.Template, s: dict[str, Any]) -> str:
    import jinja2

    try:
        return t.render(**s["vars"])
    except jinja2.UndefinedError as e:
        names = ", ".join(sorted(s["vars"]))
        raise DefinitionError(
            f"{s['where']}: template uses an undefined variable ({e.message}); the variables are {names}"
        ) from None
    except jinja2.TemplateError as e:
        raise DefinitionError(f"{s['where']}: template failed ({e}); fix the template") from None
