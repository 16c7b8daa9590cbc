"""The judge prompt carries the paper's Table 4 rubric verbatim, and the silence rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnieval.benchmarks.omniassist import KEEP_QUIET, RUBRIC_TABLE, SYSTEM_PROMPT, build_judge_prompt

# the repo sits beside shared/ (sessions and CI alike); the seed documents are not part of the package
SEED = Path(__file__).resolve().parents[4].parent / "shared" / "seeds" / "omniassistbench-paper.txt"

VERBATIM = [
    "| Score | Accuracy & Completeness | Redundancy | Response to Silence (GT = “KEEP QUIET”) |",
    "Perfect Execution. The model correctly comprehends the intent and semantically matches the Ground Truth (GT). It covers all Key Points.",
    "Exact Match. Correctly judges that silence is needed and outputs the exact required token “[KEEP QUIET]”.",
    "Descriptive. Describes the state of inaction but fails to follow the specific instruction to output the exact silence token.",
    "Partial Success. Comprehends the intent but misses at least one Key Point. The answer is directionally correct but factually imperfect.",
    "Evasive. States that there is insufficient information to answer.",
    "Contradiction. Comprehends the intent but provides a clearly wrong answer (e.g., opposite polarity, wrong object) or directly contradicts the GT.",
    "Hallucinated Response. Fails to understand that current turn is not a proper time for response. Gives hallucinated answers to the questions instead.",
    "Loose Relation. Fails to comprehend the specific question. The response is only loosely related to the topic.",
    "Failure. Complete failure to comprehend the input. The response is entirely unrelated to the question, instruction, or video content.",
    "Moderate. Contains information not present in the GT, but it remains relevant to the general context of the video.",
]


def test_rubric_verbatim() -> None:
    for s in VERBATIM:
        assert s in RUBRIC_TABLE
    assert [line.split(" | ")[0] for line in RUBRIC_TABLE.splitlines()[1:]] == [f"| {n}" for n in (5, 4, 3, 2, 1, 0)]


@pytest.mark.skipif(not SEED.exists(), reason="seed paper not available")
def test_rubric_rows_are_the_papers() -> None:
    lines = SEED.read_text(encoding="utf-8").splitlines()
    start = lines.index(RUBRIC_TABLE.splitlines()[0])
    assert "\n".join(lines[start : start + 7]) == RUBRIC_TABLE


def test_judge_prompt() -> None:
    p = build_judge_prompt(
        task="Proactive Response / SER",
        instruction="Tell me the taxi plate.",
        query=None,
        key_points=["AB 123"],
        ground_truth=KEEP_QUIET,
        response="No taxi yet.",
    )
    assert RUBRIC_TABLE in p
    assert f'If the Ground Truth is "{KEEP_QUIET}"' in p and '"Response to Silence" column' in p
    assert "[Ground Truth] [KEEP QUIET]" in p and "[Assistant's response] No taxi yet." in p
    assert "[Key Points] AB 123" in p and "standing request applies" in p
    assert p.rstrip().endswith('{"score": <integer from 0 to 5>}')
    assert "lower of the two" in p
    assert f"output exactly {KEEP_QUIET}" in SYSTEM_PROMPT
