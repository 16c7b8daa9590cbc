"""Synthetic request streams for the scale study: uniform, skewed lengths, prefix-heavy (few-shot families).

Each request carries its prompt text (routing policies see it, as in the pool) and the chained KV block hashes of
that text (the simulated prefix cache sees those); shared family prefixes are hashed once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from serving import EngineProfile, block_hashes

WORKLOADS = ("uniform", "skewed", "prefix_heavy")


@dataclass
class SimRequest:
    rid: int
    group: str
    """Benchmark the request belongs to; chunks never mix groups (as ``make_chunks``)."""
    prompt: str
    blocks: tuple[int, ...]
    n_prompt: int
    n_out: int
    max_tokens: int
    client: int = -1
    replica: int = -1
    t_submit: float = 0.0
    t_done: float = 0.0
    cached_tokens: int = 0


class _Text:
    """Random filler text as slices of one pre-drawn pool (drawing characters one by one is the sim's slowest part)."""

    def __init__(self, rng: random.Random, pool_chars: int = 1 << 16) -> None:
        self.rng = rng
        self.pool = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz      ", k=pool_chars))

    def __call__(self, n_chars: int) -> str:
        out = []
        while n_chars > 0:
            take = min(n_chars, len(self.pool) // 2)
            off = self.rng.randrange(len(self.pool) - take)
            out.append(self.pool[off : off + take])
            n_chars -= take
        return "".join(out)


def _lognormal_int(rng: random.Random, mean: float, sigma: float, lo: int, hi: int) -> int:
    mu = math.log(mean) - sigma * sigma / 2  # so that E[X] = mean
    return int(min(hi, max(lo, round(rng.lognormvariate(mu, sigma)))))


def make_workload(name: str, n: int, profile: EngineProfile, *, seed: int = 0, groups: int = 32) -> list[SimRequest]:
    """``n`` requests of workload ``name`` in benchmark order (group by group, as suites are laid out)."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; choose from {WORKLOADS}")
    rng = random.Random(seed)
    _text = _Text(rng)
    cpt = profile.chars_per_token
    bc = profile.block_chars
    ctx = profile.ctx_per_slot
    per_group = max(1, -(-n // groups))
    out: list[SimRequest] = []
    for g in range(groups):
        gname = f"bench{g:03d}"
        prefix, prefix_blocks = "", tuple[int, ...]()
        if name == "prefix_heavy":
            # few-shot header shared by every item of the benchmark: ~1200 tokens, a whole number of KV blocks
            n_blocks = max(1, round(1200 * cpt / bc))
            prefix = f"<{gname} few-shot>" + _text(n_blocks * bc - len(f"<{gname} few-shot>"))
            prefix_blocks = block_hashes(prefix, bc)
        for _ in range(per_group):
            if len(out) >= n:
                break
            i = len(out)
            if name == "uniform":
                p_tok, o_tok = 150, 64
            elif name == "skewed":
                o_tok = _lognormal_int(rng, 64, 1.2, 4, 1024)
                p_tok = _lognormal_int(rng, 300, 1.0, 16, ctx - o_tok - 8)
            else:
                p_tok, o_tok = 40, 16
            suffix = f"#{i}:" + _text(max(1, int(p_tok * cpt) - len(f"#{i}:")))
            prompt = prefix + suffix
            out.append(SimRequest(
                rid=i, group=gname, prompt=prompt, blocks=block_hashes(suffix, bc, prefix_blocks),
                n_prompt=profile.tokens(prompt), n_out=o_tok, max_tokens=1024 if name == "skewed" else o_tok,
            ))  # fmt: skip
    return out
