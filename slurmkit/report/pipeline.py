"""The weekly report from its inputs to written files, in one call: :func:`weekly_report`.

Its steps, in order:

1. the output formats are checked;
2. the energy and cost assumptions: the site profile's (``[report]``, node types' GPU TDP),
   then each option given (:class:`WeeklyOptions` ``pue`` ... ``gpu_tdp_w``);
3. the hook energy spool (:func:`slurmkit.report.energy.read_spool`);
4. the sacct rows: captured files (:func:`slurmkit.accounting.frame.load_sacct`; with no window
   given, the whole UTC days their times span), or live sacct, one call per day of the window,
   kept in the Parquet store (:func:`slurmkit.report.live.ingest_window`);
5. live only: last week's totals from the store (week-over-week deltas), the GPU capacity and
   down time (``scontrol show nodes``, ``sacctmgr show event``) and sreport's GPU-hours over the
   window's whole hours before the current one;
6. the report model (:func:`slurmkit.report.weekly.build_report`);
7. the output files (:func:`slurmkit.report.render.write_outputs`) and the mail.

``slurmkit report weekly`` maps its flags onto :class:`WeeklyOptions` and prints the result;
a Python caller does the same::

    from slurmkit.report import weekly_report
    res = weekly_report(captures=["week.psv"], window=parse_week("2026-W48"), formats=["json"])
    res.report["totals"]["gpu_hours"]

Bad input raises an :class:`~slurmkit.errors.InputError` naming the file or option (a capture
that cannot be read, a bad format, a profile error); a Slurm command that fails raises
``SlurmError`` — except capacity and sreport, which are optional: their failure is a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from slurmkit.errors import InputError, UsageError
from slurmkit.report.window import Window, last_full_week

if TYPE_CHECKING:
    from slurmkit.profile import Profile

log = logging.getLogger(__name__)


def default_store_dir() -> str:
    """The Parquet store's folder when none is given:
    ``$XDG_DATA_HOME/slurmkit/accounting`` (``~/.local/share/slurmkit/accounting``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "slurmkit", "accounting")


def default_spool_dir() -> str | None:
    """The hooks' energy spool folder (``spool_dir`` of :mod:`slurmkit.hooks.config`) when it
    exists on this host, else None."""
    from slurmkit.hooks.config import DEFAULTS

    path = DEFAULTS["spool_dir"]
    return path if os.path.isdir(path) else None


