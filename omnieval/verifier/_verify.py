"""Run the verifier over Records: a pool of ``VerifierWorker`` actors, a retry loop, verdicts into the Records.

Failure policy (issue item 5): an unparsable reply or a failed request is one failed attempt; the prompt is re-sent
up to ``max_retries`` more times, and what still fails is stored as ``rating None`` + ``error``: never a score, and
never ``record.error`` (that field belongs to the inference path). Retries sample (``retry_temperature``, a new seed
per attempt): at temperature 0 the judge would repeat the same unparsable reply.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from omnieval._artifacts import ScoreRow, StderrMethod
from omnieval.core import GenerationOptions, Record, VerifierConfig
from omnieval.verifier._judges import ResolvedJudge, resolve_judge
from omnieval.verifier._parse import parse_rating
from omnieval.verifier._prompt import Triple, build_prompt, record_triple

if TYPE_CHECKING:
    from omnieval.benchmarks import BenchmarkSpec

log = logging.getLogger("omnieval.verifier")


@dataclass(frozen=True)
class JudgeReply:
    """One judge reply: its text and, when the engine returned token log-probabilities, P(rating = 1)."""

    text: str
    p_correct: float | None = None


GenerateFn = Callable[[list[str], int], Sequence["str | JudgeReply | BaseException | None"]]
"""(prompts, attempt number from 0) -> one reply per prompt (text, or text + probability), or an exception/None for a
failed request."""


def worker_replies(replies: Sequence[tuple[str | None, float | None, str | None]]) -> list[JudgeReply | BaseException]:
    """A ``VerifierWorker.generate`` result -> replies for ``judge_with_retries``."""
    return [JudgeReply(text, p) if err is None and text is not None else RuntimeError(err or "no reply")
            for text, p, err in replies]  # fmt: skip


@dataclass
class Verdict:
    rating: int | None
    """0/1; None when every attempt failed."""
    rationale: str
    """The judge's explanation."""
    raw: str
    """Raw reply of the last attempt ('' when the judge never answered)."""
    attempts: int
    """Judge calls made for this prompt."""
    error: str | None
    """Why the last attempt failed, when ``rating`` is None."""
    probability: float | None = None
    """P(correct) from the judge's token log-probabilities at the verdict; None when the engine gave none."""

    def as_meta(self) -> dict[str, Any]:
        return asdict(self)


def judge_with_retries(
    prompts: Sequence[str], generate: GenerateFn, *, max_retries: int, threshold: float | None = None
) -> list[Verdict]:
    """Send all prompts, then re-send only the failed ones, at most ``max_retries`` more times.

    With a ``threshold`` and a reply that carries a probability, the rating is ``p_correct >= threshold`` (a judge
    calibrated on labelled data); otherwise it is the digit the judge wrote.
    """
    out = [Verdict(None, "", "", 0, "not judged") for _ in prompts]
    pending = list(range(len(prompts)))
    for attempt in range(max_retries + 1):
        if not pending:
            break
        for i in pending:
            out[i].attempts += 1
        try:
            raws = list(generate([prompts[i] for i in pending], attempt))
            if len(raws) != len(pending):
                raise RuntimeError(f"judge returned {len(raws)} replies for {len(pending)} prompts")
        except Exception as e:  # noqa: BLE001 - a whole failed batch is one failed attempt, never a crash
            for i in pending:
                out[i].error = f"judge call failed: {type(e).__name__}: {e}"[:500]
            continue
        still = []
        for i, raw in zip(pending, raws, strict=True):
            v = out[i]
            if raw is None or isinstance(raw, BaseException):
                v.error = f"judge request failed: {raw!r}"[:500] if raw is not None else "judge request failed"
                still.append(i)
                continue
            p_correct = raw.p_correct if isinstance(raw, JudgeReply) else None
            raw = raw.text if isinstance(raw, JudgeReply) else raw
            v.raw, v.probability = raw, p_correct
            parsed = parse_rating(raw)
            v.rationale = parsed.rationale
            if parsed.rating is None:
                v.error = "unparsable judge output: no 'Rating: 0|1' found"
                still.append(i)
            else:
                rating = parsed.rating
                if threshold is not None and p_correct is not None:
                    rating = int(p_correct >= threshold)
                v.rating, v.error = rating, None
        pending = still
    return out


def attempt_options(cfg: VerifierConfig, attempt: int) -> GenerationOptions:
    """Greedy first; later attempts sample so a retry can produce a different (parsable) reply."""
    if attempt == 0:
        return GenerationOptions(temperature=0.0, max_tokens=cfg.max_tokens, seed=0)
    return GenerationOptions(temperature=cfg.retry_temperature, max_tokens=cfg.max_tokens, seed=attempt)


