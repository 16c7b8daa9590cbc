"""Engine-argument names read from the engine's source equal the ones its import gives (without the import's cost)."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving._source_fields import dataclass_fields

SOURCE = '''
import dataclasses
from dataclasses import InitVar, KW_ONLY, dataclass, field
from typing import Any, ClassVar


@dataclass
class EngineArgs:
    model: str = "m"
    max_model_len: int | None = None
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    registry: ClassVar[dict[str, Any]] = {}
    not_annotated = 3

    def method(self) -> int:
        local: int = 1
        return local


@dataclass
class AsyncEngineArgs(EngineArgs):
    _: KW_ONLY
    enable_log_requests: bool = False
    seed_init: InitVar[int] = 0


class Unrelated:
    other: int = 0
'''


@pytest.fixture()
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    pkg = tmp_path / "fake_engine_pkg" / "engine"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "arg_utils.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield "fake_engine_pkg"
    for m in [m for m in sys.modules if m.startswith("fake_engine_pkg")]:
        del sys.modules[m]


def test_the_source_gives_the_fields_the_import_gives(fake_engine: str) -> None:
    got = dataclass_fields(fake_engine, "engine/arg_utils.py", "AsyncEngineArgs")
    assert "fake_engine_pkg" not in sys.modules  # found, not imported
    cls = importlib.import_module(f"{fake_engine}.engine.arg_utils").AsyncEngineArgs
    assert got == {f.name for f in dataclasses.fields(cls)}
    assert got == {"model", "max_model_len", "limit_mm_per_prompt", "enable_log_requests"}


def test_what_the_parser_cannot_find_is_none(fake_engine: str) -> None:
    assert dataclass_fields(fake_engine, "engine/arg_utils.py", "NoSuchArgs") is None
    assert dataclass_fields(fake_engine, "engine/missing.py", "AsyncEngineArgs") is None
    assert dataclass_fields("no_such_package_here", "engine/arg_utils.py", "AsyncEngineArgs") is None