@dataclass
class WeeklyOptions:
    """What :func:`weekly_report` reads, assumes and writes (every field optional).

    Window and sources:

    - ``window``: the report window ``[start, end)`` (:class:`~slurmkit.report.window.Window`,
      UTC). None: with ``captures``, the whole UTC days their submit/start/end times span;
      live, the last full ISO week.
    - ``captures``: captured sacct output files (paths) to read instead of running sacct.
    - ``sacct_fields``: the field list of captures without a header line: a list of names, or
      a str that is a file holding the list or the list itself (comma, ``|`` or space separated).
    - ``delimiter``: the captures' delimiter (None: detected); ``tz``: zone of their times
      when they carry none (a tz name, default ``UTC``).
    - ``cluster``: the Slurm cluster (``sacct -M``, sreport ``-M``); also names the store's folder.
    - ``spool``: the hooks' energy spool (``energy.jsonl`` or a folder of ``*.jsonl``); None:
      :func:`default_spool_dir` when it exists.
    - ``prometheus_url``: a Prometheus holding the hooks' metrics (``http://host:9090``): per-job
      measured energy and GPU utilization for jobs the spool has no record of, with
      ``prometheus`` as their provenance (:mod:`slurmkit.report.prometheus`); None: not asked.
      Unreachable (or no answer within ``prometheus_timeout_s`` seconds for all its queries):
      a warning (stderr and ``data_quality.warnings``), and the report goes on without it.
    - ``store_dir``: the Parquet store folder (None: :func:`default_store_dir`);
      ``use_store``: False pulls every day from sacct and keeps nothing (live only).

    Assumptions (each overrides the profile's; its ``origin`` is the CLI option's name):

    - ``profile``: a loaded site profile (``slurmkit.profile.load_profile``): GPU TDP per
      model, PUE, carbon, prices, and the GPU capacity from its partitions.
    - ``pue`` (facility / IT power, >= 1), ``carbon_g_per_kwh`` (g CO2e per kWh),
      ``price_per_kwh`` and ``price_per_gpu_hour`` (in ``currency``), ``gpu_tdp_w`` (W, every
      GPU type, for modelled energy).
    - ``trust_slurm_energy``: use a non-zero ``ConsumedEnergyRaw`` (J); None: the default
      (True), recorded as such.
    - ``capacity_gpus``: GPUs in the cluster (None: the profile's, else ``scontrol``, live).
    - ``use_sreport``: reconcile with sreport (live only); ``rollup``: run
      ``sacctmgr -i rollup`` first (root).
    - ``now``: the time running jobs are taken to end (a datetime, pandas Timestamp or ISO
      str, UTC unless it has a zone; None: the current time).

    Outputs:

    - ``formats``: any of ``html``, ``md``, ``csv``, ``json``, ``parquet``.
    - ``outdir``: the output folder (None: ``./slurmkit-report-<window start date>``).
    - ``mail_to``: addresses the HTML report (the Markdown when no HTML is written) is sent to
      with ``sendmail -t``.
    """

    window: Window | None = None
    captures: Sequence[str | Path] = ()
    sacct_fields: Sequence[str] | str | None = None
    delimiter: str | None = None
    tz: str = "UTC"
    cluster: str | None = None
    spool: str | Path | None = None
    prometheus_url: str | None = None
    prometheus_timeout_s: float = 120.0
    store_dir: str | Path | None = None
    use_store: bool = True
    profile: "Profile | None" = None
    pue: float | None = None
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None
    gpu_tdp_w: float | None = None
    trust_slurm_energy: bool | None = None
    capacity_gpus: float | None = None
    use_sreport: bool = True
    rollup: bool = False
    now: object | None = None
    formats: Sequence[str] = ("html", "md", "csv", "json")
    outdir: str | Path | None = None
    mail_to: Sequence[str] = ()


@dataclass
class WeeklyResult:
    """What :func:`weekly_report` made.

    ``report``: the report dict (the ``weekly.json`` contract, :mod:`slurmkit.report.weekly`);
    ``allocations``: the per-allocation frame (``jobs.csv`` / ``jobs.parquet``); ``window``:
    the window reported; ``outdir``: the output folder; ``written``: the files written, in
    order; ``warnings``: what was skipped or not known (spool lines, capacity, sreport), each
    one line.
    """

    report: dict
    allocations: pd.DataFrame
    window: Window
    outdir: Path
    written: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: (WeeklyOptions field, Assumptions attribute, CLI option recorded as its origin)
_OVERRIDES = (("pue", "pue", "--pue"), ("carbon_g_per_kwh", "carbon_g_per_kwh", "--carbon-g-per-kwh"),
              ("price_per_kwh", "price_per_kwh", "--price-per-kwh"),
              ("price_per_gpu_hour", "price_per_gpu_hour", "--price-per-gpu-hour"),
              ("currency", "currency", "--currency"), ("gpu_tdp_w", "default_tdp_w", "--gpu-tdp-w"))