class VerifierPool:
    """Start ``min(workers, NUMA nodes)`` ``VerifierWorker`` actors; ``generate`` spreads a batch over them.

    Use as a context manager: exit shuts every llama-server down before the actors are killed (a killed actor would
    leave its server process orphaned).
    """

    def __init__(self, cfg: VerifierConfig, *, pin: bool = True, judge: ResolvedJudge | None = None) -> None:
        self.cfg = cfg
        self.judge: ResolvedJudge = judge or resolve_judge(cfg)
        self.pin = pin
        self.workers: list[Any] = []
        self.infos: list[dict[str, Any]] = []
        self.alive: list[int] = []
        """Indices of workers that have not failed; a dead one is skipped for the rest of the run."""

    def __enter__(self) -> VerifierPool:
        import ray

        from cluster import connect
        from omnieval.verifier._actor import VerifierWorker, WorkerSpec
        from omnieval.verifier._cpu import plan_workers

        connect()
        cfg = self.cfg
        n = len(plan_workers(cfg.workers, threads=cfg.threads))  # local topology; each worker re-plans on its host
        for i in range(n):
            spec = WorkerSpec(
                worker_index=i, num_workers=n, source=cfg.model, threads=cfg.threads, parallel=cfg.parallel,
                ctx_per_slot=cfg.ctx_per_slot, request_timeout_s=cfg.request_timeout_s,
                startup_timeout_s=cfg.startup_timeout_s, pin=self.pin, lora=self.judge.lora, nice=cfg.nice,
                grammar=self.judge.grammar, top_logprobs=self.judge.top_logprobs,
            )  # fmt: skip
            self.workers.append(VerifierWorker.options(num_cpus=cfg.num_cpus).remote(spec))  # type: ignore[attr-defined]
        try:
            refs = [w.start.remote() for w in self.workers]
            ready, not_ready = ray.wait(refs, num_returns=len(refs), timeout=cfg.startup_timeout_s + 60)
            if not_ready:
                raise TimeoutError(
                    f"{len(not_ready)} verifier worker(s) not started after {cfg.startup_timeout_s + 60:.0f}s; "
                    f"are {cfg.num_cpus} free Ray CPUs available per worker (verifier.num_cpus)?"
                )
            self.infos = ray.get(refs)
            self.alive = list(range(len(self.workers)))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def generate(self, prompts: list[str], attempt: int) -> list[str | JudgeReply | BaseException | None]:
        """Chunks of ``2 × parallel`` prompts, refilled onto whichever worker finishes first."""
        import ray

        opts = attempt_options(self.cfg, attempt).model_dump(mode="json")
        size = max(1, 2 * self.cfg.parallel)
        chunks = [list(range(i, min(i + size, len(prompts)))) for i in range(0, len(prompts), size)]
        out: list[str | JudgeReply | BaseException | None] = [None] * len(prompts)
        alive = self.alive
        pending: dict[Any, tuple[int, list[int]]] = {}

        def feed(w: int) -> None:
            if chunks:
                idx = chunks.pop(0)
                pending[self.workers[w].generate.remote([prompts[i] for i in idx], opts)] = (w, idx)

        for w in alive:
            for _ in range(2):
                feed(w)
        if not alive:
            return [RuntimeError("no verifier worker alive")] * len(prompts)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            w, idx = pending.pop(done[0])
            try:
                replies = ray.get(done[0])
            except Exception as e:  # noqa: BLE001 - the worker died: its chunk fails this attempt, others go on
                log.warning("verifier worker %d failed: %r", w, e)
                for i in idx:
                    out[i] = e
                if w in alive:
                    alive.remove(w)
                if not alive:
                    for j in (j for c in chunks for j in c):
                        out[j] = RuntimeError("no verifier worker alive")
                    chunks.clear()
                elif not any(v[0] in alive for v in pending.values()):
                    feed(alive[0])
                continue
            for i, reply in zip(idx, worker_replies(replies), strict=True):
                out[i] = reply
            feed(w)
        return out

    def __exit__(self, *exc: object) -> None:
        import ray

        if not self.workers:
            return
        try:
            ray.get([w.shutdown.remote() for w in self.workers], timeout=60)
        except Exception as e:  # noqa: BLE001 - still kill the actors
            log.warning("verifier shutdown: %r", e)
        for w in self.workers:
            ray.kill(w, no_restart=True)
        self.workers = []


