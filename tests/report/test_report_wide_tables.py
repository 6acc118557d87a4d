"""A period's per-part tables (a column per ISO week: 14 for a quarter) fit the page in a
browser: measured in headless Chromium (tests/report/chromium_shot.py), in a window as wide as
a mail client's reading pane. Input: the corpus's Habrok capture
(sacct/habrok_gpu_cluster_parsable2.psv), Q1 2024 stored with ``report store``."""

from __future__ import annotations

import html
import json
import re
import subprocess

from chromium_shot import CHROMIUM_FLAGS, chromium
from click.testing import CliRunner

from slurmkit.cli import cli

#: Appended to a copy of the page: the page's scroll width and, per table, its right edge, its
#: parent's (a scroll box where it has one) and the body's, written into the DOM (--dump-dom).
MEASURE = """<script>
window.addEventListener('load', function () {
  var body = document.body.getBoundingClientRect(), out = [];
  document.querySelectorAll('table').forEach(function (t) {
    var box = t.parentElement;
    out.push({right: t.getBoundingClientRect().right, box: box.getBoundingClientRect().right,
              scroll: getComputedStyle(box).overflowX, head: t.rows[0].cells[0].textContent});
  });
  var pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify({page: document.documentElement.scrollWidth, body: body.right, tables: out});
  document.body.appendChild(pre);
});
</script>"""


def _measure(page, tmp_path, width: int) -> dict:
    probe = tmp_path / f"measure-{width}.html"
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           f"--window-size={width},1200", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    got = re.search(r'<pre id="measured">(.*?)</pre>', proc.stdout, re.S)
    assert got, proc.stderr[-2000:]
    return json.loads(html.unescape(got.group(1)))


def test_a_quarter_by_week_fits_a_reading_pane(corpus, tmp_path):
    """``report period --quarter 2024-Q1 --by week``: the totals per week and the CPU-hours per
    week by account and by partition (14 columns; they ran 80 to 130 px past an 800 px window's
    page, the page scrolling sideways) fit the body at 800 and at 1000 px, or, as the totals with
    energy, utilization, CO2e and cost do, scroll in their own box: never the page."""
    store = tmp_path / "store"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(corpus / "sacct/habrok_gpu_cluster_parsable2.psv"),
                                   "--store", str(store), "--start", "2024-01-01", "--end", "2024-04-01", "--tz", "UTC"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["report", "period", "--quarter", "2024-Q1", "--by", "week", "--store", str(store),
                                   "--now", "2024-06-01", "--format", "html", "-o", str(out)])
    assert res.exit_code == 0, res.output
    for width in (800, 1000):
        m = _measure(out / "period.html", tmp_path, width)
        assert m["page"] <= width, (width, m["page"])
        assert [t["head"] for t in m["tables"] if t["scroll"] == "auto"] == ["part", "account", "partition"]
        for t in m["tables"]:
            # (a table in a scrolling box may run past it: the box, never the page, scrolls)
            edge = t["box"] if t["scroll"] == "auto" else t["right"]
            assert edge <= m["body"] + 0.5, (width, t)