def weekly_report(options: WeeklyOptions | None = None, *, warn: Callable[[str], None] | None = None,
                  progress: Callable[[int, int], None] | None = None, **fields) -> WeeklyResult:
    """Make the weekly report (see the module docstring for its steps) and write its files.

    ``options``: a :class:`WeeklyOptions`; ``fields``: its fields as keywords (they replace
    those of ``options``). ``warn``: called with each warning line as it happens (default: the
    ``slurmkit.report.pipeline`` logger); ``progress``: called ``(days done, days)`` while live
    sacct is read, first with 0. Returns a :class:`WeeklyResult`. Raises
    :class:`~slurmkit.errors.InputError` for bad input and ``SlurmError`` when sacct fails.
    """
    from slurmkit.report import render
    from slurmkit.report.weekly import build_report

    opts = dataclasses.replace(options or WeeklyOptions(), **fields)
    warnings: list[str] = []

    def _warn(msg: str) -> None:
        warnings.append(msg)
        (warn or log.warning)(msg)

    fmts = _formats(opts.formats)
    now = _timestamp(opts.now)
    assumptions = _assumptions(opts)
    spool_df, spool_problems = _read_spool(opts, _warn)
    cap = opts.capacity_gpus
    if cap is None and opts.profile is not None:
        from slurmkit.report.capacity import gpus_per_node_profile

        cap = float(sum(gpus_per_node_profile(opts.profile).values())) or None
    live = {}
    if opts.captures:
        rows, dq, window = _captured(opts)
    else:
        window = opts.window or last_full_week()
        rows, dq, live = _live(opts, window, assumptions, spool_df, now, cap, _warn, progress)
        cap = live.pop("capacity_gpus")
    prom_warnings = []
    if opts.prometheus_url:  # per-job GPU figures the spool lacks, measured through Prometheus
        from slurmkit.report import prometheus

        try:
            spool_df = prometheus.fill_spool(spool_df, prometheus.read_jobs(
                opts.prometheus_url, window.start.timestamp(), window.end.timestamp(),
                attempts=prometheus.attempts_of(rows.allocs), deadline_s=opts.prometheus_timeout_s))
        except prometheus.PrometheusError as exc:  # the report goes out with spool / modelled energy
            prom_warnings.append(f"{exc}; energy and GPU utilization from the spool, Slurm or the model instead")
            _warn(prom_warnings[-1])
    report, allocs = build_report(rows, dq, window, assumptions, spool_df, capacity_gpus=cap,
                                  now=now, cluster=opts.cluster or "",
                                  source=",".join(map(str, opts.captures)) if opts.captures else "sacct",
                                  **live)
    if spool_problems:
        report["spool_problems"] = spool_problems[:200]
    report["data_quality"]["warnings"] = prom_warnings
    out = Path(opts.outdir or f"slurmkit-report-{window.start:%Y-%m-%d}")
    written = render.write_outputs(report, allocs, out, fmts)
    if opts.mail_to:
        from slurmkit.report.mail import mail_report

        for addr in opts.mail_to:
            mail_report(report, out / "weekly.html" if "html" in fmts else None, addr)
    return WeeklyResult(report, allocs, window, out, written, warnings)


