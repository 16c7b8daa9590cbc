"""Built-in benchmark definitions shipped with small real samples (see data/LICENSES.md)."""

from __future__ import annotations

from omnieval.benchmarks._spec import UNIFORM, BenchmarkSpec, MetricSpec
from omnieval.benchmarks._task_types import task_defaults

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
        cluster_by="sample_meta",
        description=f"EgoMem ({split}): turn-by-turn audio dialogue with memory, judge-scored [fact, answer]",
    )  # fmt: skip


OMNIASSIST = BenchmarkSpec(
    name="omniassist", version="1", modality="video", task_type="streaming_assistant",
    data_file="omniassist_sample", loader="", records_fn="omnieval.benchmarks._judged:omniassist",
    prompt_template="", uniform_prompt_template="", postprocessor="strip", metrics=(),
    judge_module="omnieval.benchmarks.omniassist", options={"mode": "common"}, sequential_turns=True,
    generation={"max_tokens": 128}, cluster_by="interaction_id",
    description="OmniAssistBench: multi-turn video+audio assistant, 2 tiers/7 tasks/16 sub-tasks, 0-5 rubric",
)  # fmt: skip

BUILTIN = [MMLU_TINY, ASDIV_TINY, _egomem("original"), _egomem("with_noise"), OMNIASSIST]

# --- speech and open QA (issue item 4); scoring comes from the task-type registry (_task_types.py) ---

ASR_TINY = BenchmarkSpec(
    name="asr_tiny", version="1", modality="audio", **task_defaults("asr"),
    data_file="asr_tiny.jsonl", loader="omnieval.benchmarks._audio_loaders:speech_recognition",
    prompt_template="Transcribe the speech in the audio exactly. Reply with the transcription only.",
    uniform_prompt_template=UNIFORM + "Transcribe the audio.",
    generation={"max_tokens": 128},
    description="English speech, 11 clips (8 real telephone turns + 3 TTS), corpus WER on jiwer-normalised words",
)  # fmt: skip

ST_TINY = BenchmarkSpec(
    name="st_tiny", version="1", modality="audio", **task_defaults("st"),
    data_file="st_tiny.jsonl", loader="omnieval.benchmarks._audio_loaders:speech_translation",
    prompt_template=(
        "Translate the {source_lang} speech in the audio into {target_lang}. Reply with the {target_lang} "
        "translation only."
    ),
    uniform_prompt_template=UNIFORM + "Translate the audio into {target_lang}.",
    generation={"max_tokens": 128},
    description="English speech → French text, the asr_tiny clips with project-written references (BLEU, chrF)",
)  # fmt: skip

OPENQA_TINY = BenchmarkSpec(
    name="openqa_tiny", version="1", **task_defaults("open_qa"),
    data_file="openqa_tiny.jsonl", loader="omnieval.benchmarks._audio_loaders:open_qa",
    prompt_template="Answer the question with a short phrase only, no explanation.\n\nQuestion: {question}\nAnswer:",
    uniform_prompt_template=UNIFORM + "{question}",
    generation={"max_tokens": 32},
    description="NQ-open, 40 short-answer questions (first line; exact match + ANLS over all aliases)",
)  # fmt: skip

BUILTIN += [ASR_TINY, ST_TINY, OPENQA_TINY]
