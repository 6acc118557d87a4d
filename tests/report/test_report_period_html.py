"""The period report's HTML: week-over-week and month-over-month plots by
account, partition and cluster, checked on the figures they draw (matplotlib's own artists,
pure and fast) and in headless Chromium (tests/report/chromium_shot.py).

Data:
- weeks generated as tests/report/test_report_period.py does (bench/report_period.py's
  :func:`write_store`: the weekly benchmark's sacct rows through the live reader into the
  store), with the days of one ISO week and two days of the next removed from the store;
- Habrok's real capture (../shared/corpus/sacct/habrok_gpu_cluster_parsable2.psv, June 2023 to
  April 2024) stored one file per day as the daily pulls would (only days some job touches:
  four months have none and are not in the store), split into two clusters by Submit; and two
  labelled edits of it: printed without any GPU field (GPU-hours unknown), and its gpumedium
  rows without one (that partition's GPU-hours unknown, the others known).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.report import period_plots as pp
from slurmkit.report.period import parse_period, period_report, write_period

from chromium_shot import screenshot
from test_report_period import _bench, _store_rows

WEEKS = 5
#: Removed from the generated store: all of 2026-W41, and two days of W42.
GONE = [f"2026-10-{d:02d}" for d in range(5, 12)] + ["2026-10-14", "2026-10-15"]
NOW = pd.Timestamp("2024-04-19T12:00:00Z")   # after Habrok's capture's latest time


@pytest.fixture(scope="module")
def weeks(tmp_path_factory):
    """The generated store (days of GONE removed), its period report and HTML (the CLI)."""
    tmp = tmp_path_factory.mktemp("period_html")
    root = tmp / "store"
    _bench().write_store(str(root), WEEKS, 300)
    for day in GONE:
        shutil.rmtree(root / "cluster=bench" / f"day={day}")
    out = tmp / "out"
    res = CliRunner().invoke(cli, ["report", "period", "--start", "2026-09-28", "--end", "2026-11-02", "--store",
                                   str(root), "--cluster", "bench", "-o", str(out), "--now", "2026-11-02T00:00:00Z",
                                   "--format", "json,html"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "period.json").read_text()), out / "period.html"


def _habrok(corpus, tmp_path, edit=None, split=False):
    """Habrok's capture in a store (``edit``: a function over its allocation frame, labelled
    in the callers), the period June 2023 - April 2024 by month."""
    from slurmkit.accounting.frame import JobRows, load_sacct

    rows, _ = load_sacct(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv")
    a = rows.allocs.copy() if edit is None else edit(rows.allocs.copy())
    if split:
        early = a["submit"] < pd.Timestamp("2024-01-01T00:00:00Z")
        for name, sel in (("a", early), ("b", ~early)):
            _store_rows(tmp_path / "store", name, JobRows(a[sel].reset_index(drop=True), rows.steps),
                        int(NOW.timestamp()))
    else:
        _store_rows(tmp_path / "store", "habrok", JobRows(a, rows.steps), int(NOW.timestamp()))
    per = parse_period(start="2023-06-01", end="2024-05-01")
    rep = period_report(tmp_path / "store", per, None, now=NOW)
    write_period(rep, tmp_path / "out", ["json", "html"])
    return rep, tmp_path / "out" / "period.html"


def _row(section, key, name):
    col = key[3:]
    got = [r for r in section[key] if pp.display(r[col]) == name]
    return got[0] if got else None


def _check_series(rep, key, metric):
    """The panel's series against the JSON: each named series is its row's figure in each
    part (0 where it has no row), ``other`` the rest of the part's total; nothing in a part
    not in the store. Returns the panel."""
    panel = pp.part_series(rep, key, metric, 6)
    # names with none of the plotted figure over the period (0 GPU-hours) are not drawn
    ranked = [pp.display(r[key[3:]]) for r in rep[key] if r[metric] is not None and r[metric] > 0]
    named = [s["name"] for s in panel["series"] if s["name"] != pp.OTHER]
    # the top names by the period's figure
    top = sorted(ranked, key=lambda n: -_row(rep, key, n)[metric])[:6]
    assert sorted(named[:len(top)]) == sorted(top)
    assert not any(_row(rep, key, n)[metric] == 0 for n in named)
    for i, (part, cov) in enumerate(zip(rep["breakdown"], panel["coverage"])):
        vals = [s["values"][i] for s in panel["series"]]
        if cov["state"] == "missing":
            # none of its days stored: its JSON figures are only the jobs that other days'
            # pulls hold (0 or a fragment), not drawn
            assert all(v is None for v in vals)
            continue
        for s in panel["series"]:
            if s["name"] == pp.OTHER:
                continue
            r = _row(part, key, s["name"])
            assert s["values"][i] == (0.0 if r is None else r[metric])
        if part["totals"][metric] is not None and not panel["unknown"][i]:
            assert sum(vals) == pytest.approx(part["totals"][metric], rel=1e-9, abs=1e-9)
    return panel


def _artists(panels, by):
    """Draw ``panels``; per axes: the bars (gid ``<series>|<part>`` -> (x, bottom, height)),
    the not-in-the-store bands, the y limits, and whether the legend overlaps a bar."""
    plt, fig, axes = pp.series_fig(panels, "t", by)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in axes:
        bars, bands = {}, []
        for p in ax.patches:
            gid = p.get_gid() or ""
            if gid.startswith("missing|"):
                bands.append(int(gid.split("|")[1]))
            elif "|" in gid:
                bars[gid] = (p.get_x() + p.get_width() / 2, p.get_y(), p.get_height(), p.get_window_extent(renderer))
        legend = ax.get_legend().get_window_extent(renderer)
        covers = [g for g, b in bars.items() if b[2] > 0 and legend.overlaps(b[3])]
        marks = [t.get_gid() for t in ax.texts if t.get_gid()]
        out.append({"bars": bars, "bands": bands, "ylim": ax.get_ylim(), "covers": covers, "marks": marks})
    plt.close(fig)
    return out


def _check_drawn(panel, drawn):
    """Each known value is a bar of its height, stacked on the values below it; an unknown or
    missing value is no bar."""
    bottom = [0.0] * len(panel["parts"])
    n = 0
    for s in panel["series"]:
        for x, v in enumerate(s["values"]):
            gid = f"{s['name']}|{x}"
            if v is None:
                assert gid not in drawn["bars"]
                continue
            bx, by, h, _ = drawn["bars"][gid]
            assert (bx, by, h) == (pytest.approx(x), pytest.approx(bottom[x]), pytest.approx(v))
            bottom[x] += v
            n += 1
    assert len(drawn["bars"]) == n
    assert drawn["ylim"][0] == 0.0 and drawn["ylim"][1] >= max(bottom + [1.0])
    assert drawn["covers"] == []


def _page(html: Path) -> str:
    page = html.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page, re.I)
    assert "<script" not in page.lower()
    return page


def _text(page: str) -> str:
    """The page's text: tags out, entities decoded, white space collapsed."""
    import html

    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _images(page: str) -> list[tuple[int, int]]:
    from PIL import Image

    sizes = []
    for src in re.findall(r'<img[^>]*src="([^"]+)"', page):
        assert src.startswith("data:image/png;base64,")
        im = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        im.load()
        sizes.append(im.size)
    return sizes


