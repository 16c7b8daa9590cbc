"""The EgoMem scoring prompt, verbatim from the dataset card, and the builders around it.

``SCORING_PROMPT`` is the card's Python literal copied character for character (including its backslash line
continuations, which join lines without a newline), so ``SCORING_PROMPT % (example, data)`` is the card's prompt.

The card leaves open what fills its two ``%s`` slots; our choices, made to follow the prompt's own wording:

* example (first ``%s``): a JSON object keyed by the session's real turn numbers with illustrative
  ``[fact_score, answer_score]`` pairs, so the example shows the required keys ("结果中需要包含所有轮次的评分");
* data (second ``%s``): one JSON object per dialogue session with exactly the fields the prompt explains —
  ``person`` and ``person_summary`` from the session's ``profile_summary``, and under ``dialog`` one entry per turn
  number (1-based) with ``question`` (``user_txt``), ``ground_truth`` (``bot_txt``) and ``model_response``.
  ``ensure_ascii=False`` keeps the Chinese readable for the judge.

The model-side prompt (system text + memory block) is ours: the card gives only the scoring prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from omnieval.benchmarks.egomem._schema import ProfileSummary, RelatedPerson

# fmt: off
SCORING_PROMPT = "以下是一个语音对话系统的个性化对话能力评分任务。首先，我解释一下每个字段的含义：\n person: 用户的名字，unknown_speaker代表目前名字未知。\n person_summary: 用户的对话历史 \n 每一轮对话中，question是用户问题，模型实际听到的是question的语音；ground_truth是标准答案，而\
model_response是模型给出的回复。对于每一轮对话，你需要给出一个个性化分fact_score，以及一个答案质量分answer_score。\nfact_score的评分标准是：如果模型的回复model_response中提到用户的名字、对话历史或用户画像，且与person、person_summary中所存储的事实相符，则得1分，否则得0分。如果模型的回复不涉及\
用户名字、对话历史、用户画像，标记为-1。\nanswer_score的评分标准是：只评价与问题本身相关的部分，不考虑用户的名字、对话历史或用户画像有关的部分。满分10分。参考ground_truth，如果模型对问题本身的回答合理，则应获得8分以上，否则不应该超过8分。\n\n\
你需要先进行思考，最后在回答的最后用一段json代码组织你的评分，每一轮的轮数号作为key, [fact_score, answer_score] 作为value。结果中需要包含所有轮次的评分。\n 例子：```json\n%s```。\n\n待评分数据：%s"
# fmt: on
"""The card's scoring prompt; ``%`` with (example JSON, data JSON)."""

_EXAMPLE_VALUES = ([1, 9], [-1, 8], [0, 6])


def example_json(turn_keys: Sequence[str]) -> str:
    """The example answer for the first ``%s``: the session's turn numbers with illustrative score pairs."""
    return json.dumps({k: _EXAMPLE_VALUES[i % len(_EXAMPLE_VALUES)] for i, k in enumerate(turn_keys)})


def session_data_json(person: str, person_summary: str, turns: Sequence[tuple[str, str, str, str]]) -> str:
    """The data for the second ``%s``; ``turns`` are (turn number, question, ground_truth, model_response)."""
    data = {
        "person": person,
        "person_summary": person_summary,
        "dialog": {k: {"question": q, "ground_truth": gt, "model_response": r} for k, q, gt, r in turns},
    }
    return json.dumps(data, ensure_ascii=False, indent=2)


def build_scoring_prompt(person: str, person_summary: str, turns: Sequence[tuple[str, str, str, str]]) -> str:
    """The full judge prompt for one dialogue session."""
    return SCORING_PROMPT % (example_json([t[0] for t in turns]), session_data_json(person, person_summary, turns))


SYSTEM_PROMPT = (
    "你是一个拥有长期记忆的全双工语音对话助手。你会听到用户的语音，请结合你对用户的记忆（名字、事实、画像、历史对话和人际关系），"
    "用简洁自然的中文口语直接回复用户。"
)
"""Model-side system prompt (ours; the card does not define one)."""


def memory_block(profile: ProfileSummary, people: Sequence[RelatedPerson], *, people_title: str) -> str:
    """The memory context shown to the model: the user's profile summary plus related people."""
    lines = [
        "【用户记忆】",
        f"用户名字：{profile.person}" + ("（名字未知）" if profile.person == "unknown_speaker" else ""),
        f"用户事实：{profile.person_fact or '无'}",
        f"用户画像：{profile.person_profile or '无'}",
        f"历史对话摘要：{profile.person_summary or '无'}",
        f"【{people_title}】",
    ]
    if people:
        lines += [f"- {p.person}（{p.person_relation}）：{'；'.join(p.person_fact) or '无'}" for p in people]
    else:
        lines.append("无")
    return "\n".join(lines)
