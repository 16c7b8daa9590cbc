"""lm-eval's log-likelihood requests as pool scoring requests, token for token as lm-eval's API clients draw them.

lm-eval (``TemplateLM.loglikelihood`` / ``_encode_pair``, ``TemplateAPI``): trailing spaces of the context move to
the continuation; ``whole = enc(ctx + cont)``, ``cont = whole[len(enc(ctx)):]``; an empty context is the prefix token
(BOS, else EOS); ``ctx + cont`` is cut to its last ``max_length - 1`` tokens, the context losing what is cut; rolling
log-likelihood scores ``get_rolling_token_windows(max_seq_len=max_length - 2, context_len=1)`` made disjoint. The
tokenizer is the served model's own (the replica's ``/tokenize``), with no special tokens added, as ``local-completions``
tokenizes. Choices that share a context after all this go to the pool as one request: one replica, one prefix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from omnieval.core import OmnievalUserError


def split_pair(context: str, continuation: str) -> tuple[str, str]:
    """Trailing spaces of the context move to the continuation (lm-eval's ``_encode_pair``)."""
    n = len(context) - len(context.rstrip())
    if n > 0:
        return context[:-n], context[-n:] + continuation
    return context, continuation


def texts_to_tokenize(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Every distinct text the split needs tokenized (contexts are shared by a document's choices)."""
    out: dict[str, None] = {}
    for ctx, cont in pairs:
        if ctx == "":
            out[cont] = None
            continue
        c, k = split_pair(ctx, cont)
        out[c] = None
        out[c + k] = None
    return list(out)


def encode_pair(ctx: str, cont: str, tok: Mapping[str, list[int]], prefix_token_id: int | None) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) exactly as lm-eval's ``TemplateLM.loglikelihood`` draws them."""
    if ctx == "":
        cont_enc = tok[cont]
        if prefix_token_id is None:
            raise OmnievalUserError("an empty context is scored after the model's BOS/EOS token, and the replica did "
                                    "not report one; use a vllm, sglang, transformers or llamacpp replica")  # fmt: skip
        if cont_enc and cont_enc[0] == prefix_token_id:
            return cont_enc[:1], cont_enc[1:]
        return [prefix_token_id], cont_enc
    c, k = split_pair(ctx, cont)
    ctx_enc = tok[c]
    return ctx_enc, tok[c + k][len(ctx_enc) :]


def truncate(ctx: list[int], cont: list[int], max_length: int) -> tuple[list[int], list[int]]:
    """Left-truncate ``ctx + cont`` to ``max_length - 1`` tokens, as ``TemplateAPI`` does (one token is kept free
    for the generated one); the continuation is never cut."""
    limit = max_length - 1
    if len(cont) >= limit:
        raise OmnievalUserError(f"a continuation of {len(cont)} tokens does not fit max_length {max_length}; raise "
                                "the lm-eval option max_length (and the server's context size)")  # fmt: skip
    cut = max(0, len(ctx) + len(cont) - limit)
    return ctx[cut:], cont


def rolling_windows(tokens: list[int], prefix_token_id: int | None, max_length: int) -> list[tuple[list[int], list[int]]]:
    """lm-eval's disjoint rolling windows of a document (``TemplateAPI.loglikelihood_rolling``)."""
    from lm_eval import utils

    if prefix_token_id is None:
        raise OmnievalUserError("perplexity scores a document's first token after the model's BOS/EOS token, and the "
                                "replica did not report one; use a vllm, sglang, transformers or llamacpp replica")  # fmt: skip
    wins = utils.get_rolling_token_windows(token_list=tokens, prefix_token=prefix_token_id,
                                           max_seq_len=max_length - 2, context_len=1)  # fmt: skip
    return [utils.make_disjoint_window(w) for w in wins]


@dataclass
class ContextGroup:
    """Continuations scored after one context: one pool request."""

    context: list[int]
    continuations: list[list[int]] = field(default_factory=list)
    members: list[int] = field(default_factory=list)
    """Index of each continuation's lm-eval request."""


def group_by_context(encoded: Sequence[tuple[list[int], list[int]]]) -> list[ContextGroup]:
    """Requests with identical context ids, in first-seen order (a document's choices, usually)."""
    groups: dict[tuple[int, ...], ContextGroup] = {}
    for i, (ctx, cont) in enumerate(encoded):
        g = groups.get(tuple(ctx))
        if g is None:
            g = groups[tuple(ctx)] = ContextGroup(context=list(ctx))
        g.continuations.append(list(cont))
        g.members.append(i)
    return list(groups.values())