def test_week_over_week_plots_draw_the_json_figures_and_mark_the_days_not_stored(weeks):
    rep, _html = weeks
    labels = [p["label"] for p in rep["breakdown"]]
    assert labels == ["2026-W40", "2026-W41", "2026-W42", "2026-W43", "2026-W44"]
    assert rep["store"]["days_missing"] == GONE
    cov = pp.coverage(rep)
    assert [(c["state"], c["stored"], c["days"]) for c in cov] == [
        ("complete", 7, 7), ("missing", 0, 7), ("partial", 5, 7), ("complete", 7, 7), ("complete", 7, 7)]
    for key in ("by_account", "by_partition"):
        panels = pp.panels(rep, key)
        assert [p["metric"] for p in panels] == ["gpu_hours", "cpu_hours"]     # CPU-hours beside GPU-hours
        for panel, metric in zip(panels, ("gpu_hours", "cpu_hours")):
            assert panel == _check_series(rep, key, metric)
        for panel, drawn in zip(panels, _artists(panels, "week")):
            _check_drawn(panel, drawn)
            assert drawn["bands"] == [1]               # W41: hatched "not in the store", no bar
            assert drawn["marks"] == ["partial|2"]     # W42: drawn, marked partial
    acc = pp.part_series(rep, "by_account", "gpu_hours")
    assert len(rep["by_account"]) > 6 and acc["series"][-1]["name"] == pp.OTHER
    # the generated partitions: four, no "other"
    assert [s["name"] for s in pp.part_series(rep, "by_partition", "gpu_hours")["series"]] == \
        [pp.display(r["partition"]) for r in rep["by_partition"]]


