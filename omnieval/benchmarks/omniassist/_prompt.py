"""OmniAssistBench prompts: the paper's Table 4 rubric verbatim, inside our judge and model prompts.

The paper says only that Table 4's rules "are provided to the judgment LLM as prompts during evaluation"; it does
not print the prompt. So ``RUBRIC_TABLE`` is Table 4 word for word and the frame around it is ours, written as a
careful benchmark author would:

* the "Response to Silence" column applies exactly when the ground truth is ``[KEEP QUIET]`` (its header says so);
* otherwise the turn is rated on Accuracy & Completeness and on Redundancy, and the score is the *lower* of the two
  (Redundancy has no levels 1 and 0, so it can only cap a score, never decide a failure);
* the judge ends with ``{"score": <0-5>}`` so the output parses reliably (``_parse.parse_rubric_score``).

The model-side system prompt is ours too; it tells the model the exact silence token, which the rubric presumes
("fails to follow the specific instruction to output the exact silence token"). Per the paper (SER), models are
not asked at every turn whether to respond: the instruction is given once, in the system prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from omnieval.benchmarks.omniassist._schema import KEEP_QUIET

RUBRIC_TABLE = """\
| Score | Accuracy & Completeness | Redundancy | Response to Silence (GT = “KEEP QUIET”) |
| 5 | Perfect Execution. The model correctly comprehends the intent and semantically matches the Ground Truth (GT). It covers all Key Points. | None. Contains almost no redundant information; only minor, contextually necessary elaborations are allowed. | Exact Match. Correctly judges that silence is needed and outputs the exact required token “[KEEP QUIET]”. |
| 4 | Minor Defects. Comprehends the intent and covers all Key Points, but the response contains minor factual errors or lacks precision in description. | Low. Contains minor redundant information, provided it remains relevant to the core subject. | Descriptive. Describes the state of inaction but fails to follow the specific instruction to output the exact silence token. |
| 3 | Partial Success. Comprehends the intent but misses at least one Key Point. The answer is directionally correct but factually imperfect. | Moderate. Contains information not present in the GT, but it remains relevant to the general context of the video. | Evasive. States that there is insufficient information to answer. |
| 2 | Contradiction. Comprehends the intent but provides a clearly wrong answer (e.g., opposite polarity, wrong object) or directly contradicts the GT. | High. Contains significant irrelevant information, obvious hallucinations, or details unrelated to the query. | Hallucinated Response. Fails to understand that current turn is not a proper time for response. Gives hallucinated answers to the questions instead. |
| 1 | Loose Relation. Fails to comprehend the specific question. The response is only loosely related to the topic. | — | Loose Relation. Provides a response that is tangentially related to the context but completely ignores the silence constraint. |
| 0 | Failure. Complete failure to comprehend the input. The response is entirely unrelated to the question, instruction, or video content. | — | Failure. Output is entirely unrelated to the question or context. |"""
"""Table 4 of the paper, verbatim (the scoring rubric given to the judge)."""

JUDGE_PROMPT = """\
You are grading one turn of an interaction between a user and an AI assistant that watches the user's live video \
and listens to the user, guiding the user towards a goal over several turns.
Score the assistant's response in this turn from 0 to 5 with the scoring rubric below. The evaluation is based on \
three dimensions: Accuracy and Completeness, Redundancy, and Adherence to Silence Constraints.

{rubric}

How to apply the rubric:
- If the Ground Truth is "{keep_quiet}", the assistant should stay silent in this turn: use only the "Response to \
Silence" column.
- Otherwise rate the response on "Accuracy & Completeness" and on "Redundancy"; the score is the lower of the two \
ratings.
- Compare with the Ground Truth and its Key Points; you do not see the video, so trust the Ground Truth.

[Task] {task}
[User's standing request] {instruction}
[User's query in this turn] {query}
[Key Points] {key_points}
[Ground Truth] {ground_truth}
[Assistant's response] {response}

Think briefly, then give the final score on the last line as JSON: {{"score": <integer from 0 to 5>}}"""
"""Our judge prompt around ``RUBRIC_TABLE``; ``str.format`` fields as in ``build_judge_prompt``."""


def build_judge_prompt(
    *,
    task: str,
    instruction: str | None,
    query: str | None,
    key_points: Sequence[str],
    ground_truth: str,
    response: str,
) -> str:
    """The judge prompt for one turn."""
    return JUDGE_PROMPT.format(
        rubric=RUBRIC_TABLE,
        keep_quiet=KEEP_QUIET,
        task=task,
        instruction=instruction or "(none)",
        query=query or "(no new query in this turn; the standing request applies)",
        key_points="; ".join(key_points) if key_points else "(none listed)",
        ground_truth=ground_truth,
        response=response,
    )


SYSTEM_PROMPT = (
    "You are a real-time AI assistant. You see what the user sees and hear what the user hears: the interaction "
    "arrives as consecutive video clips with their audio. Help the user reach their goal using the video, the audio, "
    "the prior knowledge and any reference material you are given. Keep answers concise and specific to what you "
    f"observe. If you should not respond yet (for example, the event the user asked you to wait for has not "
    f"happened), output exactly {KEEP_QUIET} and nothing else."
)
"""Model-side system prompt (ours)."""
