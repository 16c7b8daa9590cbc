"""Scoring requests in each server's own terms, and their replies read back exactly.

The vLLM and llama-server replies are ones those servers really returned (vLLM 0.32.0 CPU on SmolLM2-135M bf16;
llama-server of llama-cpp-python 0.3.36 on the Q4_1 GGUF), trimmed to the fields read. SGLang has no CPU build: its
reply follows SGLang's documented ``/generate`` shape. A reply that lacks what was asked fails the request.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from omnieval.core import OmnievalUserError, RequestFailed
from serving import (
    ENGINES,
    Endpoint,
    ScoreRequest,
    TokenizeRequest,
    free_port,
    parse_scores,
    score_bodies,
    tokenize_body,
)
from serving._scoring import checkpoint_prefix_token, forced_grammar

REQ = ScoreRequest(request_id="d0", context=[504, 3575, 282, 4649, 314], continuations=[[7042], [3575, 30]])

VLLM_REPLY = {"choices": [
    {"index": 1, "prompt_logprobs": [None, {"3575": {"logprob": -9.1, "rank": 40}}, {"282": {"logprob": -0.6, "rank": 1}},
                                     {"4649": {"logprob": -3.2, "rank": 2}, "1": {"logprob": -1.0, "rank": 1}},
                                     {"314": {"logprob": -0.47251105308532715, "rank": 1}},
                                     {"3575": {"logprob": -5.519253730773926, "rank": 11},
                                      "7042": {"logprob": -0.2692539393901825, "rank": 1}},
                                     {"30": {"logprob": -0.25, "rank": 1}}]},
    {"index": 0, "prompt_logprobs": [None, {"3575": {"logprob": -9.1, "rank": 40}}, {"282": {"logprob": -0.6, "rank": 1}},
                                     {"4649": {"logprob": -3.2, "rank": 2}, "1": {"logprob": -1.0, "rank": 1}},
                                     {"314": {"logprob": -0.47251105308532715, "rank": 1}},
                                     {"7042": {"logprob": -0.2692539393901825, "rank": 1}}]},
]}  # fmt: skip

FORCED_REPLIES = [
    {"tokens": [7042], "completion_probabilities": [
        {"id": 7042, "token": " Paris", "logprob": -0.24842411279678345,
         "top_logprobs": [{"id": 7042, "token": " Paris", "logprob": -0.24842411279678345}]}]},
    {"tokens": [3575, 30], "completion_probabilities": [
        {"id": 3575, "token": " capital", "logprob": -5.483327388763428,
         "top_logprobs": [{"id": 7042, "token": " Paris", "logprob": -0.24842411279678345}]},
        {"id": 30, "token": ".", "logprob": -5.26684045791626,
         "top_logprobs": [{"id": 282, "token": " of", "logprob": -0.06172824278473854}]}]},
]  # fmt: skip


def _raw(x: object) -> bytes:
    return json.dumps(x).encode()


def test_vllm_prompt_logprobs_are_summed_from_the_context_on() -> None:
    (path, body), = score_bodies("vllm", REQ, "smollm2")
    assert path == "/v1/completions" and body["prompt_logprobs"] == 1 and body["max_tokens"] == 1
    assert body["prompt"] == [REQ.context + c for c in REQ.continuations]  # one request for every choice
    a, b = parse_scores("vllm", [_raw(VLLM_REPLY)], REQ)  # choices come back out of order: sorted by index
    assert a.logprob == pytest.approx(-0.2692539393901825) and a.n_tokens == 1 and a.is_greedy
    assert b.token_logprobs == pytest.approx([-5.519253730773926, -0.25]) and not b.is_greedy  # rank 11


def test_forced_decoding_reads_raw_logit_logprobs_and_greedy_from_the_top_token() -> None:
    bodies = score_bodies("llamacpp", REQ, "smollm2")
    assert [p for p, _ in bodies] == ["/completion", "/completion"]  # one per continuation, same context
    assert bodies[1][1]["grammar"] == "root ::= <[3575]> <[30]>" and bodies[1][1]["n_predict"] == 2
    assert all(b["prompt"] == REQ.context and b["post_sampling_probs"] is False for _, b in bodies)
    a, b = parse_scores("llamacpp", [_raw(r) for r in FORCED_REPLIES], REQ)
    assert a.is_greedy and a.logprob == pytest.approx(-0.24842411279678345)
    assert not b.is_greedy and b.logprob == pytest.approx(-5.483327388763428 - 5.26684045791626)
    wrong = {"completion_probabilities": [{"id": 9, "logprob": -1.0, "top_logprobs": []}]}
    with pytest.raises(RequestFailed, match="forced decoding produced"):  # a build without token-id grammars
        parse_scores("llamacpp", [_raw(FORCED_REPLIES[0]), _raw(wrong)], REQ)


def test_sglang_generate_reply() -> None:
    (path, body), = score_bodies("sglang", REQ, "m")
    assert path == "/generate" and body["logprob_start_len"] == len(REQ.context) - 1 and body["return_logprob"]

    def item(cont: list[int], lps: list[float], top: list[int]) -> dict[str, object]:
        return {"meta_info": {"input_token_logprobs": [[None, 314, None]] + [[lp, t, None] for lp, t in zip(lps, cont, strict=True)],
                              "input_top_logprobs": [None] + [[[lp, tp, None]] for lp, tp in zip(lps, top, strict=True)]}}  # fmt: skip

    reply = [item([7042], [-0.27], [7042]), item([3575, 30], [-5.5, -0.2], [7042, 30])]
    a, b = parse_scores("sglang", [_raw(reply)], REQ)
    assert (a.logprob, a.is_greedy) == (pytest.approx(-0.27), True)
    assert (b.logprob, b.is_greedy) == (pytest.approx(-5.7), False)


@pytest.mark.parametrize("reply", [
    {"choices": [{"index": 0, "prompt_logprobs": None}, {"index": 1, "prompt_logprobs": None}]},  # not vLLM
    {"choices": [{"index": 0, "text": "x"}]},  # one prompt answered of two
    {"choices": [{"index": i, "prompt_logprobs": [None]} for i in range(2)]},  # too short
    {"error": "bad"},
])  # fmt: skip
def test_a_reply_without_the_asked_tokens_fails_the_request(reply: dict[str, object]) -> None:
    with pytest.raises(RequestFailed):
        parse_scores("vllm", [_raw(reply)], REQ)


def test_tokenize_bodies_add_no_special_tokens() -> None:
    assert tokenize_body("llamacpp", "hi", "m") == {"content": "hi", "add_special": False}
    assert tokenize_body("vllm", "hi", "m") == {"model": "m", "prompt": "hi", "add_special_tokens": False}
    assert forced_grammar([1, 22]) == "root ::= <[1]> <[22]>"


def test_engines_declare_how_they_score() -> None:
    assert {n: ENGINES.get(n).scoring({}) for n in ("vllm", "llamacpp", "sglang", "transformers", "openai",
                                                    "simulated", "whisper")} == {  # fmt: skip
        "vllm": "vllm", "llamacpp": "llamacpp", "sglang": "sglang", "transformers": "forward", "openai": None,
        "simulated": None, "whisper": None}  # fmt: skip
    assert ENGINES.get("openai").scoring({"scoring": "vllm"}) == "vllm"  # an external vLLM server, declared
    with pytest.raises(OmnievalUserError, match="engine_kwargs.scoring"):
        ENGINES.get("openai").scoring({"scoring": "gpt"})


def test_checkpoint_prefix_token_is_bos_else_eos(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|im_start|>", "eos_token": {"content": "<|im_end|>"},
        "added_tokens_decoder": {"1": {"content": "<|im_start|>"}, "2": {"content": "<|im_end|>"}}}))  # fmt: skip
    assert checkpoint_prefix_token(tmp_path) == 1
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": None, "eos_token": "</s>"}))
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 7, "content": "</s>"}]}))
    assert checkpoint_prefix_token(tmp_path) == 7
    assert checkpoint_prefix_token(tmp_path / "missing") is None


def test_instant_server_scores_through_the_pool_transport() -> None:
    """The INSTANT server (line-rate studies) answers tokenize and scoring as vLLM does; the transport reads them."""
    from pool._http import HttpTransport

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "serving._instant", "--port", str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:  # readiness is only observable by asking; bounded by the deadline
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ep = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", served_model_name="instant", scoring="vllm")

        async def go() -> None:
            t = HttpTransport(10.0, None)
            toks = (await t.tokenize(ep, TokenizeRequest(request_id="t", text="ab c"), "r")).tokens
            assert toks == [ord(c) for c in "ab c"]
            res = await t.score(ep, ScoreRequest(request_id="s", context=toks, continuations=[[1], [2, 3]]), "r")
            assert [(c.logprob, c.n_tokens, c.is_greedy) for c in res.choices] == [(-1.0, 1, True), (-2.0, 2, True)]
            await t.close()

        asyncio.run(go())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_one_token_choices_are_read_from_one_prefill_of_the_context() -> None:
    """MMLU-style choices (one token each) go to vLLM as the context alone with ``logprob_token_ids``: the output layer
    runs at the last position only. The reply is one vLLM 0.32.0 (fp32) really gave; those log-probs equal its
    ``prompt_logprobs`` of context + choice to the last digit (checked against the same server)."""
    req = ScoreRequest(request_id="m", context=[504, 3575, 282, 4649, 314], continuations=[[7042], [3575], [28]])
    ((path, body),) = score_bodies("vllm", req, "smollm2")
    assert body["prompt"] == req.context and body["logprob_token_ids"] == [28, 3575, 7042] and body["max_tokens"] == 1
    assert body["temperature"] == 0 and body["repetition_penalty"] == 1.0  # the sampled token is the argmax
    reply = {"choices": [{"index": 0, "logprobs": {"tokens": ["token_id:7042"], "token_logprobs": [-0.2606096565723419],
             "top_logprobs": [{"token_id:7042": -0.2606096565723419, "token_id:3575": -5.511080741882324,
                               "token_id:28": -7.6659440994262695}]}}]}  # fmt: skip
    a, b, c = parse_scores("vllm", [_raw(reply)], req)
    assert (a.logprob, a.is_greedy) == (-0.2606096565723419, True)
    assert (b.logprob, b.is_greedy, c.logprob, c.is_greedy) == (-5.511080741882324, False, -7.6659440994262695, False)
    short = {"choices": [{"index": 0, "logprobs": {"tokens": ["token_id:7042"], "top_logprobs": [{"token_id:7042": -0.3}]}}]}
    with pytest.raises(RequestFailed, match="no log-probability for token"):
        parse_scores("vllm", [_raw(short)], req)