def test_week_over_week_page_renders_and_says_not_in_the_store(weeks, tmp_path):
    rep, html = weeks
    page = _page(html)
    assert [s[0] for s in _images(page)] == [750, 750, 750]      # account, partition, queue wait
    text = _text(page)
    assert "9 of the period's 35 days are not in the store: the figures miss them." in text
    assert "2026-W41† 2026-10-05 2026-10-12 0 of 7 not in the store" in text
    assert "2026-W42† 2026-10-12 2026-10-19 5 of 7" in text
    t = rep["breakdown"][0]["totals"]
    assert f"2026-W40 2026-09-28 2026-10-05 7 of 7 {t['jobs']} {t['gpu_jobs']}" in text
    # the tables beside the plots: W41 "not stored" in every row, never 0
    table = page.split("GPU-hours per week by account (top 6 + other)</h3>")[1].split("</table>")[0]
    assert table.count("not stored") == 7 and table.count("<tr>") == 8
    assert "<h2 id=\"by-account-over-time\">Week over week by account</h2>" in page
    assert "Per cluster" not in page
    screenshot(html, tmp_path / "shot.png", tmp_path / "profile", size=(1000, 2400))


def test_month_over_month_on_habrok_with_two_clusters(corpus, tmp_path):
    rep, html = _habrok(corpus, tmp_path, split=True)
    assert rep["period"]["by"] == "month" and rep["clusters"] == ["a", "b"]
    # months no job touched: not in the store, not drawn; their JSON figures are the empty 0
    cov = pp.coverage(rep)
    assert [c["label"] for c in cov if c["state"] == "missing"] == ["2023-07", "2023-08", "2023-10", "2023-12"]
    for key in ("by_account", "by_partition"):
        panels = pp.panels(rep, key)
        for panel, metric in zip(panels, ("gpu_hours", "cpu_hours")):
            assert panel == _check_series(rep, key, metric)
        for panel, drawn in zip(panels, _artists(panels, "month")):
            _check_drawn(panel, drawn)
            assert drawn["bands"] == [1, 2, 4, 6]
    # the partitions' GPU-hours: gpulong and gpumedium in April 2024 (the capture's GPU jobs)
    gpu = pp.part_series(rep, "by_partition", "gpu_hours")
    assert {s["name"]: s["values"][-1] for s in gpu["series"]}["gpulong"] == pytest.approx(197.855277778)
    # per cluster: each cluster's part totals, None where that cluster's store has none of it
    for metric in ("gpu_hours", "cpu_hours"):
        cs = pp.cluster_series(rep, metric)
        for s, c in zip(cs["series"], rep["by_cluster"]):
            assert s["name"] == c["cluster"]
            for v, gone, part in zip(s["values"], s["missing"], c["breakdown"]):
                assert v == (None if gone else part["totals"][metric])
        assert cs["series"][0]["missing"][-4:] == [True] * 4          # a: jobs submitted before 2024
        assert cs["series"][1]["missing"][:7] == [True] * 7           # b: from 2024
        panels = pp.panels(rep, "by_cluster")
        for panel, drawn in zip(panels, _artists(panels, "month")):
            _check_drawn(panel, drawn)
    page = _page(html)
    assert len(_images(page)) == 4                  # account, partition, queue wait, cluster
    text = _text(page)
    assert "GPU cluster report: 2023-06-01 to 2024-05-01 (by month) — a, b" in text
    # 2024-04-20 .. 04-30 are after NOW: not yet, not missing
    assert "(a: 306, b: 254 days missing)" in text
    assert f"11 day(s) after {rep['as_of']} are not yet (future): not missing, not counted." in text
    assert "2023-07† 2023-07-01 2023-08-01 0 of 31 not in the store" in text
    assert re.search(r"<h2 id=\"per-cluster\">Per cluster</h2>", page)
    ta, tb = (c["totals"] for c in rep["by_cluster"])
    assert (ta["jobs"], ta["gpu_hours"], tb["jobs"], tb["gpu_jobs"]) == (26, 0.0, 64, 9)
    assert "Per cluster cluster days stored jobs GPU jobs GPU-hours CPU-hours wasted GPU-h wait p50 " \
           "a 18 of 335 26 0 0 56,326 0 15:58:22 b 70 of 335 64 9 218 64,655 0.00111 00:01:56" in text
    # the per-cluster table: a part a cluster's store lacks reads "not stored", never 0
    assert "GPU-hours per month by cluster cluster 2023-06† 2023-07† 2023-08† 2023-09† 2023-10† 2023-11† " \
           "2023-12† 2024-01† 2024-02† 2024-03† 2024-04† period a 0 not stored not stored 0 not stored 0 " \
           "not stored not stored not stored not stored not stored 0 b not stored" in text
    # the period's job sizes: the JSON's cells, jobs / GPU-hours
    js = rep["job_sizes"]
    assert sum(map(sum, js["jobs"])) == ta["jobs"] + tb["jobs"]
    assert re.search(r'<h2 id="job-sizes">Job sizes \(GPUs x duration\), the period</h2>', page)
    assert f"GPUs by duration <1h 1-4h 4-12h 12-24h >24h 0 {js['jobs'][0][0]} / 0 " in text
    screenshot(html, tmp_path / "shot.png", tmp_path / "profile", size=(1000, 3000))


