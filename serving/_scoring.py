"""Log-likelihood scoring through an engine's own server: the request bodies and reply parsers per server.

Each server is asked in its own terms for the log-probability of given tokens, never through a reconstruction of
ours (``docs``: ``shared/notes/loglikelihood.md``):

- ``vllm``: ``/v1/completions`` with ``prompt_logprobs: 1`` on token-id prompts; every choice of a document goes in
  one request (a list of prompts). Each prompt position's entry holds the prompt token itself with its rank, so the
  sum and the greedy flag (``rank == 1``) are exact.
- ``llamacpp``: stock llama-server returns no prompt log-probabilities, so the continuation is *forced*: generation
  from the context under a grammar of token-id terminals (``root ::= <[id1]> <[id2]> ...``), ``n_probs: 1`` with
  ``post_sampling_probs: false`` returns each forced token's log-probability under the raw logits (before grammar
  and samplers) and the top token; ``cache_prompt`` reuses the context's KV for the next choice on that slot.
- ``sglang``: native ``/generate`` on ``input_ids`` with ``return_logprob`` and ``logprob_start_len``.

Tokenization is the server's own (``/tokenize``, special tokens off, as lm-eval's API clients tokenize).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from omnieval.core import RequestFailed
from serving._types import ChoiceLogprob, ScoreRequest

ScoringDialect = Literal["vllm", "llamacpp", "sglang"]


def root_url(base_url: str) -> str:
    """The server's root (``/tokenize``, ``/completion``, ``/generate`` live there, not under ``/v1``)."""
    return base_url.removesuffix("/").removesuffix("/v1")


