"""The week-only figures in SQL (:mod:`slurmkit.report.week_sql`) against the figures the weekly
report's pandas engine gave on every corpus capture the goldens use (the ``report weekly``
goldens, tests/fixtures/report_goldens/SOURCE.md, made by it): each golden is made again through
the CLI, the allocation frame its report was built from is registered in DuckDB under the period
rows' column names (:func:`week_sql.frame_rows`), and each SQL function's answer over it must
equal the golden's section (the goldens' comparison: floats within a relative 1e-9, everything
else exactly). Also by hand on a few rows whose figures are worked out below."""

from __future__ import annotations


import duckdb
import numpy as np
import pandas as pd
import pytest
from goldens_script import goldens_script

from slurmkit.report import week_sql as S
from slurmkit.report import weekly as W



G = goldens_script()

WEEKLY = {name: (capture, extra) for name, capture, extra in G.WEEKLY}


@pytest.fixture(scope="module")
def made(corpus, tmp_path_factory):
    """Each weekly golden's report and what its week-only sections were computed from: ``{name:
    (report, {section: inputs})}``, recorded while the CLI makes it."""
    ctx = G.Context(corpus, tmp_path_factory.mktemp("week-sql"))
    out = {}
    for name, (capture, extra) in WEEKLY.items():
        seen = {}
        real = W.build_report

        def spy(*args, _seen=seen, **kw):
            report, a = real(*args, **{**kw, "rows_frame": True})   # (the frame, whatever the formats)
            _seen.update(frame=a, now=kw.get("now"), report=report, rows=args[0], window=args[2],
                         horizon=kw.get("horizon"))
            return report, a

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(W, "build_report", spy)
            G.weekly(ctx, name, capture, extra)
        out[name] = seen
    return out


def _runs(a: pd.DataFrame) -> pd.DataFrame:
    """The allocations that ran (as :func:`slurmkit.report.weekly.build_report` selects them)."""
    waiting = (a["pending_tasks"] > 0) | ((a["state"] == "PENDING") & a["start"].isna())
    return a[~waiting & a["started"]]


def _same(name: str, section: str, got, want) -> None:
    diff = G.first_difference(want, got)
    assert diff is None, f"{name}: {section}: {diff}"


@pytest.mark.parametrize("name", list(WEEKLY))
def test_week_sections_from_sql(name, made):
    seen = made[name]
    rep, runs = G.read_golden(name), _runs(seen["frame"])
    con = duckdb.connect()
    rows = S.frame_rows(con, runs, "runs", now=seen["now"])
    _same(name, "energy_by_policy", S.energy_by_policy(con, rows), rep["energy_by_policy"])
    unknown = S.unknown_figures(con, rows, rep["utilization"]["capacity_gpus"])
    _same(name, "unknown", {k: W.UNKNOWN_WHY[why] for k, why in unknown.items()}, rep["unknown"])
    window = seen["window"]
    horizon = W.utc(seen["horizon"]) if seen["horizon"] is not None else pd.Timestamp(seen["report"]["as_of"])
    upto = min(W.utc(window.end), max(horizon, W.utc(window.start)))
    known = "gpu_hours" not in rep["unknown"]
    _same(name, "hourly", S.gpus_in_use(con, rows, window, upto, known=known), rep["hourly"])


def _rows(con, frame: pd.DataFrame) -> str:
    return S.frame_rows(con, frame, "rows", now=pd.Timestamp("2026-01-02", tz="UTC"))


T0 = pd.Timestamp("2026-01-01", tz="UTC")


def _frame(rows: list[tuple]) -> pd.DataFrame:
    """Allocation rows ``(job_code, start h, stop h, gpus, gpu_type, policy, source, kWh)`` after
    :data:`T0` (hours; None: unset)."""
    def at(h):
        return T0 + pd.Timedelta(hours=h) if h is not None else pd.NaT

    return pd.DataFrame({
        "job_code": [r[0] for r in rows],
        "start": pd.to_datetime([at(r[1]) for r in rows], utc=True),
        "stop": pd.to_datetime([at(r[2]) for r in rows], utc=True),
        "gpus": [np.nan if r[3] is None else float(r[3]) for r in rows],
        "gpu_type": [r[4] for r in rows],
        "gpu_hours": [np.nan if r[3] is None or r[1] is None else r[3] * (r[2] - r[1]) for r in rows],
        "clock_policy": [r[5] for r in rows], "energy_source": [r[6] for r in rows],
        "energy_kwh": [np.nan if r[7] is None else r[7] for r in rows]})