def judge_triples(triples: Sequence[Triple], cfg: VerifierConfig, *, pin: bool = True) -> list[Verdict]:
    """Verdicts for text triples (used by ``run_verifier`` and the labelled-set evaluation)."""
    if not triples:
        return []
    try:
        judge = resolve_judge(cfg)
        prompts = [judge_prompt(t, cfg, judge) for t in triples]
        with VerifierPool(cfg, pin=pin, judge=judge) as pool:
            t0 = time.monotonic()
            verdicts = judge_with_retries(prompts, pool.generate, max_retries=cfg.max_retries,
                                          threshold=judge.threshold)  # fmt: skip
            log.info(
                "verifier: %d prompts in %.1fs on %d worker(s)", len(prompts), time.monotonic() - t0, len(pool.workers)
            )
            return verdicts
    except Exception as e:  # noqa: BLE001 - the verifier never fails the run: every sample records why
        msg = unavailable(e)
        return [Verdict(None, "", "", 0, msg) for _ in triples]


def unavailable(e: BaseException) -> str:
    """Why the judge cannot run, as each sample records it (logged once here)."""
    log.error("verifier unavailable: %r", e)
    return f"verifier unavailable: {type(e).__name__}: {e}"[:500]


def run_verifier(records: list[Record], cfg: VerifierConfig) -> None:
    """Judge every record with a prediction and no inference error; verdicts go into ``metrics``/``meta`` in place."""
    if not cfg.enabled:
        return
    todo = [(r, t) for r in records if (t := record_triple(r)) is not None]
    verdicts = judge_triples([t for _, t in todo], cfg)
    for (r, _), v in zip(todo, verdicts, strict=True):
        apply_verdict(r, v)


def apply_verdict(record: Record, verdict: Verdict) -> None:
    """``meta['verifier']`` always; ``metrics['verifier']`` (0/1) and ``metrics['verifier_prob']`` when rated."""
    record.meta["verifier"] = verdict.as_meta()
    record.metrics.pop("verifier", None)
    record.metrics.pop("verifier_prob", None)
    if verdict.rating is not None:
        record.metrics["verifier"] = float(verdict.rating)
        if verdict.probability is not None:
            record.metrics["verifier_prob"] = round(verdict.probability, 6)


def judge_prompt(t: Triple, cfg: VerifierConfig, judge: ResolvedJudge | None = None) -> str:
    """The prompt ``cfg``'s judge reads for ``t`` (its style: the rubric, or the compact verdict prompt)."""
    judge = judge or resolve_judge(cfg)
    return build_prompt(t, max_prediction_chars=cfg.max_prediction_chars, style=judge.style)


def verifier_rows(
    records: list[Record], *, engine: str, specs: Mapping[str, BenchmarkSpec] | None = None
) -> list[ScoreRow]:
    """Per (model, benchmark): a ``verifier`` ScoreRow, 100 × the mean verdict over the judged samples, and, when the
    judge gave probabilities, a ``verifier_prob`` row, 100 × the mean P(correct) (None when nothing was judged).

    ``num_errors`` counts inference failures (nothing to judge) plus judge failures (no rating after retries).
    """
    from omnieval.benchmarks import BENCHMARKS

    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.model, r.benchmark)].append(r)
    rows = []
    for (model, bench), recs in sorted(groups.items()):
        framework, modality = "builtin", "text"
        spec = (specs or {}).get(bench) or (BENCHMARKS.get(bench) if bench in BENCHMARKS else None)
        if spec is not None:  # the run's own specs know suite-defined benchmarks too
            framework, modality = spec.framework, spec.modality
        cluster_by = spec.cluster_by if spec is not None else None
        for metric in ("verifier", "verifier_prob"):
            judged = [r for r in recs if metric in r.metrics]
            if metric == "verifier_prob" and not judged:
                continue
            vals = [r.metrics[metric] for r in judged]
            se, method, units = _verdict_stderr(judged, vals, cluster_by)
            rows.append(
                ScoreRow(
                    model=model, benchmark=bench, metric=metric,
                    value=round(100.0 * sum(vals) / len(vals), 4) if vals else None, num_samples=len(recs),
                    stderr=None if se is None else round(100.0 * se, 4), stderr_method=method if se is not None else None,
                    num_clusters=units, num_errors=len(recs) - len(vals), engine=engine, framework=framework,
                    modality=modality,
                )
            )  # fmt: skip
    return rows


def _verdict_stderr(
    judged: list[Record], vals: list[float], cluster_by: str | None
) -> tuple[float | None, StderrMethod, int | None]:
    """The mean verdict's standard error over the judged samples, clustered on the benchmark's units if it has them."""
    from omnieval.metrics import clustered_stderr, mean_stderr

    if cluster_by is None:
        return mean_stderr(sum(vals), sum(v * v for v in vals), len(vals)), "mean", None
    units = [str(r.meta.get(cluster_by)) for r in judged]
    return clustered_stderr(vals, units), "clustered", len(set(units))
