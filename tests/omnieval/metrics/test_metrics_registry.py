"""The metric registry: names, lazy targets, did-you-mean errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import omnieval.metrics as metrics
from omnieval.core import UnknownNameError
from omnieval.metrics import METRICS, Metric, make_metric

ROOT = Path(__file__).resolve().parents[3]


def test_public_api() -> None:
    assert set(metrics.__all__) == {"Metric", "METRICS", "make_metric", "bootstrap_replicates", "bootstrap_stderr",
                                    "clustered_stderr", "clustered_stderr_from_sums", "mean_stderr", "sample_stddev"}
    assert METRICS.kind == "metric"
    assert METRICS.names() == ["anls", "bleu", "chrf", "exact_match", "wer"]


@pytest.mark.parametrize("name", ["anls", "bleu", "chrf", "exact_match", "wer"])
def test_names_resolve_to_their_metric(name: str) -> None:
    cls = METRICS.get(name)
    assert issubclass(cls, Metric) and cls.name == name
    assert isinstance(make_metric(name), cls)


def test_unknown_name_suggests() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean: exact_match") as info:
        make_metric("exact_mach")
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownNameError, match="Did you mean: bleu"):
        make_metric("bleu4")


def test_unknown_setting_is_rejected() -> None:
    with pytest.raises(TypeError):
        make_metric("wer", lowercase=True)


def test_targets_are_lazy_and_import_loads_no_scorer() -> None:
    # A fresh interpreter: nothing resolved yet, so every target is still a "module:Class" string.
    code = (
        "import sys, omnieval.metrics as m, omnieval.postprocess as p\n"
        "print(all(isinstance(m.METRICS.target(n), str) for n in m.METRICS.names()),"
        " all(isinstance(p.POSTPROCESSORS.target(n), str) for n in p.POSTPROCESSORS.names()),"
        " 'sacrebleu' in sys.modules, 'jiwer' in sys.modules, 'rapidfuzz' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["True", "True", "False", "False", "False"]