def test_sweep_and_curve_by_hand():
    """Two jobs of 2 and 3 GPUs overlapping for an hour, a third starting as the first ends (the
    end counts first at one instant), a job without a GPU count: at most 5 GPUs at once; the
    hourly means are the GPU-seconds per hour."""
    f = _frame([(1, 0.0, 2.0, 2, "a100", "none recorded", "measured", 1.0),
                (2, 1.0, 3.5, 3, "", "none recorded", "modelled", 2.0),
                (3, 2.0, 3.0, 2, None, "max", "measured", 0.5),
                (4, 0.0, 4.0, None, None, "none recorded", "none", None)])
    con = duckdb.connect()
    rows = _rows(con, f)
    assert S.most_at_once(con, rows, T0, T0 + pd.Timedelta(hours=4)) == 5.0
    assert S.most_at_once(con, rows, T0 + pd.Timedelta(hours=3), T0 + pd.Timedelta(hours=4)) == 3.0
    curve = S.hourly_gpus(con, rows, T0, T0 + pd.Timedelta(hours=3, minutes=30))
    assert list(curve.round(9)) == [2.0, 5.0, 5.0, 3.0]
    pol = S.energy_by_policy(con, rows)
    assert pol == [{"policy": "none recorded", "jobs": 2, "gpu_hours": 11.5, "measured_gpu_hours": 4.0,
                    "energy_kwh": 1.0, "kwh_per_gpu_hour": 0.25},
                   {"policy": "max", "jobs": 1, "gpu_hours": 2.0, "measured_gpu_hours": 2.0, "energy_kwh": 0.5,
                    "kwh_per_gpu_hour": 0.25}]


@pytest.mark.parametrize("name", list(WEEKLY))
def test_reconciliation_from_sql(name, made):
    """Over the report's own window the jobs' GPU-hours are the golden's (the pandas engine's)
    GPU-hours: sreport at that figure reconciles, 10 % under it is flagged with the jobs to
    check, 0 with GPU time is flagged as not rolled up; an empty span is not reconciled. (Against
    the pandas reconciliation on the same rows, three spans and three sreport figures each, at
    the commit that brought the SQL in.)"""
    from slurmkit.accounting.quality import DataQuality
    from slurmkit.report.usage import allocations

    seen, golden = made[name], G.read_golden(name)
    rows, now, window = seen["rows"], seen["now"], seen["window"]
    con = duckdb.connect()
    view = S.frame_rows(con, _runs(seen["frame"]), "runs", now=now)
    ra = allocations(rows, window.start, window.end, DataQuality(rows_read=len(rows)), now=now)
    span_rows = S.frame_rows(con, ra, "span_rows", now=now)
    total = golden["totals"]["gpu_hours"] or 0.0
    rc = S.reconcile(con, span_rows, view, window, total)
    # (within a second of GPU time: the reconciliation's rows run a capture's running job up to
    # ``now``, not to where sacct printed its Elapsed, as the report's own rows do)
    assert rc["jobs_gpu_hours"] == pytest.approx(total, rel=1e-5, abs=1e-9), name
    if total <= 0:
        assert rc["status"] == "not_reconciled" and rc["note"], name
        return
    assert rc["status"] == "reconciled" and rc["jobs_to_check"] == [], name
    rc = S.reconcile(con, span_rows, view, window, 0.9 * total)
    assert rc["status"] == "flagged" and rc["relative"] == pytest.approx(1 / 9, rel=1e-4), name
    assert 0 < len(rc["jobs_to_check"]) <= 20 and all(" GPU-h" in j for j in rc["jobs_to_check"]), name
    rc = S.reconcile(con, span_rows, view, window, 0.0)
    assert rc["flagged"] and rc["relative"] is None and "rolled these hours up" in rc["note"], name
    from slurmkit.report.window import Window

    rc = S.reconcile(con, None, view, Window(window.start, window.start), 0.0)
    assert rc["note"] == "sreport covers no whole hour of the window yet", name


