"""What this CPU computes natively (``/proc/cpuinfo``), so an engine picks a dtype its kernels run at full rate.

Linux only; elsewhere the first core's lines are empty and nothing counts as native, so engines keep float32.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_CPUINFO = Path("/proc/cpuinfo")
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
"""x86 AVX512-BF16 and AMX tiles, Arm's BF16 extension: bfloat16 matrix arithmetic in the CPU's own instructions.
Without one, PyTorch widens every bfloat16 operand to float32 and back, which costs more than float32 alone."""


@lru_cache(maxsize=1)
def cpu_info() -> dict[str, str]:
    """The first core's ``/proc/cpuinfo`` fields (every core reports the same features); empty where there is none."""
    info: dict[str, str] = {}
    try:
        for line in _CPUINFO.read_text().splitlines():
            key, _, val = line.partition(":")
            info.setdefault(key.strip(), val.strip())
    except OSError:
        pass
    return info


def cpu_flags() -> frozenset[str]:
    """Instruction-set flags (x86 ``flags``, Arm ``Features``)."""
    info = cpu_info()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def native_bf16() -> bool:
    """Does this CPU multiply bfloat16 matrices in hardware?"""
    return any(f in cpu_flags() for f in BF16_FLAGS)