def _formats(formats) -> list[str]:
    from slurmkit.report.render import FORMATS

    fmts = [f.strip().lower() for f in formats if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad:
        raise UsageError("--format", f"unknown {', '.join(bad)} (choose from {', '.join(FORMATS)})")
    return fmts


def _timestamp(now) -> pd.Timestamp | None:
    if now is None:
        return None
    t = pd.Timestamp(now)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def _assumptions(opts: WeeklyOptions):
    """The profile's assumptions, then each option given over them (origin: its CLI name)."""
    from slurmkit.report import energy as E

    if opts.profile is not None:
        a = E.assumptions_from_profile(opts.profile, getattr(opts.profile, "source", "") or "")
    else:
        a = E.Assumptions()
    for name, attr, origin in _OVERRIDES:
        val = getattr(opts, name)
        if val is not None:
            setattr(a, attr, val)
            a.origin[attr] = origin
    if opts.trust_slurm_energy is None:
        a.trust_slurm, a.origin["trust_slurm_energy"] = True, "default"
    else:
        a.trust_slurm = bool(opts.trust_slurm_energy)
        a.origin["trust_slurm_energy"] = ("--trust-slurm-energy" if opts.trust_slurm_energy
                                          else "--no-trust-slurm-energy")
    return a


def _read_spool(opts: WeeklyOptions, warn) -> tuple[pd.DataFrame | None, list[str]]:
    """The spool frame and its problems (the first 20 warned about), or ``(None, [])``."""
    from slurmkit.report.energy import read_spool

    path = opts.spool or default_spool_dir()
    if not path:
        return None, []
    df, problems = read_spool(str(path))
    for p in problems[:20]:
        warn(f"spool: {p}")
    return df, problems


def _field_list(spec) -> list[str] | None:
    from slurmkit.accounting.read import read_field_list

    if spec is None:
        return None
    if not isinstance(spec, str):
        return read_field_list(",".join(spec))
    text = Path(spec).read_text() if os.path.exists(spec) else spec
    return read_field_list(text)


def _captured(opts: WeeklyOptions):
    """``(rows, data quality, window)`` from the captured files; with no window, the whole UTC
    days their submit/start/end times span (InputError when they hold none)."""
    from slurmkit.accounting.frame import JobRows, load_sacct
    from slurmkit.accounting.quality import DataQuality

    fields = _field_list(opts.sacct_fields)
    parts, dq = [], DataQuality()
    for f in opts.captures:
        frows, fdq = load_sacct(f, None, fields, opts.delimiter, cluster=opts.cluster or "", tz=opts.tz)
        parts.append(frows)
        dq.merge(fdq)
    rows = JobRows.concat(parts)
    window = opts.window
    if window is None:
        a = rows.allocs
        t = pd.concat([a["submit"], a["start"], a["end"]]).dropna()
        if t.empty:
            raise InputError(opts.captures[0], None, "no times in the input; give --week or --start")
        window = Window(t.min().floor("D").to_pydatetime(),
                        (t.max().floor("D") + pd.Timedelta(days=1)).to_pydatetime())
    return rows, dq, window


def _live(opts: WeeklyOptions, window: Window, assumptions, spool_df, now, cap, warn, progress):
    """``(rows, data quality, build_report keywords)`` from live sacct through the store, with
    last week's totals, capacity / down time and sreport's GPU-hours (keywords ``previous``,
    ``down_gpu_hours``, ``sreport_gpu_hours``, ``recon_window``, ``capacity_gpus``)."""
    from slurmkit.accounting.store import Store
    from slurmkit.report import live
    from slurmkit.report.weekly import build_report
    from slurmkit.slurm.commands import SlurmError

    store = Store(opts.store_dir or default_store_dir(), opts.cluster or "") if opts.use_store else None
    days = window.days()
    if progress:
        progress(0, len(days))
    rows, dq, _ = live.ingest_window(days, opts.cluster, store, progress=progress)
    previous = None
    if store is not None:
        prev = window.previous()
        pdays = [d for d, _ in prev.days()]
        if store.has_days(pdays):
            prows, pdq = store.load(pdays)
            if len(prows):
                prep, _ = build_report(prows, pdq, prev, assumptions, spool_df, now=now)
                previous = prep["totals"]
    down = None
    try:
        live_cap, down = live.live_capacity(window.start, window.end)
        cap = cap or live_cap
    except SlurmError as exc:
        warn(f"capacity not known: {exc}")
    # sreport never reports the current hour: reconcile the whole hours before it
    hour_now = (now or pd.Timestamp.now(tz="UTC")).floor("h").to_pydatetime()
    recon_w = Window(*live.whole_hours(window.start, min(window.end, hour_now)))
    sreport_h = None
    if opts.use_sreport and recon_w.end > recon_w.start:
        try:
            sreport_h = live.sreport_gpu_hours(recon_w.start, recon_w.end, opts.cluster, opts.rollup)
        except SlurmError as exc:
            warn(f"sreport: {exc}")
    return rows, dq, {"previous": previous, "down_gpu_hours": down, "sreport_gpu_hours": sreport_h,
                      "recon_window": recon_w, "capacity_gpus": cap}


__all__ = ["WeeklyOptions", "WeeklyResult", "weekly_report", "default_store_dir", "default_spool_dir"]
