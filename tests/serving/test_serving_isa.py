"""serving._isa: which bfloat16 instructions /proc/cpuinfo names, on x86 and Arm, and nothing where it is absent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from serving import _isa, cpu_flags, cpu_info, native_bf16


@pytest.fixture()
def cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cpuinfo"
    monkeypatch.setattr(_isa, "_CPUINFO", path)
    _isa.cpu_info.cache_clear()
    yield path
    _isa.cpu_info.cache_clear()  # the next caller reads the real file again


def _core(n: int, **fields: str) -> str:
    return "".join(f"{k.replace('_', ' ')}\t: {v}\n" for k, v in {"processor": str(n), **fields}.items()) + "\n"


@pytest.mark.parametrize(("flags", "native"), [
    ("fpu sse2 avx2 avx512f avx512_bf16", True),  # Zen 4, Cooper Lake
    ("fpu sse2 avx2 avx512f amx_bf16 amx_tile", True),  # Sapphire Rapids
    ("fpu sse2 avx2 avx512f avx512_vnni", False),  # Zen 3 / Ice Lake: AVX-512 without BF16
    ("fpu sse2 avx2 fma", False),  # AVX2 only
])  # fmt: skip
def test_x86_bf16_comes_from_the_flags_line(cpuinfo: Path, flags: str, native: bool) -> None:
    cpuinfo.write_text(_core(0, model_name="Some CPU", flags=flags) + _core(1, model_name="Some CPU", flags="fpu"))
    assert native_bf16() is native
    assert cpu_flags() == frozenset(flags.split())  # the first core's line
    assert cpu_info()["model name"] == "Some CPU"


def test_arm_bf16_comes_from_the_features_line(cpuinfo: Path) -> None:
    cpuinfo.write_text(_core(0, Features="fp asimd sve bf16 i8mm"))
    assert native_bf16()
    cpuinfo.write_text(_core(0, Features="fp asimd"))
    _isa.cpu_info.cache_clear()
    assert not native_bf16()


def test_no_cpuinfo_means_nothing_native(cpuinfo: Path) -> None:
    assert not cpuinfo.exists()
    assert cpu_info() == {} and cpu_flags() == frozenset() and not native_bf16()
