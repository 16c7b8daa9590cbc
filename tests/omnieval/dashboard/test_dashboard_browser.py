"""The page in real headless Debian Chromium (selenium + the distro chromedriver): table, filters, radar, compare.

Needs ``scripts/install_browser.sh`` (apt chromium + chromium-driver, pip selenium); skips cleanly without them.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from testlib.tiers import need, unavailable

from omnieval.dashboard import create_app, export_static

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("OMNIEVAL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("OMNIEVAL_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT_S = 15

_TABLE_JS = """
const t = document.getElementById('leaderboard');
return {
  head: [...t.tHead.querySelectorAll('th[data-benchmark]')].map(th => th.dataset.benchmark),
  rows: [...t.tBodies[0].rows].map(r => ({
    model: r.dataset.model,
    gaps: [...r.querySelectorAll('td.gap')].map(td => td.dataset.benchmark),
    coverage: r.querySelector('td.coverage').textContent.trim(),
  })),
};
"""
_RADAR_JS = """
return [...document.querySelectorAll('#radar polygon.radar-series')].map(p => ({
  model: p.dataset.model, points: p.getAttribute('points').trim().split(/\\s+/).map(xy => xy.split(',').map(Number)),
}));
"""

_ERRBAR_JS = """
return [...document.querySelectorAll('#leaderboard tbody td.score')].map(td => {
  const ci = td.querySelector('.ebar .ebar-ci');
  return {model: td.parentElement.dataset.model, bench: td.dataset.benchmark,
          se: (td.querySelector('.se') || {}).textContent || null,
          left: ci ? parseFloat(ci.style.left) : null, width: ci ? parseFloat(ci.style.width) : null};
});
"""
_WHISKER_JS = """
return [...document.querySelectorAll('#radar line.radar-errbar')].map(l => ({
  model: l.dataset.model, bench: l.dataset.benchmark,
  len: Math.hypot(l.x2.baseVal.value - l.x1.baseVal.value, l.y2.baseVal.value - l.y1.baseVal.value),
}));
"""


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        unavailable("browser", f"headless browser not installed ({CHROMIUM}, {CHROMEDRIVER})")
    webdriver = need("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,2300",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        opts.add_argument(arg)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    d = webdriver.Chrome(options=opts, service=service)
    d.set_page_load_timeout(WAIT_S)
    try:
        yield d
    finally:
        d.quit()


def _wait(d: Any, cond: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, WAIT_S).until(lambda drv: cond(drv), message=f"timed out waiting for {what}")


def _table(d: Any) -> dict:
    return d.execute_script(_TABLE_JS)


def _models(d: Any) -> list[str]:
    return [r["model"] for r in _table(d)["rows"]]


def _select(d: Any, id_: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(d.find_element(By.ID, id_)).select_by_value(value)


def _screenshot(d: Any, path: Path) -> None:
    assert d.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, f"screenshot looks empty ({len(data)} bytes)"
    if out := os.environ.get("OMNIEVAL_SCREENSHOT_DIR"):  # keep a copy for a person to look at
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(out) / path.name)


def test_dashboard_in_browser(driver: Any, runs_dir: Path, tmp_path: Path, live_server, run_factory) -> None:
    from selenium.webdriver.common.by import By

    with live_server(create_app(runs_dir)) as url:
        driver.get(url + "/")
        _wait(driver, lambda d: _models(d) == ["gamma", "beta", "alpha"], "leaderboard rows")
        table = _table(driver)
        assert table["head"] == ["asr_mini", "gsm8k_mini", "mmlu_mini", "mmmu_mini"]
        gaps = {(r["model"], g) for r in table["rows"] for g in r["gaps"]}
        assert gaps == {("alpha", "mmmu_mini"), ("alpha", "asr_mini"), ("beta", "asr_mini"), ("gamma", "gsm8k_mini")}
        assert [r["coverage"] for r in table["rows"]] == ["75%", "75%", "50%"]
        assert driver.find_element(By.CSS_SELECTOR, 'tr[data-model="gamma"] td.mean').text == "63.0"

        # radar: one polygon per default-selected model, one vertex per benchmark, not collapsed to the centre
        radar = _wait(driver, lambda d: d.execute_script(_RADAR_JS), "radar polygons")
        assert driver.find_element(By.ID, "radar-metric").get_attribute("value") == "verifier"  # every run has it
        assert sorted(p["model"] for p in radar) == ["alpha", "beta", "gamma"]
        for p in radar:
            assert len(p["points"]) == 4
            assert len({tuple(xy) for xy in p["points"]}) > 1
        assert driver.find_elements(By.CSS_SELECTOR, "#radar circle.radar-gap")  # gaps drawn at the centre

        # compare r2 (alpha) with r4 (beta) on mmlu_mini: 5 aligned rows, r4 lacks sample 4
        _select(driver, "compare-run-a", "r2")
        _select(driver, "compare-run-b", "r4")
        _select(driver, "compare-benchmark", "mmlu_mini")
        driver.find_element(By.ID, "compare-go").click()
        _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#compare tbody tr")) == 5, "compare rows")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#compare tbody td.gap")) == 1
        assert "5 aligned samples" in driver.find_element(By.ID, "compare-summary").text
        _wait(driver, lambda d: "cannot be paired: different samples (5 vs 4)" in d.find_element(By.ID, "compare-stats").text,
              "unpairable note")  # fmt: skip
        assert "60.0 ± 9.0" in driver.find_element(By.ID, "compare-stats").text  # each side's own error still shown

        # error bars: each leaderboard cell's ± and its 95% bar, the radar's whiskers, the side-by-side interval
        cells = driver.execute_script(_ERRBAR_JS)
        by = {(c["model"], c["bench"]): c for c in cells}
        lb = httpx.get(url + "/api/leaderboard").json()
        for m in lb["models"]:
            for b, c in m["cells"].items():
                if c is None:
                    continue
                got = by[(m["name"], b)]
                assert got["se"] == f"± {c['stderr']:.1f}"
                low = max(0.0, c["value"] - 1.96 * c["stderr"])
                assert got["left"] == pytest.approx(low, abs=0.05)  # the bar starts at the interval's low end
                assert got["width"] == pytest.approx(min(100.0, c["value"] + 1.96 * c["stderr"]) - low, abs=0.05)
        whiskers = driver.execute_script(_WHISKER_JS)
        assert len(whiskers) == sum(1 for m in lb["models"] for c in m["cells"].values() if c)  # every plotted score
        for w in whiskers:
            c = next(m for m in lb["models"] if m["name"] == w["model"])["cells"][w["bench"]]
            ci = (max(0.0, c["verifier"] - 1.96 * c["verifier_stderr"]), min(100.0, c["verifier"] + 1.96 * c["verifier_stderr"]))
            assert w["len"] == pytest.approx(170 * (ci[1] - ci[0]) / 100, abs=0.1)  # radius 170 px = 100
        _select(driver, "compare-run-a", "r1")
        _select(driver, "compare-run-b", "r4")
        _select(driver, "compare-benchmark", "gsm8k_mini")
        driver.find_element(By.ID, "compare-go").click()
        want = httpx.get(url + "/api/compare", params={"run_a": "r1", "run_b": "r4", "benchmark": "gsm8k_mini"}).json()
        p = want["paired"]
        assert p["n"] == 5 and p["method"] == "paired t" and p["ci_low"] < p["diff"] < p["ci_high"]
        line = f"+{p['diff']:.1f} [{p['ci_low']:.1f}, {p['ci_high']:.1f}]"
        _wait(driver, lambda d: line in d.find_element(By.CSS_SELECTOR, '[data-side="diff"]').text, "paired B − A")
        stats = driver.find_element(By.ID, "compare-stats").text
        a, b = p["score_a"], p["score_b"]  # each run's own score row and its error, beside the paired difference
        assert f"{a['value']:.1f} ± {a['stderr']:.1f}" in stats and f"{b['value']:.1f} ± {b['stderr']:.1f}" in stats
        assert f"p = {p['p_value']:.3g}" in stats and "not significant at 5%" in stats
        _screenshot(driver, tmp_path / "dashboard.png")

        # a filter changes the table and the radar
        _select(driver, "filter-modality", "image")
        _wait(driver, lambda d: _models(d) == ["gamma", "beta"], "image-only rows")
        assert _table(driver)["head"] == ["mmmu_mini"]
        _wait(
            driver,
            lambda d: sorted(p["model"] for p in d.execute_script(_RADAR_JS)) == ["beta", "gamma"],
            "radar after filter",
        )
        _select(driver, "filter-engine", "vllm")
        _wait(driver, lambda d: _models(d) == ["beta"], "image+vllm rows")
        _screenshot(driver, tmp_path / "dashboard-filtered.png")
        driver.find_element(By.ID, "filter-reset").click()
        _wait(driver, lambda d: len(_models(d)) == 3, "filters cleared")

        # deselecting a model in the radar removes its polygon
        driver.find_element(By.CSS_SELECTOR, '#radar-models input[value="alpha"]').click()
        _wait(
            driver,
            lambda d: sorted(p["model"] for p in d.execute_script(_RADAR_JS)) == ["beta", "gamma"],
            "radar without alpha",
        )

        # a run written while the page is open shows up on reload, server not restarted
        run_factory(runs_dir, "r9", "2025-08-01T00:00:00", {("delta", "mmlu_mini"): (90.0, 91.0)})
        driver.find_element(By.ID, "reload").click()
        _wait(driver, lambda d: _models(d)[:1] == ["delta"], "new run on reload")
        api = {
            k: httpx.get(url + "/api/leaderboard", params={k[0]: k[1]} if k else None).json()
            for k in [(), ("modality", "image"), ("engine", "vllm"), ("framework", "lmeval"), ("model", "alpha")]
        }

    # the static export (file://, no server) renders the same leaderboards with its own client-side filtering
    page = export_static(runs_dir, tmp_path / "site")
    driver.get(page.as_uri())
    _wait(driver, lambda d: len(_models(d)) == 4, "static export rows")
    for key, expected in api.items():
        driver.find_element(By.ID, "filter-reset").click()
        if key:
            _select(driver, f"filter-{key[0]}", key[1])
        want = [m["name"] for m in expected["models"]]
        _wait(driver, lambda d, want=want: _models(d) == want, f"static rows for {key}")
        assert _table(driver)["head"] == [b["name"] for b in expected["benchmarks"]]
        got_cov = [r["coverage"] for r in _table(driver)["rows"]]
        assert got_cov == [f"{math.floor(m['coverage'] + 0.5)}%" for m in expected["models"]]  # JS Math.round
    assert driver.execute_script(_RADAR_JS)
    assert "static export" in driver.find_element(By.ID, "status").text
    assert {w["model"] for w in driver.execute_script(_WHISKER_JS)} == {"alpha"}  # the model filter is on
    # the paired comparison was precomputed into the page: the same interval as the server gave
    driver.find_element(By.ID, "filter-reset").click()
    _select(driver, "compare-run-a", "r1")
    _select(driver, "compare-run-b", "r4")
    _select(driver, "compare-benchmark", "gsm8k_mini")
    driver.find_element(By.ID, "compare-go").click()
    _wait(driver, lambda d: line in d.find_element(By.CSS_SELECTOR, '[data-side="diff"]').text, "static paired B − A")


def test_radar_without_verifier_scores_plots_the_headline_metric(
    driver: Any, tmp_path: Path, live_server, run_factory
) -> None:
    """The radar used to default to the verifier score and collapse every polygon to the centre without one."""
    from selenium.webdriver.common.by import By

    runs = tmp_path / "runs"
    runs.mkdir()
    scores = {("alpha", "mmlu_mini"): (50.0, None), ("alpha", "gsm8k_mini"): (30.0, None)}
    scores |= {("alpha", "mmmu_mini"): (70.0, None), ("beta", "mmlu_mini"): (90.0, None)}
    run_factory(runs, "n1", "2025-01-01T00:00:00", scores)

    def plotted(d: Any) -> dict[str, int]:
        """Model -> vertices off the centre (an unplotted score sits at the centre, 280,240)."""
        return {p["model"]: sum(xy != [280, 240] for xy in p["points"]) for p in d.execute_script(_RADAR_JS)}

    with live_server(create_app(runs)) as url:
        driver.get(url + "/")
        _wait(driver, lambda d: plotted(d) == {"alpha": 3, "beta": 1}, "radar of headline metrics")
        assert driver.find_element(By.ID, "radar-metric").get_attribute("value") == "value"
        _select(driver, "radar-metric", "verifier")  # a choice the user makes sticks across refreshes
        _wait(driver, lambda d: plotted(d) == {"alpha": 0, "beta": 0}, "radar of (absent) verifier scores")
        driver.find_element(By.ID, "reload").click()
        _wait(driver, lambda d: d.find_element(By.ID, "status").text.startswith("1 run"), "reload")
        assert driver.find_element(By.ID, "radar-metric").get_attribute("value") == "verifier"

    page = export_static(runs, tmp_path / "site")  # the static export's mirror of the leaderboard picks the same
    driver.get(page.as_uri())
    _wait(driver, lambda d: plotted(d) == {"alpha": 3, "beta": 1}, "static export radar")
    assert driver.find_element(By.ID, "radar-metric").get_attribute("value") == "value"
