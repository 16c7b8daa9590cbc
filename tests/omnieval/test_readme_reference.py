"""The README's suite YAML reference and the config model cannot drift: every documented key exists, every field of
a documented level is documented, and every documented field has a docstring in ``omnieval schema``."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel
from testlib.runs import ROOT

from omnieval.core import SuiteConfig


def _reference() -> dict[str, Any]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Suite YAML reference", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "the README's Suite YAML reference has no yaml block"
    data = yaml.safe_load(block.group(1))
    assert isinstance(data, dict)
    return data


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation admits (through Optional, list, unions, Annotated)."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    return []


def _walk(doc: Any, model: type[BaseModel], path: str, problems: list[str]) -> None:
    if isinstance(doc, list):
        for item in doc:
            _walk(item, model, path, problems)
        return
    if not isinstance(doc, dict):
        return
    fields = model.model_fields
    for key in doc:
        if key not in fields:
            problems.append(f"{path}.{key}: documented in the README but not a field of {model.__name__}")
    # a tagged union shows one variant's keys; `{}` documents a level of optional overrides as a whole
    documented_fully = bool(doc) and "kind" not in doc
    for name, f in fields.items():
        if documented_fully and name not in doc:
            problems.append(f"{path}.{name}: a field of {model.__name__} missing from the README's reference")
        if not f.description:
            problems.append(f"{path}.{name}: no docstring (omnieval schema shows none)")
        if name in doc and doc[name] is not None:
            subs = _models(f.annotation)
            if len(subs) == 1:
                _walk(doc[name], subs[0], f"{path}.{name}", problems)
            elif subs and isinstance(doc[name], dict) and "kind" in doc[name]:
                variant = next((m for m in subs if doc[name]["kind"] == m.model_fields["kind"].default), None)
                assert variant is not None, f"{path}.{name}: no variant of kind {doc[name]['kind']!r}"
                _walk(doc[name], variant, f"{path}.{name}", problems)


def test_readme_reference_matches_the_config_model() -> None:
    doc = _reference()
    SuiteConfig.model_validate(doc)  # the reference itself is a valid suite
    problems: list[str] = []
    _walk(doc, SuiteConfig, "suite", problems)
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_documented_key_that_does_not_exist() -> None:
    problems: list[str] = []
    doc = _reference()
    doc["models"][0]["engine_kwargs_typo"] = 1
    del doc["pool"]["chunk_size"]
    _walk(doc, SuiteConfig, "suite", problems)
    assert any("models.engine_kwargs_typo: documented in the README but not a field" in p for p in problems)
    assert any("pool.chunk_size: a field of PoolConfig missing" in p for p in problems)


def test_every_engines_options_are_the_readmes_list() -> None:
    """The README's engine-options list names exactly each registered engine's ``engine_kwargs`` keys: an option added
    to an engine without a line here, or documented but gone, fails."""
    from omnieval.core import ENGINES

    text = (ROOT / "README.md").read_text()
    section = text.split("### Engine options (`engine_kwargs`)", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for line in section.splitlines():
        m = re.match(r"- `(\w+)` \(.*?\): (.*)$", line)
        if m:
            documented[m.group(1)] = re.findall(r"`(\w+)` = ", m.group(2))
    assert set(documented) == set(ENGINES.names())
    for name in ENGINES.names():
        assert documented[name] == list(ENGINES.get(name).option_defaults), name
