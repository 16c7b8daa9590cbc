"""Which judge a ``VerifierConfig`` means: weights, LoRA adapter, prompt style, grammar, threshold.

The offline default is omnieval's own trained verifier: the embedded SmolLM2-135M GGUF plus a LoRA adapter shipped
in ``data/judge/`` (trained by ``scripts/train_verifier.py`` on the labelled set's train split; its card,
``smollm2-verifier.json``, records the prompt style, the calibrated threshold and the training inputs). Any other
judge model gets the rubric prompt, no adapter and the digit it writes, unless the config says otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnieval.core import EMBEDDED_MODEL_SOURCE, OmnievalUserError, VerifierConfig
from omnieval.verifier._prompt import PROMPT_STYLES

JUDGE_DIR = Path(__file__).parent / "data" / "judge"
CARD_PATH = JUDGE_DIR / "smollm2-verifier.json"
TOP_LOGPROBS = 10
"""Alternatives asked for per token: enough for both verdict digits to be among them."""


@dataclass(frozen=True)
class ResolvedJudge:
    style: str
    """Prompt style (a key of ``PROMPT_STYLES``)."""
    grammar: str | None
    """GBNF constraining the reply; None = unconstrained."""
    top_logprobs: int | None
    """Alternatives per token to request (for the verdict probability); None = none."""
    lora: str | None
    """LoRA adapter GGUF for llama-server, or None."""
    threshold: float | None
    """Rate 1 when P(correct) >= threshold; None = the written digit."""


def shipped_card() -> dict[str, Any]:
    """The shipped adapter's card; a clear error when the adapter is missing (a checkout without it)."""
    if not CARD_PATH.is_file():
        raise OmnievalUserError(
            f"the trained verifier adapter is missing ({CARD_PATH}); run `python scripts/train_verifier.py` to "
            "build it, or set verifier.lora: none (or another judge model)"
        )
    card: dict[str, Any] = json.loads(CARD_PATH.read_text(encoding="utf-8"))
    adapter = JUDGE_DIR / card["adapter"]
    if not adapter.is_file():
        raise OmnievalUserError(f"verifier adapter {adapter} named by {CARD_PATH} is missing; rerun "
                                "`python scripts/train_verifier.py`")  # fmt: skip
    return {**card, "adapter_path": str(adapter)}


def resolve_judge(cfg: VerifierConfig) -> ResolvedJudge:
    """``auto`` settings filled in: the shipped adapter's when the model is the embedded SmolLM2, generic otherwise."""
    card: dict[str, Any] | None = None
    if cfg.lora == "auto" and cfg.model == EMBEDDED_MODEL_SOURCE:
        card = shipped_card()
    if cfg.lora in ("auto", "none"):
        lora = card["adapter_path"] if card else None
    else:
        lora = str(Path(cfg.lora).expanduser())
        if not Path(lora).is_file():
            raise OmnievalUserError(f"verifier.lora: no such file {lora}; give a LoRA adapter GGUF, 'auto' or 'none'")
    style = cfg.prompt if cfg.prompt != "auto" else (card["style"] if card else "rubric")
    threshold: float | None
    if cfg.threshold == "auto":
        threshold = float(card["threshold"]) if card and card.get("threshold") is not None else None
    else:
        threshold = cfg.threshold
    return ResolvedJudge(
        style=style,
        grammar=PROMPT_STYLES[style][1] if cfg.constrained else None,
        top_logprobs=TOP_LOGPROBS if cfg.constrained else None,
        lora=lora,
        threshold=threshold,
    )
