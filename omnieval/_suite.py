"""Loading a suite file: parse and validate it (the kernel's config types), then check the names only the
application's registries know (benchmarks, metrics, judges, suite-defined benchmarks' data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from omnieval.core import ConfigError, SuiteConfig, describe_errors


def check_registered(suite: SuiteConfig, prefix: str = "") -> str | None:
    """Names the schema cannot check (benchmarks, metrics, judges); the first problem as one line, else None."""
    from omnieval.benchmarks import BENCHMARKS
    from omnieval.metrics import METRICS

    for i, b in enumerate(suite.benchmarks):
        at = f"{prefix}benchmarks[{i}]"
        if b.framework != "builtin":
            continue
        if b.define is not None:
            from omnieval.benchmarks import check_definition

            if b.name in BENCHMARKS:
                return f"{at}.name: {b.name} is a built-in benchmark; give your definition another name"
            problem = check_definition(b.define)
            if problem:
                return f"{at}.define: {problem}"
            continue
        if b.name not in BENCHMARKS:
            return f"{at}.name: {BENCHMARKS.unknown_message(b.name)}"
        if BENCHMARKS.get(b.name).judge_module and not b.judge:
            return f"{at}.judge: {b.name} is judge-scored; set judge to one of the suite's models"
        for j, name in enumerate(b.metrics or []):
            if name not in METRICS:
                return f"{at}.metrics[{j}]: {METRICS.unknown_message(name)}"
    return None


def load_suite(path: str | Path) -> SuiteConfig:
    """Parse and validate a suite YAML; all problems become one ``ConfigError`` line."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: file not found; pass the path of a suite YAML (see examples/quickstart.yaml)")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{p}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x}); save the file as UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ConfigError(f"{p}{where}: invalid YAML ({getattr(e, 'problem', e)}); fix the syntax there") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping with keys name, models, benchmarks")
    try:
        suite = SuiteConfig.model_validate(data, context={"base_dir": str(p.resolve().parent)})
    except ValidationError as e:
        raise ConfigError(f"{p}: {describe_errors(e.errors())}") from None
    problem = check_registered(suite)
    if problem:
        raise ConfigError(f"{p}: {problem}")
    return suite


def suite_json_schema() -> dict[str, Any]:
    return SuiteConfig.model_json_schema()