def checkpoint_prefix_token(model_dir: str | Path) -> int | None:
    """BOS, else EOS, of a Hugging Face checkpoint's tokenizer, read from its files (no tokenizer library in the
    replica's process): ``tokenizer_config.json`` names the tokens, ``added_tokens`` give their ids."""
    d = Path(model_dir)
    try:
        cfg = json.loads((d / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    ids: dict[str, int] = {}
    for i, t in (cfg.get("added_tokens_decoder") or {}).items():
        ids[t.get("content", "")] = int(i)
    try:
        for t in json.loads((d / "tokenizer.json").read_text()).get("added_tokens") or []:
            ids.setdefault(t["content"], int(t["id"]))
    except (OSError, ValueError, KeyError):
        pass
    for name in ("bos_token", "eos_token"):
        tok = cfg.get(name)
        text = tok.get("content") if isinstance(tok, dict) else tok
        if text and text in ids:
            return ids[text]
    return None


def tokenize_body(dialect: ScoringDialect, text: str, served_model_name: str) -> dict[str, Any]:
    """``POST {root}/tokenize`` body: the text's token ids with no special tokens added."""
    if dialect == "llamacpp":
        return {"content": text, "add_special": False}
    return {"model": served_model_name, "prompt": text, "add_special_tokens": False}


def parse_tokens(raw: bytes) -> list[int]:
    try:
        toks = json.loads(raw)["tokens"]
        return [int(t) for t in toks]
    except (ValueError, KeyError, TypeError) as e:
        raise RequestFailed(f"malformed /tokenize reply ({e!r}): {raw[:200]!r}") from None


def score_bodies(
    dialect: ScoringDialect, req: ScoreRequest, served_model_name: str
) -> list[tuple[str, dict[str, Any]]]:
    """(path under the server root, body) of each HTTP request that scores ``req``."""
    ctx = req.context
    if dialect == "vllm" and all(len(c) == 1 for c in req.continuations):
        # one-token choices (MMLU's letters): one prefill of the context, the output layer at its last position only,
        # and the choices' log-probs from it (``logprob_token_ids``), instead of the output layer at every prompt
        # position. Sampling neutral, so the sampled token is the argmax: a choice is greedy when it is that token.
        ids = sorted({c[0] for c in req.continuations})
        return [("/v1/completions", {"model": served_model_name, "prompt": ctx, "max_tokens": 1, "temperature": 0.0,
                                     "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                                     "presence_penalty": 0.0, "frequency_penalty": 0.0, "logprobs": len(ids),
                                     "logprob_token_ids": ids, "return_tokens_as_token_ids": True})]  # fmt: skip
    if dialect == "vllm":
        return [("/v1/completions", {"model": served_model_name, "prompt": [ctx + c for c in req.continuations],
                                     "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 1})]  # fmt: skip
    if dialect == "sglang":
        return [("/generate", {"input_ids": [ctx + c for c in req.continuations],
                               "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
                               "return_logprob": True, "logprob_start_len": len(ctx) - 1, "top_logprobs_num": 1})]  # fmt: skip
    return [("/completion", {"prompt": ctx, "n_predict": len(c), "grammar": forced_grammar(c), "n_probs": 1,
                             "post_sampling_probs": False, "temperature": 0.0, "samplers": [], "cache_prompt": True,
                             "return_tokens": True})
            for c in req.continuations]  # fmt: skip


def forced_grammar(tokens: list[int]) -> str:
    """A GBNF grammar that admits exactly this token sequence (token-id terminals, llama.cpp PR 17816)."""
    return "root ::= " + " ".join(f"<[{int(t)}]>" for t in tokens)


def _choice(lps: list[float], greedy: list[bool]) -> ChoiceLogprob:
    return ChoiceLogprob(logprob=float(sum(lps)), n_tokens=len(lps), is_greedy=all(greedy), token_logprobs=lps)


def parse_scores(dialect: ScoringDialect, raws: list[bytes], req: ScoreRequest) -> list[ChoiceLogprob]:
    """The replies of ``score_bodies`` as one ``ChoiceLogprob`` per continuation; a reply that does not carry the
    asked tokens is a ``RequestFailed`` (never a silent zero)."""
    try:
        if dialect == "vllm" and all(len(c) == 1 for c in req.continuations):
            return _parse_vllm_next_token(json.loads(raws[0]), req)
        if dialect == "vllm":
            return _parse_vllm(json.loads(raws[0]), req)
        if dialect == "sglang":
            return _parse_sglang(json.loads(raws[0]), req)
        return [_parse_forced(json.loads(r), c) for r, c in zip(raws, req.continuations, strict=True)]
    except RequestFailed:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise RequestFailed(f"malformed scoring reply ({e!r}): {raws[0][:300]!r}") from None


def _parse_vllm(data: dict[str, Any], req: ScoreRequest) -> list[ChoiceLogprob]:
    choices = sorted(data["choices"], key=lambda c: c["index"])
    if len(choices) != len(req.continuations):
        raise RequestFailed(f"vLLM answered {len(choices)} prompts of {len(req.continuations)}")
    out = []
    n = len(req.context)
    for ch, cont in zip(choices, req.continuations, strict=True):
        plp = ch.get("prompt_logprobs")
        if plp is None:
            raise RequestFailed("the server returned no prompt_logprobs (is it vLLM?)")
        if len(plp) != n + len(cont):
            raise RequestFailed(f"prompt_logprobs cover {len(plp)} tokens, the prompt has {n + len(cont)}")
        lps, greedy = [], []
        for pos, tok in enumerate(cont, start=n):
            entry = plp[pos][str(tok)]
            lps.append(float(entry["logprob"]))
            greedy.append(int(entry["rank"]) == 1)
        out.append(_choice(lps, greedy))
    return out


def _parse_vllm_next_token(data: dict[str, Any], req: ScoreRequest) -> list[ChoiceLogprob]:
    lp = data["choices"][0]["logprobs"]
    top = {int(k.removeprefix("token_id:")): float(v) for k, v in lp["top_logprobs"][0].items()}
    sampled = int(str(lp["tokens"][0]).removeprefix("token_id:"))
    out = []
    for (tok,) in req.continuations:
        if tok not in top:
            raise RequestFailed(f"the server returned no log-probability for token {tok} (is it vLLM >= 0.20?)")
        out.append(_choice([top[tok]], [sampled == tok]))
    return out


def _parse_sglang(data: Any, req: ScoreRequest) -> list[ChoiceLogprob]:
    items = data if isinstance(data, list) else [data]
    out = []
    for item, cont in zip(items, req.continuations, strict=True):
        meta = item["meta_info"]
        # from logprob_start_len = len(ctx) - 1: that first entry is None (no token before it is predicted here)
        inp, top = meta["input_token_logprobs"][1:], meta["input_top_logprobs"][1:]
        if len(inp) < len(cont):
            raise RequestFailed(f"SGLang returned {len(inp)} input log-probs for {len(cont)} continuation tokens")
        lps, greedy = [], []
        for j, tok in enumerate(cont):
            lp, tid = inp[j][0], int(inp[j][1])
            if tid != int(tok):
                raise RequestFailed(f"SGLang scored token {tid} where the continuation has {tok}")
            lps.append(float(lp))
            greedy.append(bool(top[j]) and int(top[j][0][1]) == int(tok))
        out.append(_choice(lps, greedy))
    return out


def _parse_forced(data: dict[str, Any], cont: list[int]) -> ChoiceLogprob:
    probs = data["completion_probabilities"]
    got = [int(p["id"]) for p in probs]
    if got != [int(t) for t in cont]:
        raise RequestFailed(f"forced decoding produced tokens {got[:8]}, not the continuation {cont[:8]} (a server "
                            "without token-id grammar terminals cannot score)")  # fmt: skip
    lps = [float(p["logprob"]) for p in probs]
    greedy = [bool(p.get("top_logprobs")) and int(p["top_logprobs"][0]["id"]) == int(p["id"]) for p in probs]
    return _choice(lps, greedy)
