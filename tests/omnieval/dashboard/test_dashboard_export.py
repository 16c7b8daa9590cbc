"""Static export: self-contained index.html (data inlined for file://) + data.json + local assets."""

from __future__ import annotations

import json
import re
from pathlib import Path

from omnieval._artifacts import read_manifest, read_records, write_records
from omnieval.core import Output, TextOutput
from omnieval.dashboard import export_static


def _embedded(html: str) -> dict:
    m = re.search(r'<script id="omnieval-data" type="application/json">(.*?)</script>', html, re.S)
    assert m, "data not embedded"
    return json.loads(m.group(1))


def test_export_writes_self_contained_site(runs_dir: Path, tmp_path: Path) -> None:
    page = export_static(runs_dir, tmp_path / "site", max_samples=3)
    site = page.parent
    assert page == site / "index.html"
    assert (site / "static" / "app.js").is_file() and (site / "static" / "style.css").is_file()
    html = page.read_text()
    assert "<!--OMNIEVAL_DATA-->" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from the network
    data = json.loads((site / "data.json").read_text())
    embedded = _embedded(html)
    assert embedded["cells"] == data["cells"] and data["static"] is True
    winners = {(c["model"], c["benchmark"]): c["run_id"] for c in data["cells"]}
    assert winners[("alpha", "mmlu_mini")] == "r2" and ("alpha", "mmmu_mini") not in winners
    assert [r["run_id"] for r in data["runs"]] == ["r3", "r5", "r4", "r2", "r1"]
    # samples capped per (run, model, benchmark); the failed run without records has none
    assert "r3" not in data["samples"]
    assert [s["index"] for s in data["samples"]["r4"] if s["benchmark"] == "mmlu_mini"] == [0, 1, 2]


def test_export_escapes_script_breakers(runs_dir: Path, tmp_path: Path) -> None:
    recs = read_records(runs_dir / "r2")
    recs[0] = recs[0].model_copy(update={"output": Output(text=TextOutput(prediction=["</script><b>x</b>"]))})
    write_records(runs_dir / "r2", recs)
    html = export_static(runs_dir, tmp_path / "site").read_text()
    assert html.count("</script>") == 2  # the data tag and the app.js tag only
    preds = [s["prediction"] for s in _embedded(html)["samples"]["r2"]]
    assert "</script><b>x</b>" in preds
    assert read_manifest(runs_dir / "r2").run_id == "r2"


def test_export_of_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    data = _embedded(export_static(tmp_path / "runs", tmp_path / "site").read_text())
    assert data["cells"] == [] and data["runs"] == [] and data["samples"] == {}
