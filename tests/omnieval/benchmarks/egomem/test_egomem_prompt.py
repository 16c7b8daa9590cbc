"""The EgoMem scoring prompt is the card's, character for character."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from omnieval.benchmarks.egomem import SCORING_PROMPT, build_scoring_prompt

# the repo sits beside shared/ (sessions and CI alike); the seed documents are not part of the package
SEED = Path(__file__).resolve().parents[4].parent / "shared" / "seeds" / "egomem-dataset-card.txt"

VERBATIM = [
    "以下是一个语音对话系统的个性化对话能力评分任务。首先，我解释一下每个字段的含义：\n person: 用户的名字，unknown_speaker代表目前名字未知。",
    "\n person_summary: 用户的对话历史 \n 每一轮对话中，question是用户问题，模型实际听到的是question的语音；",
    "ground_truth是标准答案，而model_response是模型给出的回复。",
    "对于每一轮对话，你需要给出一个个性化分fact_score，以及一个答案质量分answer_score。",
    "\nfact_score的评分标准是：如果模型的回复model_response中提到用户的名字、对话历史或用户画像，且与person、person_summary中所存储的事实相符，则得1分，否则得0分。",
    "如果模型的回复不涉及用户名字、对话历史、用户画像，标记为-1。",
    "\nanswer_score的评分标准是：只评价与问题本身相关的部分，不考虑用户的名字、对话历史或用户画像有关的部分。满分10分。",
    "参考ground_truth，如果模型对问题本身的回答合理，则应获得8分以上，否则不应该超过8分。\n\n你需要先进行思考，",
    "最后在回答的最后用一段json代码组织你的评分，每一轮的轮数号作为key, [fact_score, answer_score] 作为value。",
    "结果中需要包含所有轮次的评分。\n 例子：```json\n%s```。\n\n待评分数据：%s",
]


def test_key_sentences_verbatim() -> None:
    for s in VERBATIM:
        assert s in SCORING_PROMPT
    assert SCORING_PROMPT.startswith(VERBATIM[0]) and SCORING_PROMPT.endswith(VERBATIM[-1])
    assert SCORING_PROMPT.count("%s") == 2 and "\\" not in SCORING_PROMPT


@pytest.mark.skipif(not SEED.exists(), reason="seed card not available")
def test_equals_the_literal_in_the_card() -> None:
    lines = SEED.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if 'prompt = "' in line)
    block = []
    for line in lines[start:]:
        line = re.sub(r"^\| ", "", line)
        line = re.sub(r" \|$", "", line)
        block.append(line)
        if line.endswith('"'):
            break
    literal = "\n".join(block).split("=", 1)[1].strip()
    assert ast.literal_eval(literal) == SCORING_PROMPT  # the card's own Python literal, continuations and all


def test_builder_fills_both_slots() -> None:
    p = build_scoring_prompt(
        "李明", "李明说女儿下周六生日。", [("1", "问题一", "答案一", "回复一"), ("2", "问题二", "答案二", "回复二")]
    )
    assert "%s" not in p
    example = p.split("```json\n", 1)[1].split("```", 1)[0]
    assert set(json.loads(example)) == {"1", "2"}
    data = json.loads(p.split("待评分数据：", 1)[1])
    assert data["person"] == "李明" and data["person_summary"] == "李明说女儿下周六生日。"
    assert data["dialog"]["2"] == {"question": "问题二", "ground_truth": "答案二", "model_response": "回复二"}
    assert p.startswith(SCORING_PROMPT.split("%s")[0])
