"""lm-eval's log-likelihood requests become pool requests token for token as lm-eval's own API client draws them.

The oracle is lm-eval's own code: its ``TemplateLM.loglikelihood`` (context/continuation split, empty context) and
``TemplateAPI`` (truncation, rolling windows) run with a tokenizer of ours, and record the token ids they would score;
omnieval's functions must produce the same ids from the same tokenizer.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from testlib.tiers import need

need("lm_eval")

from omnieval.adapters._loglik import (  # noqa: E402
    encode_pair,
    group_by_context,
    rolling_windows,
    texts_to_tokenize,
    truncate,
)
from omnieval.core import OmnievalUserError  # noqa: E402

PREFIX = 1


def toy_encode(text: str) -> list[int]:
    """A tokenizer whose split depends on the neighbouring characters (a leading space joins the word after it, as in
    BPE), so ``enc(ctx) + enc(cont) != enc(ctx + cont)`` and the split rule matters."""
    return [sum(map(ord, piece)) % 50000 + 2 for piece in re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9 ]| +", text)]


PAIRS = [
    ("Question: what is 2+2?\nAnswer:", " 4"),
    ("Question: what is 2+2?\nAnswer: ", "4"),  # trailing space moves to the continuation
    ("The capital of France is  ", "Paris"),  # two trailing spaces
    ("", "A lone continuation"),  # empty context: the prefix token
    ("Fill in: the cat sat on the", " mat."),
]


def _lm_eval_split(pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """What lm-eval's ``TemplateLM.loglikelihood`` hands to ``_loglikelihood_tokens``."""
    from lm_eval.api.model import TemplateLM

    seen: list[tuple[list[int], list[int]]] = []

    class Oracle(TemplateLM):  # type: ignore[misc]
        backend = "causal"

        @property
        def eot_token_id(self) -> int:
            return PREFIX

        @property
        def prefix_token_id(self) -> int:
            return PREFIX

        def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kw: Any) -> list[int]:
            return toy_encode(string)

        def _loglikelihood_tokens(self, requests: list[Any], **kw: Any) -> list[tuple[float, bool]]:
            seen.extend((list(c), list(k)) for _, c, k in requests)
            return [(0.0, True)] * len(requests)

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
            raise NotImplementedError

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            raise NotImplementedError

    class Req:
        def __init__(self, args: tuple[str, str]) -> None:
            self.args = args

    Oracle().loglikelihood([Req(p) for p in pairs], disable_tqdm=True)
    return seen


def test_split_matches_lm_evals_own_template_lm() -> None:
    tok = {t: toy_encode(t) for t in texts_to_tokenize(PAIRS)}
    ours = [encode_pair(c, k, tok, PREFIX) for c, k in PAIRS]
    assert ours == _lm_eval_split(PAIRS)
    # the split is not the naive one: at least one pair would tokenize differently piecewise
    assert any(toy_encode(c) + toy_encode(k) != toy_encode(c + k) for c, k in PAIRS if c)


def test_every_text_the_split_needs_is_tokenized_once() -> None:
    texts = texts_to_tokenize(PAIRS + PAIRS)
    assert len(texts) == len(set(texts))
    assert "Question: what is 2+2?\nAnswer:" in texts and "Question: what is 2+2?\nAnswer: 4" in texts
    with pytest.raises(KeyError):  # nothing else is looked up
        encode_pair("unseen", " text", {t: toy_encode(t) for t in texts}, PREFIX)


def test_empty_context_needs_the_prefix_token() -> None:
    tok = {"x y": toy_encode("x y")}
    with pytest.raises(OmnievalUserError, match="BOS/EOS"):
        encode_pair("", "x y", tok, None)


def test_truncation_and_rolling_windows_match_template_api() -> None:
    from lm_eval import utils

    ctx, cont = list(range(100, 130)), [7, 8, 9]
    c, k = truncate(ctx, cont, max_length=20)  # TemplateAPI keeps (ctx + cont)[-(max_length - 1):]
    assert c + k == (ctx + cont)[-19:] and k == cont
    assert truncate(ctx, cont, max_length=2048) == (ctx, cont)
    with pytest.raises(OmnievalUserError, match="max_length"):
        truncate(ctx, list(range(30)), max_length=20)

    doc = list(range(2, 60))
    wins = rolling_windows(doc, PREFIX, max_length=20)
    expected = [utils.make_disjoint_window(w) for w in utils.get_rolling_token_windows(
        token_list=doc, prefix_token=PREFIX, max_seq_len=20 - 2, context_len=1)]  # fmt: skip
    assert wins == expected and len(wins) > 1
    assert [t for _, k in wins for t in k] == doc  # every token predicted exactly once
    assert wins[0][0] == [PREFIX]


def test_choices_sharing_a_context_become_one_request() -> None:
    enc = [([1, 2, 3], [4]), ([1, 2, 3], [5, 6]), ([9], [4]), ([1, 2, 3], [7])]
    groups = group_by_context(enc)
    assert [(g.context, g.continuations, g.members) for g in groups] == [
        ([1, 2, 3], [[4], [5, 6], [7]], [0, 1, 3]),
        ([9], [[4]], [2]),
    ]