@pytest.mark.parametrize("name", list(WEEKLY))
def test_breakdown_facts_and_usage_from_sql(name, made):
    """The job facts and the account tree's usage per (account, user) from SQL, against the
    same figures worked out here with pandas from the report's frame (equal to the pandas
    engine's on every capture at the commit that brought the SQL in)."""
    a, window = made[name]["frame"], made[name]["window"]
    con = duckdb.connect()
    view = S.frame_rows(con, a, "rows", now=window.end)
    facts = S.job_facts(con, view)
    assert facts["clusters"] == {str(c) for c in a["cluster"].dropna().unique() if str(c)}, name
    assert facts["last_start"] == (a["start"].max() if a["start"].notna().any() else None), name
    s, e = window.start.timestamp(), window.end.timestamp()
    use = S.usage_hours(con, view, s, e)
    st = S.epoch_s(a["start"])
    sp = S.epoch_s(S._stop(a, W.utc(window.end)))
    secs = np.where(a["started"], np.maximum(np.clip(np.nan_to_num(sp, nan=s), s, e)
                                             - np.clip(np.nan_to_num(st, nan=e), s, e), 0.0), 0.0)
    want = pd.DataFrame({"account": a["account"].astype(str), "user": a["user"].astype(str),
                         "gh": secs * a["gpus"].to_numpy(float) / 3600.0}).groupby(["account", "user"])["gh"].sum()
    assert list(zip(use["account"], use["user"])) == list(want.index), name
    assert use["gpu_hours"].fillna(0).to_numpy() == pytest.approx(want.to_numpy(), rel=1e-12), name


def test_breakdown_job_seconds_by_hand():
    """Two jobs over two hours' bins: job 1 (2 GPUs, 4 CPUs, asked for 2) eligible at 00:00,
    runs 00:30-02:00; job 2 (1 GPU) in reservation r1, runs 00:00-01:00; job 3 never ran (a
    pending array record of 3 tasks, 1 CPU, eligible from 01:30). Allocated outside r1: job 1's;
    planned: job 1's 2 CPUs for 30 min, job 3's 3 CPUs up to ``now`` (02:00)."""
    h = 3600.0
    t0 = T0.timestamp()
    rel = pd.DataFrame({"start": [t0 + h / 2, t0, np.nan], "stop": [t0 + 2 * h, t0 + h, np.nan],
                        "ran": [True, True, False], "gpus": [2.0, 1.0, 0.0], "ncpus": [4.0, 1.0, 1.0],
                        "req_cpus": [2.0, np.nan, np.nan], "pending_tasks": [0.0, 0.0, 3.0],
                        "eligible": [t0, t0, t0 + 1.5 * h], "reservation": ["", "r1", ""]})
    con = duckdb.connect()
    con.register("rows", rel)
    bounds = np.array([t0, t0 + h, t0 + 2 * h])
    gpu, planned, known = S.job_seconds(con, "rows", "gres/gpu", {"r1"}, t0, t0 + 2 * h, bounds, t0 + 2 * h)
    assert list(gpu) == [2 * h / 2, 2 * h] and list(planned) == [0.0, 0.0] and known
    cpu, planned, known = S.job_seconds(con, "rows", "cpu", {"r1"}, t0, t0 + 2 * h, bounds, t0 + 2 * h)
    assert list(cpu) == [4 * h / 2, 4 * h] and list(planned) == [2 * h / 2, 3 * h / 2]
    assert list(S.reservation_job_seconds(con, "rows", "r1", "gres/gpu", t0, t0 + 2 * h, bounds)) == [h, 0.0]
    assert list(S.time_bins(con, "SELECT 1.0 AS lo, NULL::DOUBLE AS hi, 1.0 AS w", np.array([0.0, 2.0, 4.0]))) == [1.0, 2.0]