def test_unknown_gpu_hours_are_not_drawn_as_zero(corpus, tmp_path):
    """Habrok edited (labelled) as printed without AllocTRES, AllocGRES and ReqTRES: GPU-hours
    unknown in every part; the plots draw CPU-hours only, the page says unknown, not 0."""
    def no_gpus(a):
        a["gpus"] = float("nan")
        a["req_gpus"] = float("nan")
        return a

    rep, html = _habrok(corpus, tmp_path, no_gpus)
    assert rep["totals"]["gpu_hours"] is None and "gpu_hours" in rep["unknown"]
    for key in ("by_account", "by_partition"):
        panels = pp.panels(rep, key)
        assert [p["metric"] for p in panels] == ["cpu_hours"]
        _check_series(rep, key, "cpu_hours")
        for panel, drawn in zip(panels, _artists(panels, "month")):
            _check_drawn(panel, drawn)
    page = _page(html)
    text = _text(page)
    assert "Unknown: GPU-hours (and GPU jobs, waste, GPUs in use, cost per GPU-hour) — no GPU count" in text
    assert "GPU-hours unknown over the whole period: not drawn, not 0." in text
    assert "GPU-hours per month by" not in text                # no table of unknowns
    t = rep["totals"]
    assert f"period 2023-06-01 2024-05-01 88 of 335 {t['jobs']} unknown unknown" in text
    assert "2023-09† 2023-09-01 2023-10-01 3 of 30 2 unknown unknown 208 unknown unknown" in text


def test_one_partitions_unknown_gpu_hours_are_marked_not_drawn(corpus, tmp_path):
    """Habrok edited (labelled): its gpumedium rows as if printed without a GPU field. That
    partition's GPU-hours are unknown in the months it ran; the others are drawn."""
    def gpumedium_unknown(a):
        sel = a["partition"] == "gpumedium"
        a.loc[sel, "gpus"] = float("nan")
        a.loc[sel, "req_gpus"] = float("nan")
        return a

    rep, html = _habrok(corpus, tmp_path, gpumedium_unknown)
    assert _row(rep, "by_partition", "gpumedium")["gpu_hours"] is None
    april = len(rep["breakdown"]) - 1
    assert _row(rep["breakdown"][april], "by_partition", "gpumedium")["gpu_hours"] is None
    # only gpulong has GPU-hours, gpumedium's are unknown (sorted last): both named, the
    # partitions with 0 GPU-hours not drawn
    for n in (6, 12):
        panel = pp.part_series(rep, "by_partition", "gpu_hours", n)
        vals = {s["name"]: s["values"] for s in panel["series"]}
        assert list(vals) == ["gpulong", "gpumedium"]
        unknown = vals["gpumedium"]
        assert unknown[april] is None and vals["gpulong"][april] == pytest.approx(197.855277778)
        ran = [i for i, p in enumerate(rep["breakdown"]) if _row(p, "by_partition", "gpumedium")]
        assert april in ran and panel["unknown"] == [i in ran for i in range(len(panel["parts"]))]
        drawn = _artists([panel], "month")[0]
        _check_drawn(panel, drawn)
        assert [m for m in drawn["marks"] if m.startswith("unknown")] == [f"unknown|{i}" for i in ran]
    _check_series(rep, "by_partition", "gpu_hours")
    page = _page(html)
    table = page.split("GPU-hours per month by partition (top 6)</h3>")[1].split("</table>")[0]
    gpumedium = _text(table.split('<td class="l">gpumedium</td>')[1].split("</tr>")[0]).split()
    assert gpumedium[-2:] == ["unknown", "unknown"]        # April and the period, not 0
    assert '<td class="l">other</td>' not in table and "parallellong" not in table   # 0 GPU-hours: not listed
    assert "unknown" not in _text(table.split('<td class="l">gpulong</td>')[1].split("</tr>")[0])
