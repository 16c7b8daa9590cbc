"""Constrained, probability-carrying verdicts without an engine: prompt styles, the judge a config resolves to, the
verdict probability from token log-probabilities, thresholded ratings and the ``verifier_prob`` score row."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from omnieval.core import (
    EMBEDDED_MODEL_SOURCE,
    HubModelSource,
    Message,
    OmnievalUserError,
    Output,
    PathModelSource,
    Record,
    TextOutput,
    VerifierConfig,
)
from omnieval.verifier import (
    JudgeReply,
    Triple,
    _judges,
    apply_verdict,
    build_prompt,
    judge_prompt,
    judge_with_retries,
    resolve_judge,
    verifier_rows,
)
from omnieval.verifier._parse import verdict_probability
from omnieval.verifier._prompt import RUBRIC_GRAMMAR, VERDICT_GRAMMAR
from serving import GenerationRequest, TokenLogprob, chat_payload, parse_chat_completion


def test_verdict_prompt_is_compact_and_clipped() -> None:
    t = Triple("What is 4 + 5?\n" + "context " * 400, "9", "Let me think. " * 200 + "The answer is 9.")
    p = build_prompt(t, style="verdict")
    assert p.startswith("Question:\n") and p.endswith("Is the model's final answer correct?")
    assert "[Rules]" not in p and "The answer is 9." in p and len(p) < 2000  # tail kept, rules absent
    assert "[Rules]" in build_prompt(t)  # rubric stays the default style
    with pytest.raises(ValueError, match="unknown verifier prompt style 'x'"):
        build_prompt(t, style="x")


def test_request_carries_grammar_and_logprobs() -> None:
    from omnieval.core import GenerationOptions

    req = GenerationRequest(request_id="r", messages=[{"role": "user", "content": "q"}], options=GenerationOptions(),
                            grammar=VERDICT_GRAMMAR, top_logprobs=10)  # fmt: skip
    body = chat_payload(req, "m")
    assert body["grammar"] == VERDICT_GRAMMAR and body["logprobs"] is True and body["top_logprobs"] == 10
    assert chat_payload(req, "m", "vllm")["structured_outputs"] == {"grammar": VERDICT_GRAMMAR}
    plain = chat_payload(GenerationRequest(request_id="r", messages=[], options=GenerationOptions()), "m")
    assert "grammar" not in plain and "logprobs" not in plain


def test_response_logprobs_parse_and_give_the_verdict_probability() -> None:
    """The shape llama-server returns (measured): the digit is its own token after ' ', alternatives pre-grammar."""
    raw = {"choices": [{"message": {"content": "Rating: 1"}, "finish_reason": "stop", "logprobs": {"content": [
        {"token": "Rating", "logprob": -0.01, "top_logprobs": [{"token": "Rating", "logprob": -0.01}]},
        {"token": " ", "logprob": -0.1, "top_logprobs": [{"token": " ", "logprob": -0.1}]},
        {"token": "1", "logprob": math.log(0.6), "top_logprobs": [
            {"token": "1", "logprob": math.log(0.6)}, {"token": "0", "logprob": math.log(0.2)},
            {"token": " 0", "logprob": math.log(0.1)}, {"token": "5", "logprob": math.log(0.05)}]},
        {"token": "", "logprob": -1.0, "top_logprobs": []},
    ]}}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}  # fmt: skip
    res = parse_chat_completion(json.dumps(raw).encode(), "r", 0.1)
    assert res.text == "Rating: 1" and res.logprobs is not None and len(res.logprobs) == 4
    assert verdict_probability(res.logprobs) == pytest.approx(0.6 / (0.6 + 0.2 + 0.1))
    assert verdict_probability(None) is None and verdict_probability([TokenLogprob(token="x", logprob=0.0)]) is None
    only_one = [TokenLogprob(token="0", logprob=-0.1, top={"0": -0.1})]
    assert verdict_probability(only_one) == 0.0
    no_logprobs = json.loads(json.dumps(raw))
    del no_logprobs["choices"][0]["logprobs"]
    assert parse_chat_completion(json.dumps(no_logprobs).encode(), "r", 0.1).logprobs is None


def test_threshold_rates_by_probability_else_by_the_digit() -> None:
    replies = [JudgeReply("Rating: 1", 0.55), JudgeReply("Rating: 1", 0.9), JudgeReply("Rating: 0", 0.3), "Rating: 1"]

    def gen(prompts: list[str], attempt: int) -> list[object]:
        return replies[: len(prompts)]

    by_digit = judge_with_retries(["a", "b", "c", "d"], gen, max_retries=0)  # type: ignore[arg-type]
    assert [v.rating for v in by_digit] == [1, 1, 0, 1]
    assert [v.probability for v in by_digit] == [0.55, 0.9, 0.3, None]
    calibrated = judge_with_retries(["a", "b", "c", "d"], gen, max_retries=0, threshold=0.6)  # type: ignore[arg-type]
    assert [v.rating for v in calibrated] == [0, 1, 0, 1]  # no probability: the written digit stands


def test_apply_verdict_and_probability_score_row() -> None:
    recs = []
    for i, (rating, p) in enumerate([(1, 0.8), (0, 0.2), (1, None)]):
        r = Record(benchmark="b", index=i, model="m", label="9", messages=[Message.text("user", "q")])
        r.output = Output(text=TextOutput(prediction=["9"]))
        judged = judge_with_retries(["x"], lambda ps, a, rr=rating, pp=p: [JudgeReply(f"Rating: {rr}", pp)],
                                    max_retries=0)  # fmt: skip
        apply_verdict(r, judged[0])
        recs.append(r)
    assert [r.metrics.get("verifier_prob") for r in recs] == [0.8, 0.2, None]
    rows = {row.metric: row for row in verifier_rows(recs, engine="llamacpp")}
    assert rows["verifier"].value == pytest.approx(200 / 3)
    assert rows["verifier_prob"].value == pytest.approx(50.0) and rows["verifier_prob"].num_errors == 1


def test_resolve_judge_defaults_to_the_shipped_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = tmp_path / "a.gguf"
    adapter.write_bytes(b"GGUF")
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"adapter": "a.gguf", "style": "verdict", "threshold": 0.42}))
    monkeypatch.setattr(_judges, "JUDGE_DIR", tmp_path)
    monkeypatch.setattr(_judges, "CARD_PATH", card)
    j = resolve_judge(VerifierConfig())
    assert VerifierConfig().model == EMBEDDED_MODEL_SOURCE
    assert (j.lora, j.style, j.grammar, j.threshold) == (str(adapter), "verdict", VERDICT_GRAMMAR, 0.42)
    assert j.top_logprobs and "Question:\n" in judge_prompt(Triple("q", "r", "p"), VerifierConfig(), j)
    other = resolve_judge(VerifierConfig(model=HubModelSource(repo_id="naver-ai/OmniEval-Verifier-GGUF")))
    assert (other.lora, other.style, other.grammar, other.threshold) == (None, "rubric", RUBRIC_GRAMMAR, None)
    free = resolve_judge(VerifierConfig(lora="none", constrained=False, threshold=None))
    assert (free.lora, free.style, free.grammar, free.top_logprobs) == (None, "rubric", None, None)
    with pytest.raises(OmnievalUserError, match="verifier.lora: no such file"):
        resolve_judge(VerifierConfig(model=PathModelSource(path="/x.gguf"), lora=str(tmp_path / "missing.gguf")))
    card.unlink()
    with pytest.raises(OmnievalUserError, match="scripts/train_verifier.py"):
        resolve_judge(VerifierConfig())


def test_shipped_card_names_an_adapter_that_exists() -> None:
    card = _judges.shipped_card()
    assert Path(card["adapter_path"]).is_file() and card["style"] in ("verdict", "rubric")
    assert 0.0 < card["threshold"] < 1.0 and card["base_sha256"]
