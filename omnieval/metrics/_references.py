"""Reference-shape helpers shared by the metrics: a label may be one answer or a list of acceptable ones."""

from __future__ import annotations

from typing import Any


def as_text(value: Any) -> str:
    """A reference or prediction as text; integral floats lose their ``.0`` so ``15.0`` and ``"15"`` agree."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def reference_list(reference: Any) -> list[str]:
    """Every acceptable reference as a string; a scalar is a one-element list and None is an empty one."""
    if reference is None:
        return []
    if isinstance(reference, (list, tuple)):
        return [as_text(r) for r in reference if r is not None]
    return [as_text(reference)]


def reference_streams(references: list[Any]) -> list[list[str | None]]:
    """Transpose per-sample reference lists into sacrebleu's reference streams.

    sacrebleu wants ``streams[k][i]`` = the k-th reference of sample i. Samples with fewer references are padded
    with None, which sacrebleu drops per segment (an ``""`` pad would count as a real, empty reference and skew the
    brevity penalty). A sample with no reference at all gets one empty reference so it still scores (as zero).
    """
    per_sample = [reference_list(r) or [""] for r in references]
    width = max((len(refs) for refs in per_sample), default=1)
    return [[refs[k] if k < len(refs) else None for refs in per_sample] for k in range(width)]
