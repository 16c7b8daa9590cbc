"""lm-eval task resolution and run settings: what ``lm_eval`` itself would run for a suite entry, checked before deploy.

Why a module of its own: the driver checks every task name (did-you-mean) before anything is deployed, and the
framework actor must build lm-eval's task index once, not per call. lm-eval's full index walks ~15,000 YAML files
(6-12 s here); a small JSON index of the bundled names (kind and folder), cached per lm-eval version, makes the check
instant and lets the actor index only the folder a task lives in.
"""

from __future__ import annotations

import copy
import difflib
import importlib.metadata as md
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnieval.core import OmnievalUserError, cache_dir

DEFAULT_SEED = (0, 1234, 1234, 1234)
"""lm-eval's CLI seeds: python ``random``, numpy, torch, few-shot sampler."""


class LMEvalOptions(BaseModel):
    """``benchmarks[].options`` of an lm-eval task; every field defaults to what ``lm_eval`` itself uses."""

    model_config = ConfigDict(extra="forbid")
    num_fewshot: int | None = Field(default=None, ge=0)
    """Few-shot examples per prompt; None keeps the task's own setting (lm-eval ``--num_fewshot``)."""
    apply_chat_template: bool | str = False
    """Send each prompt as chat messages the engine templates (``--apply_chat_template``); off, the prompt is raw text
    continued through ``/v1/completions`` as lm-eval's ``local-completions`` client sends it."""
    fewshot_as_multiturn: bool | None = None
    """Few-shot examples as alternating chat turns; None: on exactly when ``apply_chat_template`` is (lm-eval's rule)."""
    system_instruction: str | None = None
    """System prompt prepended to every request (``--system_instruction``)."""
    gen_kwargs: dict[str, Any] | str | None = None
    """Generation settings laid over every task's own (``--gen_kwargs``; a dict or ``"k=v,k=v"``)."""
    bootstrap_iters: int = Field(default=100000, ge=0)
    """Bootstrap resamples for the standard errors of non-mean metrics; 0 turns standard errors off."""
    seed: int | list[int | None] = Field(default_factory=lambda: list[int | None](DEFAULT_SEED))
    """Seeds of random, numpy, torch and the few-shot sampler (``--seed``); one integer sets all four."""
    include_path: str | list[str] | None = None
    """Folders of your own task YAMLs (``--include_path``), relative to the suite file."""
    data_files: dict[str, str | dict[str, str]] | None = None
    """Run a bundled task on local files (split -> path), keeping its prompt, filters and metrics; for a bundled
    group, subtask -> {split -> path}: the group then holds those subtasks and aggregates them with its own
    ``aggregate_metric_list`` (e.g. ``mmlu`` over the subjects given)."""
    alias: str | None = None
    """Name of the task or group made by ``data_files`` (default ``<task>_local``)."""
    max_length: int = Field(default=2048, ge=3)
    """Tokens a log-likelihood request keeps (lm-eval's API-model argument ``max_length``): a longer context loses its
    start, and perplexity windows are this long, as ``local-completions`` cuts them."""


def parse_options(options: dict[str, Any], where: str = "options") -> LMEvalOptions:
    """The suite's options as lm-eval settings; an unknown key names the closest known one."""
    known = list(LMEvalOptions.model_fields)
    for k in options:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1, cutoff=0.5)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise OmnievalUserError(f"{where}.{k}: not an lm-eval option.{hint} Known: {', '.join(known)}")
    try:
        return LMEvalOptions.model_validate(options)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise OmnievalUserError(f"{where}.{loc}: {first['msg']}") from None


def seeds(opts: LMEvalOptions) -> tuple[int | None, int | None, int | None, int | None]:
    s = opts.seed
    if isinstance(s, int):
        return (s, s, s, s)
    if len(s) != 4:
        raise OmnievalUserError(f"options.seed: give one integer or four (random, numpy, torch, few-shot), got {s}")
    return (s[0], s[1], s[2], s[3])


