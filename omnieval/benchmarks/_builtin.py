"""Built-in benchmark definitions shipped with small real samples (see data/LICENSES.md)."""

from __future__ import annotations

from omnieval.benchmarks._spec import BenchmarkSpec, MetricSpec

UNIFORM = "Please answer the question in an appropriate format.\n\n"

MMLU_TINY = BenchmarkSpec(
    name="mmlu_tiny",
    version="1",
    task_type="mc",
    data_file="mmlu_tiny.jsonl",
    loader="omnieval.benchmarks._loaders:multiple_choice",
    prompt_template=(
        "The following is a multiple choice question. Answer with the letter of the correct option only.\n\n"
        "{question}\n{options}\nAnswer:"
    ),
    uniform_prompt_template=UNIFORM + "{question}\n{options}",
    postprocessor="mc_letter",
    metrics=(MetricSpec(name="exact_match"),),
    generation={"max_tokens": 16},
    description="MMLU, 40 short 4-option questions (MC-letter extraction + exact match)",
)

ASDIV_TINY = BenchmarkSpec(
    name="asdiv_tiny",
    version="1",
    task_type="math",
    data_file="asdiv_tiny.jsonl",
    loader="omnieval.benchmarks._loaders:math_word_problem",
    prompt_template=(
        "{passage} {question}\nSolve it step by step, then finish with 'The answer is N.' where N is a number."
    ),
    uniform_prompt_template=UNIFORM + "{passage} {question}",
    postprocessor="number",
    metrics=(MetricSpec(name="exact_match"),),
    generation={"max_tokens": 96},
    description="ASDiv math word problems, 40 samples (number extraction + exact match)",
)

def _egomem(split: str) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=f"egomem_{split}", version="1", modality="audio", task_type="memory_dialogue",
        data_file="egomem_sample", loader="", records_fn="omnieval.benchmarks._judged:egomem",
        prompt_template="", uniform_prompt_template="", postprocessor="strip", metrics=(),
        judge_module="omnieval.benchmarks.egomem", options={"split": split}, generation={"max_tokens": 128},
        description=f"EgoMem ({split}): turn-by-turn audio dialogue with memory, judge-scored [fact, answer]",
    )  # fmt: skip


OMNIASSIST = BenchmarkSpec(
    name="omniassist", version="1", modality="video", task_type="streaming_assistant",
    data_file="omniassist_sample", loader="", records_fn="omnieval.benchmarks._judged:omniassist",
    prompt_template="", uniform_prompt_template="", postprocessor="strip", metrics=(),
    judge_module="omnieval.benchmarks.omniassist", options={"mode": "common"}, sequential_turns=True,
    generation={"max_tokens": 128},
    description="OmniAssistBench: multi-turn video+audio assistant, 2 tiers/7 tasks/16 sub-tasks, 0-5 rubric",
)  # fmt: skip

BUILTIN = [MMLU_TINY, ASDIV_TINY, _egomem("original"), _egomem("with_noise"), OMNIASSIST]
