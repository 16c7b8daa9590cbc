"""ASR text normalisation, defined once so the ``asr_normalize`` postprocessor and the WER metric cannot drift apart."""

from __future__ import annotations

import jiwer

from omnieval.core import Record

ASR_STEPS: tuple[jiwer.AbstractTransform, ...] = (
    jiwer.ToLowerCase(),
    jiwer.RemovePunctuation(),
    jiwer.SubstituteRegexes({r"\s": " "}),
    jiwer.RemoveMultipleSpaces(),
    jiwer.Strip(),
)
"""String → string steps, in order: lowercase, drop every Unicode ``P*`` character (so "it's" → "its",
"well-known" → "wellknown", "3.5" → "35"), turn tabs/newlines into spaces (jiwer splits words on " " only),
collapse runs of spaces to one, strip both ends."""

_ASR_NORMALIZE = jiwer.Compose(list(ASR_STEPS))


def asr_normalize(text: str, record: Record | None = None) -> str:
    """Apply :data:`ASR_STEPS`; the WER metric tokenises the same string on spaces."""
    return str(_ASR_NORMALIZE(text))