def evaluate_kwargs(options: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``simple_evaluate``'s arguments for a suite task (besides model, tasks and task manager), at lm-eval's CLI
    defaults unless the suite sets them; the adapter and ``bench``'s lm-eval baselines run the task identically."""
    o = parse_options(options)
    fewshot_mt = bool(o.apply_chat_template) if o.fewshot_as_multiturn is None else o.fewshot_as_multiturn
    if fewshot_mt and not o.apply_chat_template:
        raise OmnievalUserError("options.fewshot_as_multiturn: needs apply_chat_template (as in lm-eval)")
    r, n, t, f = seeds(o)
    return dict(
        num_fewshot=o.num_fewshot, limit=limit, log_samples=True, apply_chat_template=o.apply_chat_template,
        fewshot_as_multiturn=fewshot_mt, system_instruction=o.system_instruction, gen_kwargs=o.gen_kwargs,
        bootstrap_iters=o.bootstrap_iters, random_seed=r, numpy_random_seed=n, torch_random_seed=t,
        fewshot_random_seed=f,
    )  # fmt: skip


# ---- the task index ----------------------------------------------------------------------------------------------


def _lm_eval_version() -> str:
    try:
        return md.version("lm_eval")
    except md.PackageNotFoundError:
        return md.version("lm-eval")


def _tasks_root() -> Path:
    """lm-eval's bundled task folder, found without importing ``lm_eval.tasks`` (which loads ``datasets``)."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or spec.origin is None:
        from omnieval.core import MissingDependencyError

        raise MissingDependencyError("the lm-eval adapter", "pip install 'omnieval[lmeval]'")
    return Path(spec.origin).parent / "tasks"


def bundled_index() -> dict[str, dict[str, str | None]]:
    """Every bundled task, group and tag name → ``{"kind", "folder"}`` (the top-level folder under
    ``lm_eval/tasks`` holding its YAML; None for tags), cached per lm-eval version under the omnieval cache."""
    path = cache_dir() / "lmeval-task-index" / f"{_lm_eval_version()}-v1.json"
    if path.exists():
        try:
            data: dict[str, dict[str, str | None]] = json.loads(path.read_text())
            return data
        except (OSError, ValueError):
            pass  # a torn write: rebuilt below
    from lm_eval.tasks import TaskManager

    root = _tasks_root()
    out: dict[str, dict[str, str | None]] = {}
    for name, e in TaskManager().task_index.items():
        folder = None
        if e.yaml_path is not None and e.kind.name != "TAG":
            rel = Path(e.yaml_path).resolve().relative_to(root)
            folder = rel.parts[0] if len(rel.parts) > 1 else None
        out[name] = {"kind": e.kind.name.lower(), "folder": folder}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{id(out)}")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)
    return out


def _include_paths(opts: LMEvalOptions) -> list[str]:
    p = opts.include_path
    return [] if p is None else [p] if isinstance(p, str) else list(p)


def _local_index(include: list[str]) -> dict[str, Any]:
    """The task index of the user's own folders alone (milliseconds: a few YAML files)."""
    if not include:
        return {}
    from lm_eval.tasks import TaskManager

    return dict(TaskManager(include_path=include, include_defaults=False).task_index)


class ResolvedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: str
    """What ``simple_evaluate`` is given: a name or a YAML path (a data_files override is built from it)."""
    kind: Literal["task", "py_task", "group", "tag", "yaml"]
    """What the name is in lm-eval."""
    folders: list[str] | None
    """Folders to index (the bundled task's own and the include paths); None: lm-eval's whole tree."""


def resolve_task(task: str, options: dict[str, Any], *, where: str = "benchmarks") -> ResolvedTask:
    """Check a suite entry against lm-eval's tasks without loading any dataset: the name exists (did-you-mean),
    the options are lm-eval's, local data files exist. Raises ``OmnievalUserError`` (what, where, fix)."""
    opts = parse_options(options, f"{where}.options")
    include = _include_paths(opts)
    for p in include:
        if not Path(p).is_dir():
            raise OmnievalUserError(f"{where}.options.include_path: {p} is not a folder; fix the path (relative "
                                    "paths are taken from the suite file's folder)")  # fmt: skip
    for key, f in (opts.data_files or {}).items():
        for split, path in (f.items() if isinstance(f, dict) else [(None, f)]):
            if "://" not in path and not Path(path).exists():
                at = f"{key}.{split}" if split else key
                raise OmnievalUserError(f"{where}.options.data_files.{at}: {path} does not exist; fix the path "
                                        "(relative paths are taken from the working directory)")  # fmt: skip
    if task.endswith((".yaml", ".yml")):
        if not Path(task).is_file():
            raise OmnievalUserError(f"{where}.name: task file {task} does not exist; fix the path (relative to the "
                                    "suite file)")  # fmt: skip
        return ResolvedTask(spec=task, kind="yaml", folders=[str(Path(task).parent), *include])
    local = _local_index(include)
    if task in local:
        kind = local[task].kind.name.lower()
        _check_local_data(task, local, where)
        return ResolvedTask(spec=task, kind=kind, folders=None if kind == "tag" else include)
    index = bundled_index()
    entry = index.get(task)
    if entry is None:
        names = sorted(set(index) | set(local))
        close = difflib.get_close_matches(task, names, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise OmnievalUserError(f"{where}.name: lm-eval has no task, group or tag {task!r}.{hint} `lm-eval ls tasks` "
                                "lists them; your own task YAMLs go in options.include_path")  # fmt: skip
    kind = str(entry["kind"])
    nested = bool(opts.data_files) and all(isinstance(v, dict) for v in (opts.data_files or {}).values())
    if opts.data_files and not nested and any(isinstance(v, dict) for v in opts.data_files.values()):
        raise OmnievalUserError(f"{where}.options.data_files: give split -> path (a task) or subtask -> {{split -> "
                                "path}} (a group), not a mix")  # fmt: skip
    if opts.data_files and kind not in ("task", "py_task", "group"):
        raise OmnievalUserError(f"{where}.options.data_files: {task!r} is a {kind}; data_files replaces a task's "
                                "dataset, or the datasets of a group's subtasks")  # fmt: skip
    if opts.data_files and (kind == "group") != nested:
        shape = "subtask -> {split -> path}" if kind == "group" else "split -> path"
        raise OmnievalUserError(f"{where}.options.data_files: {task!r} is a {kind}; give {shape}")
    folder = entry.get("folder")
    folders = None if kind == "tag" or folder is None else [str(_tasks_root() / folder), *include]
    return ResolvedTask(spec=task, kind=kind, folders=folders)  # type: ignore[arg-type]


def _data_files(cfg: dict[str, Any]) -> list[str]:
    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if isinstance(files, str):
        return [files]
    if isinstance(files, dict):
        return [f for v in files.values() for f in ([v] if isinstance(v, str) else list(v))]
    return list(files) if isinstance(files, list) else []


def _check_local_data(name: str, local: dict[str, Any], where: str, seen: set[str] | None = None) -> None:
    """Every local data file of the user's own task (or of each task of their group) exists, resolved as lm-eval
    resolves it (against the working directory): a missing file is a pre-deploy error, not a failed task later."""
    seen = set() if seen is None else seen
    if name in seen or name not in local:
        return
    seen.add(name)
    entry = local[name]
    cfg = entry.cfg or {}
    for f in _data_files(cfg):
        if "://" not in f and not Path(f).exists():
            raise OmnievalUserError(f"{where}.name: task {name!r} ({entry.yaml_path}) reads {f}, which does not exist "
                                    f"from {Path.cwd()} (lm-eval resolves data_files against the working directory); "
                                    "fix the path or run from the folder it is relative to")  # fmt: skip
    subtasks = cfg.get("task") if entry.kind.name == "GROUP" else None
    for sub in subtasks if isinstance(subtasks, list) else []:
        _check_local_data(sub if isinstance(sub, str) else str(sub.get("task", "")), local, where, seen)


def task_manager(resolved: ResolvedTask, options: dict[str, Any] | None = None) -> Any:
    """lm-eval's ``TaskManager``, built once per task, over the folders the task needs (its whole tree for tags);
    with a bundled group on local files (``options.data_files``), also over the folder of that group's YAML."""
    from lm_eval.tasks import TaskManager

    if resolved.folders is None:
        return TaskManager(include_path=None)
    tm = TaskManager(include_path=resolved.folders, include_defaults=False)
    opts = parse_options(options or {})
    if resolved.kind != "group" or not opts.data_files:
        return tm
    # lm-eval 0.4.13 cannot load a group YAML given by path (it names the entry by its ``task:`` list): the group
    # is registered by its folder instead
    folder = _local_group(resolved, tm, opts)
    return TaskManager(include_path=[*resolved.folders, folder], include_defaults=False)


def task_spec(resolved: ResolvedTask, tm: Any, options: dict[str, Any]) -> str | dict[str, Any]:
    """What ``simple_evaluate`` runs: the task by name or file, or the bundled task with its dataset replaced by
    local files (prompt, filters and metrics kept; splits not shipped are dropped, so few-shot never downloads)."""
    opts = parse_options(options)
    if not opts.data_files:
        return resolved.spec
    if resolved.kind == "group":
        return opts.alias or f"{resolved.spec}_local"  # written and indexed by ``task_manager``
    entry = tm.task_index[resolved.spec]
    if entry.yaml_path is not None:  # as lm-eval loads it: includes merged, ``!function`` hooks (process_docs) imported
        from lm_eval.tasks._yaml_loader import load_yaml

        cfg = dict(load_yaml(entry.yaml_path, resolve_func=True))
    else:
        cfg = copy.deepcopy(dict(entry.cfg))
    cfg.update(
        task=opts.alias or f"{resolved.spec}_local", tag=[], dataset_path="json", dataset_name=None,
        dataset_kwargs={"data_files": dict(opts.data_files)},
    )  # fmt: skip
    for split in ("training_split", "validation_split", "fewshot_split"):
        if cfg.get(split) and cfg[split] not in opts.data_files:
            cfg[split] = None
    return cfg


def _local_group(resolved: ResolvedTask, tm: Any, opts: LMEvalOptions) -> str:
    """A bundled group on local files: its subtasks named in ``data_files`` (each with its dataset replaced, as
    lm-eval's own ``task:`` overrides do) under the group's own aggregation. Written as a group YAML (a temporary
    folder, returned): an inline group dict would hand its group keys down to every task."""
    from lm_eval.tasks._yaml_loader import load_yaml

    leaves = output_types(resolved, tm)
    files: dict[str, dict[str, str]] = {k: v for k, v in (opts.data_files or {}).items() if isinstance(v, dict)}
    unknown = [k for k in files if k not in leaves]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(leaves), n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise OmnievalUserError(f"options.data_files: {unknown[0]!r} is not a task of the group {resolved.spec!r}.{hint}")
    members = []
    for name, splits in files.items():
        cfg = load_yaml(tm.task_index[name].yaml_path, resolve_func=False)
        over: dict[str, Any] = {"task": name, "dataset_path": "json", "dataset_name": None,
                                "dataset_kwargs": {"data_files": dict(splits)}}  # fmt: skip
        for split in ("training_split", "validation_split", "fewshot_split"):
            if cfg.get(split) and cfg[split] not in splits:
                over[split] = None
        members.append(over)
    group_cfg = load_yaml(tm.task_index[resolved.spec].yaml_path, resolve_func=False)
    spec: dict[str, Any] = {"group": opts.alias or f"{resolved.spec}_local", "task": members}
    for key in ("aggregate_metric_list", "metadata"):
        if group_cfg.get(key) is not None:
            spec[key] = group_cfg[key]
    import atexit
    import shutil
    import tempfile

    import yaml

    folder = tempfile.mkdtemp(prefix="omnieval-lmeval-group-")
    atexit.register(shutil.rmtree, folder, True)
    (Path(folder) / f"{spec['group']}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def top_name(spec: str | dict[str, Any]) -> str:
    """The name lm-eval reports the suite entry under (its results key)."""
    if isinstance(spec, dict):
        return str(spec.get("group") or spec.get("task"))
    if spec.endswith((".yaml", ".yml")):
        from lm_eval.tasks._yaml_loader import load_yaml

        cfg = load_yaml(Path(spec), resolve_func=False)
        return str(cfg.get("group") or cfg.get("task"))
    return spec


# ---- what the task asks of the model -----------------------------------------------------------------------------

LOGLIKELIHOOD_TYPES = frozenset({"loglikelihood", "loglikelihood_rolling", "multiple_choice"})
"""lm-eval output types answered from log-probabilities (``PoolLM.loglikelihood`` / ``loglikelihood_rolling``)."""


def output_types(resolved: ResolvedTask, tm: Any) -> dict[str, str]:
    """Each leaf task of ``resolved`` -> its ``output_type`` (lm-eval's default ``generate_until`` where unset), read
    from the task YAMLs with their includes, nothing imported or downloaded."""
    from lm_eval.tasks._yaml_loader import load_yaml

    index = tm.task_index
    out: dict[str, str] = {}
    seen: set[str] = set()

    def walk(name: str, inline: dict[str, Any] | None = None) -> None:
        if name in seen:
            return
        seen.add(name)
        entry = index.get(name)
        if entry is None:
            if inline is not None and inline.get("output_type"):
                out[name] = str(inline["output_type"])
            return
        kind = entry.kind.name
        if kind == "TAG":
            for n, e in index.items():
                if name in getattr(e, "tags", set()) and e.kind.name != "TAG":
                    walk(n)
        elif kind == "GROUP":
            subs = (entry.cfg or {}).get("task")
            for sub in subs if isinstance(subs, list) else [subs] if subs else []:
                if isinstance(sub, dict):
                    walk(str(sub.get("task", "")), sub)
                else:
                    walk(str(sub))
        elif entry.yaml_path is not None:
            try:
                cfg = load_yaml(entry.yaml_path, resolve_func=False)
            except (OSError, ValueError):
                return
            if inline:
                cfg = {**cfg, **inline}
            out[name] = str(cfg.get("output_type") or "generate_until")

    if resolved.kind == "yaml":
        cfg = load_yaml(resolved.spec, resolve_func=False)
        name = str(cfg.get("task") or cfg.get("group") or resolved.spec)
        if "group" in cfg and name not in index:
            for sub in cfg.get("task") or []:
                walk(str(sub.get("task", "")) if isinstance(sub, dict) else str(sub), sub if isinstance(sub, dict) else None)
        elif name in index:
            walk(name)
        else:
            out[name] = str(cfg.get("output_type") or "generate_until")
    else:
        walk(resolved.spec)
    return out


def generative_variants(task: str, limit: int = 3) -> list[str]:
    """Bundled tasks that ask the same questions by generation (``arc_challenge_chat``, ``mmlu_generative``,
    ``truthfulqa_gen``): what to suggest when the engine cannot score."""
    names = bundled_index()
    marks = ("_chat", "_generative", "_gen", "_cot_zeroshot")
    for base in dict.fromkeys([task, task.split("_")[0]]):
        found = sorted((n for n in names if n.startswith(base) and n != task and n.endswith(marks)),
                       key=lambda n: (len(n), n))  # fmt: skip
        if found:
            return found[:limit]
    return []
