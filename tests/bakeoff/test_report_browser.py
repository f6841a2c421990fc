"""The HTML report in a real browser: headless Chromium at 600 px wide.

The page must hold at that width: no horizontal scrolling of the page, the chart inside the
window, the wide table scrolling in its own box. A probe copy of the report writes the
measured boxes into its title, which `--dump-dom` returns; the same run takes its screenshot
(the probe only sets the title, so it looks exactly like the report). The browser is the one
the fetch renderer's `executable = "auto"` starts: Debian's `chromium-headless-shell` where it
is installed, else `chromium`, which `make test` installs.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from siftlib.bakeoff.report import render_html
from siftlib.bakeoff.score import score_run
from siftlib.fetch.browser.renderer import BROWSERS, browser_command

from .conftest import make_run
from .test_bakeoff_score import blind_and_judge

PROBE = """<script>
const box = (selector) => document.querySelector(selector).getBoundingClientRect();
document.title = JSON.stringify({
  page: document.documentElement.scrollWidth,
  chart: box("svg").right,
  table: box(".table").right,
  ticks: document.querySelectorAll("svg text[text-anchor=middle]").length,
  chartWidth: box("svg").width,
  legend: document.querySelector("svg tspan").getBoundingClientRect().height,
  label: document.querySelector("svg text[text-anchor=end]").getBoundingClientRect().height,
});
</script>
"""


def chromium(*args: str) -> str:
    """Run headless Chromium once; return what it printed."""
    binary = shutil.which(browser_command("auto"))
    if binary is None:
        pytest.fail(
            f"no browser: `make test` installs one (Debian package {' or '.join(BROWSERS)})"
        )
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def report(tmp_path: Path) -> Path:
    run_dir = make_run(
        tmp_path / "run",
        queries=4,
        targets=["site2.example", "open", "site1.example", "https://site1.example/q3/r2"],
        skipped={("tavily-direct", 3)},
    )
    blind_and_judge(
        run_dir,
        {
            "searxng": [1, 0, 1, 0],
            "searxng+brave": [1, 1, 1, 0],
            "searxng+brave+tavily": [0, 1, 1, 1],
            "tavily-direct": [0, 0, 1, 1],
        },
    )
    path = run_dir / "report.html"
    path.write_text(render_html(score_run(run_dir)), encoding="utf-8")
    return path


def measure(report: Path, tmp_path: Path, width: int) -> dict[str, float]:
    """Return the probe's boxes of the report in a window `width` px wide; its screenshot is
    kept with the test's files (`report-WIDTH.png`) for a person to look at."""
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    shot = tmp_path / f"report-{width}.png"
    dom = chromium(
        f"--window-size={width},1300", "--dump-dom", f"--screenshot={shot}", probe.as_uri()
    )
    found = re.search(r"<title>(.*?)</title>", dom)
    assert found, dom[:500]
    measured: dict[str, float] = json.loads(found.group(1).replace("&quot;", '"'))
    return measured


def test_the_report_holds_at_600_px(report: Path, tmp_path: Path) -> None:
    measured = measure(report, tmp_path, 600)
    assert measured["page"] <= 600  # nothing makes the page scroll sideways
    assert measured["chart"] <= 600 and measured["table"] <= 600
    assert measured["ticks"] >= 5 + 2  # both axes are drawn with their scale

    shot = tmp_path / "report-600.png"
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == (600, 1300)


def test_at_1200_px_the_chart_spans_the_column_and_its_legend_reads(
    report: Path, tmp_path: Path
) -> None:
    measured = measure(report, tmp_path, 1200)
    # It filled a third of the page (540 px) in 11 px type: now most of the text column.
    assert measured["chartWidth"] >= 780 and measured["page"] <= 1200
    assert measured["legend"] >= 16 and measured["legend"] >= measured["label"] * 0.95

    shot = tmp_path / "report-1200.png"
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])
    assert (width, height) == (1200, 1300)
