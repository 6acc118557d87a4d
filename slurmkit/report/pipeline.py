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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from slurmkit.errors import InputError, SlurmkitError, UsageError
from slurmkit.report.window import Window, iso_z, last_full_week

if TYPE_CHECKING:
    from slurmkit.accounting.quality import DataQuality
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
    - ``events``: a captured ``sacctmgr -P show event`` output file (node downtime and drains
      with their reasons; live, sacctmgr is asked); its times are in ``tz`` when they carry no
      zone. GPUs per node come from ``profile``.
    - ``reservations``, ``nodes``, ``assoc_tree``, ``sreport_utilization``, ``sreport_accounts``:
      captured ``sacctmgr -P show reservation format=...`` (or ``scontrol show reservation``),
      ``scontrol show -o nodes``, ``sacctmgr -P show assoc tree format=...``, ``sreport -P
      cluster utilization -T cpu,gres/gpu`` and ``sreport -P cluster AccountUtilizationByUser -T
      cpu,gres/gpu`` (unit from sreport's banner, else Minutes): sreport's breakdown and the
      account tree of a captured report (docs/report.md, *Denominators*).
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
    - ``use_sreport``: reconcile with sreport (live only): the GPU-hours, sreport's breakdown
      (Allocated / Down / Planned Down / Idle / Planned / Reported, ``utilization.breakdown``) and
      the account tree (``accounts``); ``rollup``: run ``sacctmgr -i rollup`` first (root);
      ``sreport_wrapper``: a command prefix for sreport (tests: ``faketime``, as sreport never
      reports the current hour).
    - ``now``: the time running jobs are taken to end (a datetime, pandas Timestamp or ISO
      str, UTC unless it has a zone; None: ``as_of`` for captures, the current time live).
    - ``as_of``: when the captures were taken (same forms as ``now``): a job RUNNING in a
      capture counts up to then, provisionally; None: the latest Submit/Eligible/Start/End
      that appears in the captures.

    - ``trend_weeks``: per-account and per-partition trends over this many ISO weeks (ending
      with the report's), read from the weekly aggregates kept in the store; a report whose
      window is one ISO week stores its own. Live with the store, or captures with
      ``store_dir`` given; 0: no trends.

    - ``max_rejected_share``: the share of rows (0..1) that may be skipped for a problem with
      them (not rows of another window or second copies) before the report is flagged: a
      banner on top of the HTML and Markdown, and :class:`TooManyRejected` once written,
      unless ``allow_rejected`` (``--allow-skipped``).

    Outputs:

    - ``formats``: any of ``html``, ``md``, ``csv``, ``json``, ``parquet``.
    - ``outdir``: the output folder (None: :func:`default_outdir`, ``./slurmkit-report-<ISO week>``).
    - ``mail_to``: addresses the HTML report (the Markdown when no HTML is written) is sent to
      with ``sendmail -t``.
    """

    window: Window | None = None
    captures: Sequence[str | Path] = ()
    sacct_fields: Sequence[str] | str | None = None
    delimiter: str | None = None
    tz: str = "UTC"
    #: True when ``tz`` was given (``--tz``); False: UTC is assumed, and said so
    tz_given: bool = False
    #: a non-empty capture with no row in the window is an error unless this is set
    allow_empty: bool = False
    cluster: str | None = None
    spool: str | Path | None = None
    events: str | Path | None = None
    reservations: str | Path | None = None
    nodes: str | Path | None = None
    assoc_tree: str | Path | None = None
    sreport_utilization: str | Path | None = None
    sreport_accounts: str | Path | None = None
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
    sreport_wrapper: tuple = ()
    now: object | None = None
    as_of: object | None = None
    trend_weeks: int = 8
    max_rejected_share: float = 0.01
    allow_rejected: bool = False
    formats: Sequence[str] = ("html", "md", "csv", "json")
    outdir: str | Path | None = None
    mail_to: Sequence[str] = ()


class TooManyRejected(SlurmkitError):
    """More rows were skipped for a problem than ``max_rejected_share`` allows (the report was
    written, with a banner saying so). ``result``: the :class:`WeeklyResult`. Exit status 1."""

    def __init__(self, message: str, result: "WeeklyResult"):
        super().__init__(message)
        self.result = result


@dataclass
class WeeklyResult:
    """What :func:`weekly_report` made.

    ``report``: the report dict (the ``weekly.json`` contract, :mod:`slurmkit.report.weekly`);
    ``allocations``: the per-allocation frame (``jobs.csv`` / ``jobs.parquet``; None when no
    format asked writes it: json, md, html only); ``window``:
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
    check_zone(opts.tz)
    now = _timestamp(opts.now)
    assumptions = report_assumptions(opts)
    spool_df, spool_problems = read_spool_frame(opts, _warn)
    cap, cap_source = _capacity(opts)
    live = {}
    captured_inputs = None
    if opts.captures:
        rows, dq, window, as_of, captured_inputs = _captured(opts)
        if now is None:   # a capture's running jobs count up to when it was taken
            now = as_of
        if opts.events:
            live["downtime"] = _captured_downtime(opts, window, now)
            if live["downtime"]["down_gpu_hours"] is not None:
                live["down_gpu_hours"] = live["downtime"]["down_gpu_hours"]
        if any((opts.reservations, opts.nodes, opts.assoc_tree, opts.sreport_utilization, opts.sreport_accounts)):
            live["breakdown_inputs"] = captured_breakdown_inputs(opts, window, now)
    else:
        window = opts.window or last_full_week()
        rows, dq, live = _live(opts, window, assumptions, spool_df, now, cap, _warn, progress)
        if cap is None and live["capacity_gpus"]:
            cap_source = "scontrol show nodes (each node's Gres GPUs)"
        cap = live.pop("capacity_gpus")
    spool_df, prom_warnings = _prometheus_figures(opts, spool_df, rows, window, _warn)
    # the time figures run up to: --as-of, else (captures) when the capture was taken as found
    # (--now, else the latest time in it): after it nothing is known, not 0 GPUs in use
    horizon = _timestamp(opts.as_of) if opts.as_of is not None else (now if opts.captures else _timestamp(opts.now))
    report, allocs = build_report(rows, dq, window, assumptions, spool_df, capacity_gpus=cap,
                                  now=now, cluster=opts.cluster or "", horizon=horizon,
                                  source=",".join(map(str, opts.captures)) if opts.captures else "sacct",
                                  capacity_source=cap_source, running_elapsed=bool(opts.captures),
                                  gpu_nodes=_gpu_nodes(opts), rows_frame=bool({"csv", "parquet"} & set(fmts)),
                                  **live)
    if spool_problems:
        report["spool_problems"] = spool_problems[:200]
    report["inputs"] = inputs_record(opts, window, captured_inputs if opts.captures else None)
    report["coverage"] = coverage(window, now if opts.captures else None)
    if opts.captures and not report["inputs"]["time_zone_given"]:
        _warn(report["inputs"]["time_zone_note"])
    as_of_warning = report["inputs"].get("as_of_warning")
    if as_of_warning:
        _warn(as_of_warning)
    dqd = report["data_quality"]
    if opts.captures:
        _find_lines(dqd["problems"], opts.captures, _field_list(opts.sacct_fields), opts.delimiter)
    if opts.captures:
        _refuse_empty_capture(opts, dqd, window)
    dqd["rejected_limit"] = opts.max_rejected_share
    over = dqd["rejected_share"] > opts.max_rejected_share
    dqd["rejected_over_limit"] = bool(over)
    report["data_quality"]["warnings"] = prom_warnings + (
        [report["inputs"]["time_zone_note"]] if opts.captures and not report["inputs"]["time_zone_given"] else []) + (
        [as_of_warning] if as_of_warning else [])
    report["trends"] = _trends(opts, window, report, keep=not over or opts.allow_rejected)
    out = Path(opts.outdir or default_outdir(window))
    if not opts.captures and opts.window is None and not report["totals"]["jobs"]:
        _warn(f"no job in {window_label(window)}, the last full ISO week (the default window): for the week "
              f"under way give --week {iso_week(now or pd.Timestamp.now(tz='UTC'))}, for another --week or --start")
    written = render.write_outputs(report, allocs, out, fmts)
    if opts.mail_to:
        from slurmkit.report.mail import mail_report

        for addr in opts.mail_to:
            mail_report(report, out / "weekly.html" if "html" in fmts else None, addr)
    res = WeeklyResult(report, allocs, window, out, written, warnings)
    if over:
        from slurmkit.accounting.quality import first_problem, rejected_text

        first = first_problem(dqd)
        msg = (f"{rejected_text(dqd)}, over the {100 * opts.max_rejected_share:.3g} % allowed: "
               f"see {out / 'data_quality.csv' if 'csv' in fmts else 'the data-quality section'}")
        if not opts.allow_rejected:
            raise TooManyRejected(msg + "; --allow-skipped accepts them" + (f" ({first})" if first else ""), res)
        _warn(msg + (f" ({first})" if first else ""))
    return res

def iso_week(t) -> str:
    """``t``'s ISO week as ``--week`` takes it (``2026-W49``)."""
    y, w, _ = pd.Timestamp(t).isocalendar()
    return f"{y}-W{w:02d}"


def window_label(window: Window) -> str:
    """An ISO week's window as its week (``2026-W49``), any other as its dates (``2026-12-01 to
    2026-12-12``, end exclusive)."""
    start, end = pd.Timestamp(window.start), pd.Timestamp(window.end)
    if start.weekday() == 0 and start == start.normalize() and end - start == pd.Timedelta(days=7):
        return iso_week(start)
    return f"{start:%Y-%m-%d} to {end:%Y-%m-%d}"


def default_outdir(window: Window) -> str:
    """The weekly report's folder when ``-o`` is not given: ``slurmkit-report-<ISO week>`` (an
    ISO week's window), else ``slurmkit-report-<start date>``: every file in one folder, never
    loose in the current one."""
    label = window_label(window)
    return f"slurmkit-report-{label if '-W' in label else f'{pd.Timestamp(window.start):%Y-%m-%d}'}"


def _capacity(opts: WeeklyOptions) -> tuple[float | None, str | None]:
    """``(GPUs, where the figure comes from)``: ``--capacity-gpus``, else the site profile's
    (each partition's node type's GPUs), else ``(None, None)`` (live: scontrol's, later)."""
    cap = opts.capacity_gpus
    cap_source = "--capacity-gpus (given)" if cap is not None else None
    if cap is None and opts.profile is not None:
        from slurmkit.report.capacity import gpus_per_node_profile

        cap = float(sum(gpus_per_node_profile(opts.profile).values())) or None
        cap_source = "site profile (each partition's node type's GPUs)" if cap else None
    return cap, cap_source


def _gpu_nodes(opts: WeeklyOptions) -> dict[str, int] | None:
    """Node -> GPUs of the site profile's node types (a job on a GPU node without gres/gpu in
    its AllocTRES has unknown GPUs, :func:`slurmkit.report.usage.untracked_gpus`); None
    without a profile."""
    if opts.profile is None:
        return None
    from slurmkit.report.capacity import gpus_per_node_profile

    return gpus_per_node_profile(opts.profile)


def _prometheus_figures(opts: WeeklyOptions, spool_df, rows, window, warn: Callable[[str], None]):
    """``(spool_df, warnings)``: the spool's per-job GPU figures filled from Prometheus
    (``--prometheus-url``) where it lacks them; when Prometheus fails, the spool as it is and
    the warning said (energy and GPU utilization from the spool, Slurm or the model)."""
    prom_warnings = []
    if opts.prometheus_url:  # per-job GPU figures the spool lacks, measured through Prometheus
        from slurmkit.report import prometheus

        try:
            spool_df = prometheus.fill_spool(spool_df, prometheus.read_jobs(
                opts.prometheus_url, window.start.timestamp(), window.end.timestamp(),
                attempts=prometheus.attempts_of(rows.allocs), deadline_s=opts.prometheus_timeout_s))
        except prometheus.PrometheusError as exc:  # the report goes out with spool / modelled energy
            prom_warnings.append(f"{exc}; energy and GPU utilization from the spool, Slurm or the model instead")
            warn(prom_warnings[-1])
    return spool_df, prom_warnings


def _refuse_empty_capture(opts: WeeklyOptions, dqd: dict, window) -> None:
    """Raise :class:`~slurmkit.errors.InputError` (the captures) when every row of the captures
    was rejected, or (without ``--allow-empty``) none is in ``window``: the output folder is
    left as it was."""
    if dqd["rows_counted"] == 0 and dqd["rows_rejected"] > 0:
        why = ", ".join(f"{k} ({v})" for k, v in sorted(dqd["skipped_reasons"].items(), key=lambda kv: -kv[1])[:3])
        raise InputError(",".join(map(str, opts.captures)), None,
                         f"every one of the {dqd['rows_read']} rows was rejected: {why}; the output folder is left as it was")
    if dqd["rows_read"] > 0 and dqd["rows_counted"] == 0 and not opts.allow_empty:
        raise InputError(",".join(map(str, opts.captures)), None,
                         f"none of the {dqd['rows_read']} rows is in the window {window.start:%Y-%m-%d %H:%M} – "
                         f"{window.end:%Y-%m-%d %H:%M} UTC (times read in {opts.tz}"
                         f"{'' if opts.tz_given else ', assumed: no --tz given'}): give the window the capture "
                         f"covers, the zone it was printed in (--tz), or --allow-empty; the output folder is left as it was")


def _formats(formats) -> list[str]:
    from slurmkit.report.render import FORMATS

    fmts = [f.strip().lower() for f in formats if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad:
        raise UsageError("--format", f"unknown {', '.join(bad)} (choose from {', '.join(FORMATS)})")
    return fmts


def check_zone(tz: str) -> None:
    """Raise :class:`UsageError` (``--tz``) when ``tz`` is not an IANA zone name."""
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise UsageError("--tz", f"unknown time zone {tz!r} (an IANA name, e.g. Europe/Zurich or UTC)") from None


def _timestamp(now) -> pd.Timestamp | None:
    if now is None:
        return None
    t = pd.Timestamp(now)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def report_assumptions(opts: WeeklyOptions):
    """The energy, carbon and cost :class:`~slurmkit.report.energy.Assumptions` of a report: the
    site profile's (``opts.profile``), then each option given over them (origin: its CLI name);
    the period report reads them the same way."""
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


def read_spool_frame(opts: WeeklyOptions, warn) -> tuple[pd.DataFrame | None, list[str]]:
    """The hooks' energy spool (``opts.spool``, else the host's spool folder) as
    :func:`slurmkit.report.energy.read_spool` reads it: ``(frame, problems)``, the first 20
    problems passed to ``warn``; ``(None, [])`` when there is none."""
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
    if not os.path.exists(spec):
        if os.sep in spec or "." in spec:   # (a field list has neither: a file that is not there)
            raise InputError(spec, None, "no such file (--sacct-fields: a file or a comma list of sacct fields)")
        return read_field_list(spec)
    from slurmkit.accounting.fields import looks_like_header

    with InputError.reading(spec, "a sacct field list (--sacct-fields)"):
        names = read_field_list(Path(spec).read_bytes().decode("utf-8"))
    if not looks_like_header(names):
        raise InputError(spec, 1, "not a sacct field list (--sacct-fields): want the names given to sacct -o, "
                                  "comma or space separated, JobID among them" + ("" if names else " (the file is empty)"))
    return names


#: Fields a row needs to be placed in time: without every one of them in the header, every row
#: would be skipped (``no Submit/Start/End time``).
TIME_FIELDS = ("Submit", "Start", "End")


def _check_time_fields(path, fields, delimiter) -> None:
    """InputError, once, when the capture's header (or field list) has none of
    :data:`TIME_FIELDS` (``sacct -l`` prints none of them): every row would be rejected."""
    from slurmkit.accounting.read import field_names

    names = field_names(path, fields, delimiter)
    if names is not None and not any(n in names for n in TIME_FIELDS):
        missing = ",".join(TIME_FIELDS)
        raise InputError(path, None, f"the header has no {missing}, which every row needs: capture again "
                                     f"with them, e.g. sacct -P -o JobID,{missing},... "
                                     f"(--format=...), or add them to sacct -l's fields with -o")


def _captured(opts: WeeklyOptions, need_times: bool = True, empty_hint: str = " (--allow-empty writes an empty report)"):
    """``(rows, data quality, window, as of, inputs)`` from the captured files (``inputs``: each
    file as :func:`_input_record` records it, the capture time and how it was found); with no window, the
    whole UTC days their submit/start/end times span (InputError when they hold none; with
    ``need_times`` False, as the per-job view reads reportseff's captures, the window is then None
    and a header without Submit/Start/End is accepted).

    Several captures (daily dumps of one week) overlap: each row key (:data:`~slurmkit.
    accounting.frame.ALLOC_KEY`, the store's) is counted once, the copy of the capture taken
    last kept (the files are ordered by their latest time); two finished copies that disagree
    are listed; a job pending in an earlier capture and started in a later one counts as the
    started job only. ``as of``: ``opts.as_of``, else the latest time in the captures."""
    from slurmkit.accounting.frame import JobRows, load_sacct
    from slurmkit.accounting.quality import SAME_ROW_CAPTURE, DataQuality

    fields = _field_list(opts.sacct_fields)
    parts, dq = [], DataQuality()
    inputs = []
    for f in opts.captures:
        if need_times:
            _check_time_fields(f, fields, opts.delimiter)
        try:
            frows, fdq = load_sacct(f, None, fields, opts.delimiter, cluster=opts.cluster or "", tz=opts.tz)
        except InputError as exc:   # (rows that do not fit the list: say where the list came from)
            if not (isinstance(opts.sacct_fields, str) and os.path.exists(opts.sacct_fields)
                    and "field list" in exc.message):
                raise
            raise type(exc)(exc.file, exc.line, f"{exc.message} (field list read from {opts.sacct_fields})",
                            exc.key) from None
        parts.append((latest_time(frows), len(parts), frows))
        inputs.append(_input_record(f, fields, opts.delimiter, frows, fdq, parts[-1][0]))
        dq.merge(fdq)
    parts.sort(key=lambda p: (pd.Timestamp.min.tz_localize("UTC") if p[0] is None else p[0], p[1]))
    rows = JobRows.concat([p[2] for p in parts])
    names = ", ".join(map(str, opts.captures))
    if dq.rows_read == 0:
        raise InputError(names, None, "no sacct rows (empty or header only): nothing to report")
    if rows.empty:
        why = ", ".join(f"{k} ({v})" for k, v in dq.skipped.most_common(3))
        raise InputError(names, None, f"every one of the {dq.rows_read} rows was rejected: {why}")
    if len(parts) > 1:
        source = ",".join(map(str, opts.captures))
        _list_conflicts(rows, dq, source)
        rows = rows.drop_repeats(dq, source, keep="last", reason=SAME_ROW_CAPTURE, list_rows=False)
        rows = _drop_started_later(rows, dq, source)
    stamps = [p[0] for p in parts if p[0] is not None]
    as_of = _timestamp(opts.as_of) if opts.as_of is not None else (max(stamps) if stamps else None)
    as_of_warning = None
    if opts.as_of is not None:
        as_of_warning = (_as_of_before_every_job(rows, as_of) or _as_of_before_times(rows, as_of)
                         or _as_of_after_running(rows, as_of))
        rows = rewind_to(rows, as_of, dq)
        if not len(rows.allocs) and not opts.allow_empty:
            raise InputError(names, None, f"{as_of_warning}; no job had been submitted by --as-of: nothing to report{empty_hint}")
    window = opts.window
    if window is None:
        a = rows.allocs
        t = pd.concat([a["submit"], a["start"], a["end"]]).dropna()
        if t.empty and need_times:
            raise InputError(opts.captures[0], None, "no times in the input; give --week or --start")
        window = None if t.empty else Window(t.min().floor("D").to_pydatetime(),
                        (t.max().floor("D") + pd.Timedelta(days=1)).to_pydatetime())
    opts_inputs = {"files": inputs,
                   "as_of": iso_z(as_of) if as_of is not None else None,
                   "as_of_warning": as_of_warning,
                   "as_of_from": "--as-of" if opts.as_of is not None else
                   "the latest Submit/Eligible/Start/End (and running Start + ElapsedRaw) in the captures"}
    return rows, dq, window, as_of, opts_inputs


def _as_of_before_every_job(rows, as_of) -> str | None:
    """The warning for an ``--as-of`` earlier than every allocation's Submit (Start where the
    capture has no Submit): a capture cannot have been taken before the jobs it holds were
    submitted, so the time is a typo or the wrong zone. Names both times; None when some job
    was submitted by then (or no job has a time)."""
    a = rows.allocs
    t = a["submit"].fillna(a["start"]) if "submit" in a else a["start"]
    first = t.min() if len(t) else None
    if as_of is None or first is None or pd.isna(first) or as_of >= first:
        return None
    return (f"--as-of {iso_z(as_of)} is earlier than every job's Submit in the captures (the earliest: "
            f"{iso_z(first)}): a capture cannot be taken before its jobs were submitted; as of then no job had been "
            f"submitted (a typo, or a time in another zone?)")


def coverage(window: Window, as_of) -> dict:
    """The ``coverage`` section: ``{"partial", "covered_until", "window_end", "note"}``: a
    capture taken (``as_of``: ``--as-of`` or the latest time in it) before the window's end
    covers the window only up to then (``partial`` True; the week is provisional until a later
    run covers it); live reports (``as_of`` None) and captures taken after the end are whole."""
    end = pd.Timestamp(window.end)
    end = end.tz_localize("UTC") if end.tzinfo is None else end
    partial = as_of is not None and pd.Timestamp(as_of) < end
    return {"partial": bool(partial), "covered_until": iso_z(pd.Timestamp(as_of)) if partial else None,
            "window_end": iso_z(end),
            "note": (f"Partial window: the captures end at {iso_z(pd.Timestamp(as_of))}, before the window's end "
                     f"({iso_z(end)}); every figure covers the window up to then (provisional until a later run "
                     "covers it)") if partial else None}


def _as_of_before_times(rows, as_of) -> str | None:
    """The warning for an ``--as-of`` earlier than some Start or End in the captures (a capture
    cannot hold a time after it was taken): names the first such row (the earliest of those
    times) and how many rows have one; None when every Start and End is at or before it."""
    a = rows.allocs
    if as_of is None or not len(a):
        return None
    late = (a["start"] > as_of) | (a["end"] > as_of)
    if not late.any():
        return None
    t = a["start"].where(a["start"] > as_of, a["end"])[late]
    i = t.idxmin()
    what = "Start" if a.at[i, "start"] > as_of else "End"
    return (f"--as-of {iso_z(as_of)} is earlier than the Start or End of {int(late.sum())} allocation row(s) in the "
            f"captures (the first: JobID {a.at[i, 'job_id']} {what} {iso_z(t[i])}): the captures were taken later, or "
            "--as-of is wrong; the report is as of --as-of: jobs that had not started by then are not counted as run "
            "(pending if submitted by then, else left out) and jobs that ended later count as running until then")


#: How much later than its running jobs' Start + Elapsed an ``--as-of`` may be without a word
#: (sacct prints each row's Elapsed as it goes; a capture of many rows takes a while).
AS_OF_AFTER_RUNNING_S = 300.0


def _as_of_after_running(rows, as_of) -> str | None:
    """The warning for an ``--as-of`` later than the capture's own time: a running job's
    Start + Elapsed (ElapsedRaw, else Elapsed) is when sacct printed it, so a capture whose
    running jobs all end, so counted, more than :data:`AS_OF_AFTER_RUNNING_S` before
    ``--as-of`` was taken then, not at ``--as-of``; names the latest such time and its job.
    None without running jobs with an Elapsed (a capture of finished jobs may be read any time
    later)."""
    from slurmkit.report.usage import printed_at

    a = rows.allocs
    if as_of is None or not len(a):
        return None
    printed = printed_at(a)
    if not printed.notna().any():
        return None
    i = printed.idxmax()
    if (as_of - printed[i]).total_seconds() <= AS_OF_AFTER_RUNNING_S:
        return None
    return (f"--as-of {iso_z(as_of)} is later than the captures' own time: their running jobs' Elapsed was printed "
            f"by {iso_z(printed[i])} (JobID {a.at[i, 'job_id']}: Start + Elapsed); each running job counts up to its "
            "Start + Elapsed (the captures know nothing of it after), every other figure up to --as-of")


def rewind_to(rows, as_of, dq: DataQuality):
    """``rows`` (a :class:`~slurmkit.accounting.frame.JobRows`) as sacct would have shown them
    at ``as_of`` (aware UTC, the capture time ``--as-of``): an allocation submitted after it
    (Submit, else Start, later) is left out (counted in ``dq`` as :data:`~slurmkit.accounting.
    quality.AFTER_AS_OF`, not a problem); one submitted by then that started later is PENDING
    (Start, End, Elapsed unknown); one that started by then and ended later is RUNNING (End,
    Elapsed unknown: it runs until ``as_of``); steps that started after ``as_of`` are left out
    too. Returns ``rows`` itself when no time is later."""
    from slurmkit.accounting.frame import JobRows
    from slurmkit.accounting.quality import AFTER_AS_OF

    a, st = rows.allocs, rows.steps
    first = a["submit"].fillna(a["start"]) if "submit" in a else a["start"]
    gone = (first > as_of).to_numpy()
    pend = ((a["start"] > as_of) & ~(first > as_of)).to_numpy()
    run = ((a["end"] > as_of) & (a["start"] <= as_of)).to_numpy()
    sgone = (st["start"] > as_of).to_numpy() if "start" in st else np.zeros(len(st), bool)
    if not (gone.any() or pend.any() or run.any() or sgone.any()):
        return rows
    a = a.copy()
    state = a["state"]
    if isinstance(state.dtype, pd.CategoricalDtype):
        state = state.cat.add_categories([c for c in ("PENDING", "RUNNING") if c not in state.cat.categories])
    state = state.mask(pend, "PENDING").mask(run, "RUNNING")
    a["state"] = state
    a.loc[pend, "start"] = pd.NaT
    a.loc[pend | run, "end"] = pd.NaT
    a.loc[pend | run, "elapsed_s"] = np.nan
    dq.skip(AFTER_AS_OF, int(gone.sum()) + int(sgone.sum()))
    return JobRows(a[~gone].reset_index(drop=True), st[~sgone].reset_index(drop=True))


def _sha256(path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _input_record(path, fields, delimiter, rows, fdq, latest) -> dict:
    """One capture as the report records it: ``file`` (as given), ``sha256``, ``rows`` (data
    rows read), ``delimiter``, ``header`` (True) or the field list given, ``fields``,
    ``latest_time`` (its latest time: when it was taken, at the earliest) and ``duplicates``
    (``-D``: True when a job has several attempts in it; None when that cannot be told)."""
    from slurmkit.accounting.read import capture_layout

    lay = capture_layout(path, fields, delimiter) or {}
    a = rows.allocs
    several = bool(len(a)) and bool(a.duplicated(["cluster", "key_id"]).any())
    return {"file": str(path), "sha256": _sha256(path), "rows": int(fdq.rows_read),
            "delimiter": lay.get("delimiter"), "delimiter_given": bool(lay.get("delimiter_given")),
            "header": bool(lay.get("header")), "fields": lay.get("fields"),
            "latest_time": iso_z(latest) if latest is not None else None,
            "times": _times_kind(path, lay),
            "duplicates": True if several else None,
            "duplicates_note": "sacct -D: requeued attempts are in it" if several else
            "cannot be told (no job has several attempts in it; without -D sacct prints only the last)"}


def _times_kind(path, lay: dict, lines: int = 200) -> str:
    """``epoch`` when the Submit/Eligible/Start/End values of the first ``lines`` rows of a
    capture are epoch seconds (no zone needed), else ``local`` (sacct's local time, no zone)."""
    names = lay.get("fields") or []
    idx = [names.index(n) for n in ("Submit", "Eligible", "Start", "End") if n in names]
    delim = lay.get("delimiter") or "|"
    with open(path, encoding="utf-8", errors="replace") as fh:  # only to tell epoch from local times
        for i, line in enumerate(fh):
            if i > lines:
                break
            if i == 0 and lay.get("header") or line.startswith("#"):
                continue
            parts = line.rstrip("\r\n").split(delim)
            for j in idx:
                v = parts[j].strip() if j < len(parts) else ""
                if v and v not in ("Unknown", "None", "N/A") and not v.isdigit():
                    return "local"
    return "epoch"


def tz_assumed_note(tz: str) -> str:
    """The warning of captures read with no --tz whose times carry no zone (``report weekly``,
    ``report jobs``, ``report store``; one home): ``tz`` (UTC) is assumed."""
    return (f"time zone {tz} assumed: the captures' times carry no zone and no --tz was given "
            "(sacct prints the local time of the host it ran on)")


def inputs_record(opts: "WeeklyOptions", window: Window, captured: dict | None) -> dict:
    """The report's ``inputs``: each capture (:func:`_input_record`) or the live sacct call, the
    file the field list came from (``sacct_fields_file``, when ``--sacct-fields`` named one), the
    capture time and how it was found, the time zone and whether it was given or assumed, the
    window, the tool's version."""
    from slurmkit import __version__
    from slurmkit.accounting.fields import FIELDS

    rec = dict(captured or {})
    if not opts.captures:
        rec = {"files": [], "live": f"sacct -a -D -P -n --noconvert -S <day> -E <day+1> -o {','.join(FIELDS)} "
                                    "(one call per UTC day, epoch times)",
               "as_of": None, "as_of_from": "now (live)"}
    local = any(f.get("times") == "local" for f in rec.get("files") or [])
    given = bool(opts.tz_given) or not opts.captures or not local
    rec.update({"time_zone": opts.tz if opts.captures else "UTC (live: epoch times)",
                "time_zone_given": given,
                "time_zone_note": ("--tz" if opts.tz_given else "epoch times: no zone needed" if not local else
                                   tz_assumed_note(opts.tz))
                if opts.captures else "live sacct prints epoch times",
                "window": window.as_dict(), "tool": f"slurmkit {__version__}"})
    spec = opts.sacct_fields
    if opts.captures and isinstance(spec, (str, os.PathLike)) and os.path.exists(spec):
        rec["sacct_fields_file"] = str(spec)   # the field list of captures without a header
    return rec


def _captured_downtime(opts: WeeklyOptions, window: Window, now) -> dict:
    """The downtime timeline (:func:`slurmkit.report.capacity.downtime`) of the ``events``
    file, up to the capture time (ongoing events end there); GPUs per node from the profile,
    else the ``nodes`` capture (None without either: node-hours only). InputError for a file that cannot be read."""
    from slurmkit.report import capacity as C

    path = str(opts.events)
    events = C.node_events(read_capture(path), opts.tz, source=path)
    gpus = (C.gpus_per_node_profile(opts.profile) if opts.profile is not None else
            {n: int(t["gres/gpu"]) for n, t in C.node_tres_scontrol(read_capture(opts.nodes), str(opts.nodes)).items()}
            if opts.nodes
            else None)
    upto = min(pd.Timestamp(window.end), now) if now is not None else pd.Timestamp(window.end)
    down = C.downtime(events, gpus, window.start, max(upto, pd.Timestamp(window.start)), now)
    down["source"] = path
    return down


def read_capture(path) -> str:
    """A captured file's text (undecodable bytes replaced: a bad byte spoils one name or
    reason, never the whole file). Raises :class:`~slurmkit.errors.InputError` (the path) for
    a file that cannot be read or is empty (no command prints nothing)."""
    with InputError.reading(path, "a captured command's output"):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise InputError(str(path), None, "empty: want the command's captured output (sacctmgr -P and sreport -P "
                                          "print a header even when there is no row, scontrol a line)")
    return text


def prints_local_times(text: str) -> bool:
    """Whether a capture (``text``) prints times as local ISO times (``2026-12-02T13:53:23``:
    sacctmgr's and scontrol's default SLURM_TIME_FORMAT, the local time of the host it ran on,
    no zone) rather than epoch seconds (``SLURM_TIME_FORMAT=%s``), which need no zone."""
    return re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", text) is not None


def captured_breakdown_inputs(opts: WeeklyOptions, window: Window, now) -> dict:
    """The breakdown inputs (:func:`slurmkit.report.weekly.breakdown_section`) of a captured
    report: the whole hours of the window up to the capture time; node TRES from ``nodes``
    (scontrol), else the profile (None: no breakdown); events from ``events`` (None: Down
    unknown); reservations (None: Planned Down unknown); the assoc tree; sreport's captures
    (None when not given). InputError for a file that cannot be read or parsed."""
    from slurmkit.report import breakdown as BD
    from slurmkit.report import capacity as C
    from slurmkit.report import sreport as S
    from slurmkit.report.live import whole_hours

    upto = min(pd.Timestamp(window.end), now) if now is not None else pd.Timestamp(window.end)
    w = Window(*whole_hours(window.start, max(upto, pd.Timestamp(window.start)).to_pydatetime()))
    node_tres = (C.node_tres_scontrol(read_capture(opts.nodes), str(opts.nodes)) if opts.nodes else
                 C.node_tres_profile(opts.profile) if opts.profile is not None else None)
    ev_text = read_capture(opts.events) if opts.events else None
    resv_text = read_capture(opts.reservations) if opts.reservations else None
    out = {"window": w, "node_tres": node_tres,
           "events": C.node_events(ev_text, opts.tz, source=str(opts.events), cluster_rows=True)
           if ev_text is not None else None,
           "reservations": BD.parse_reservations(resv_text, opts.tz, source=str(opts.reservations))
           if resv_text is not None else None,
           "assocs": BD.parse_assoc_tree(read_capture(opts.assoc_tree), source=str(opts.assoc_tree))
           if opts.assoc_tree else None,
           # the zone the captures' times were read in: named (a refusal names it) only where
           # they print local times
           "time_zone": opts.tz if any(prints_local_times(t) for t in (ev_text, resv_text) if t) else None}
    for key, path, parse in (("sreport", opts.sreport_utilization, S.cluster_utilization),
                             ("account_users", opts.sreport_accounts, S.account_users)):
        if not path:
            out[key] = None
            continue
        text = read_capture(path)
        try:
            out[key] = parse(text, S.unit_of(text), source=str(path))
        except ValueError as exc:
            raise InputError(str(path), None, str(exc)) from None
    return out


def _trends(opts: WeeklyOptions, window: Window, report: dict, keep: bool) -> dict | None:
    """Store this report's weekly aggregate when its window is one ISO week (and ``keep``: not
    flagged for skipped rows), then the trends over the ``trend_weeks`` weeks ending with it
    (:func:`slurmkit.report.trends.trends`); None without a store or with ``trend_weeks`` 0."""
    from slurmkit.accounting.store import Store
    from slurmkit.report import trends as T

    if opts.trend_weeks <= 0 or not (opts.store_dir or (not opts.captures and opts.use_store)):
        return None
    store = Store(opts.store_dir or default_store_dir(), opts.cluster or "")
    week = T.iso_week_of_window(window.start, window.end)
    if week and keep:
        # a capture taken before the week ended covers it only in part: provisional until a
        # later run (a later capture, or live) covers the whole week
        as_of = (report.get("inputs") or {}).get("as_of")
        partial = bool(opts.captures) and as_of is not None and pd.Timestamp(as_of) < pd.Timestamp(window.end)
        store.save_week(week, T.week_table(report, partial=partial))
    last = week or T.iso_week((pd.Timestamp(window.end) - pd.Timedelta(seconds=1)).to_pydatetime())
    weeks = T.weeks_ending(last, opts.trend_weeks)
    return T.trends(store.load_weeks(weeks), weeks)


def _find_lines(problems: list[dict], captures, fields, delimiter) -> None:
    """Give the listed problems (the report's ``data_quality.problems``) that name a JobID but
    no line (values repaired or rows skipped after splitting) their capture's physical line: a
    row's nth listing for a reason gets its nth line; a problem found across several captures
    (its source names them all) gets the first capture that holds the row as its source."""
    from slurmkit.accounting.read import locate_job_ids

    paths = [str(c) for c in captures]
    todo = [p for p in problems if p.get("line") is None and str(p.get("detail", "")).startswith("JobID ")]
    if not todo:
        return

    def jid(p):
        j = p["detail"][len("JobID "):].split(":")[0].strip()
        return j[1:-1] if len(j) >= 2 and j[0] == j[-1] and j[0] in "'\"" else j

    want: dict = {}
    for p in todo:
        for path in ([p["source"]] if p["source"] in paths else paths):
            want.setdefault(path, set()).add(jid(p))
    lines = {path: locate_job_ids(path, ids, fields, delimiter) for path, ids in want.items()}
    used: dict = {}
    for p in todo:
        j = jid(p)
        for path in ([p["source"]] if p["source"] in paths else paths):
            found = lines[path].get(j)
            if found:
                k = used.get((path, j, p["reason"]), 0)
                p["line"], p["source"] = found[min(k, len(found) - 1)], path
                used[(path, j, p["reason"])] = k + 1
                break


#: Data-quality reason of overlapping captures that disagree.
COPIES_DIFFER = "copies of a finished row differ between captures (the later capture's kept)"


def latest_time(rows) -> pd.Timestamp | None:
    """The latest Submit / Eligible / Start / End in ``rows`` (allocations and steps), and
    Start + ElapsedRaw of a RUNNING allocation (sacct printed its elapsed time when the capture
    was taken): when a capture was taken, as near as its rows tell (None when they hold no time)."""
    a = rows.allocs
    cols = [a[c] for c in ("submit", "eligible", "start", "end") if c in a]
    if {"state", "start", "elapsed_s"} <= set(a.columns) and len(a):
        run = (a["state"].astype(str) == "RUNNING").to_numpy()
        if run.any():
            cols.append(a["start"][run] + pd.to_timedelta(a["elapsed_s"][run].clip(lower=0), unit="s"))
    cols += [rows.steps[c] for c in ("submit", "start") if c in rows.steps]
    best = [c.max() for c in cols if len(c)]
    best = [b for b in best if not pd.isna(b)]
    return max(best) if best else None


def _alloc_keys(rows) -> pd.DataFrame:
    acode, _ = rows.identity()
    a = rows.allocs
    return pd.DataFrame({"code": acode, "submit": a["submit"].to_numpy(), "start": a["start"].to_numpy()})


def _list_conflicts(rows, dq, source: str, limit: int = 20) -> None:
    """List (as repaired: the later copy is the one counted) each row key held by two finished
    copies (End known) whose State, End, ElapsedRaw or GPUs differ."""
    a = rows.allocs
    keys = _alloc_keys(rows)
    dup = keys.duplicated(keep=False).to_numpy() & a["end"].notna().to_numpy()
    if not dup.any():
        return
    cols = {"State": a["state"].astype(str), "End": a["end"], "ElapsedRaw": a["elapsed_s"], "GPUs": a["gpus"]}
    sub = keys[dup].assign(**{k: v[dup].to_numpy() for k, v in cols.items()})
    grouped = sub.groupby(["code", "submit", "start"], dropna=False, sort=False)
    differ = grouped[list(cols)].nunique(dropna=False)
    differ = differ[(differ > 1).any(axis=1)]
    if differ.empty:
        return
    jid = a["job_id"].astype(str).to_numpy()
    listed = 0
    for key, g in grouped:
        if key not in differ.index:
            continue
        which = [c for c in cols if differ.loc[key, c] > 1]
        what = "; ".join(f"{c} " + " vs ".join(str(v) for v in g[c]) for c in which)
        dq.repair(COPIES_DIFFER, source if listed < limit else "", None, f"JobID {jid[g.index[0]]}: {what}")
        listed += 1


def _drop_started_later(rows, dq, source: str):
    """Without the PENDING rows (no Start) of jobs that another, later capture shows started
    (:meth:`~slurmkit.accounting.frame.JobRows.drop_started_later`)."""
    return rows.drop_started_later(dq)


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
                prep, _ = build_report(prows, pdq, prev, assumptions, spool_df, now=now, gpu_nodes=_gpu_nodes(opts))
                previous = prep["totals"]
    down, downtime = None, None
    try:
        t_now = now if now is not None else pd.Timestamp.now(tz="UTC")
        upto = max(min(pd.Timestamp(window.end), t_now), pd.Timestamp(window.start))   # no future hour
        live_cap, down, downtime = live.live_capacity(window.start, upto, now=t_now)
        cap = cap or live_cap
    except SlurmError as exc:
        warn(f"capacity not known: {exc}")
    # sreport never reports the current hour: reconcile the whole hours before it
    hour_now = (now or pd.Timestamp.now(tz="UTC")).floor("h").to_pydatetime()
    recon_w = Window(*live.whole_hours(window.start, min(window.end, hour_now)))
    sreport_h, binputs = None, None
    if opts.use_sreport and recon_w.end > recon_w.start:
        try:
            sreport_h = live.sreport_gpu_hours(recon_w.start, recon_w.end, opts.cluster, opts.rollup,
                                               wrapper=opts.sreport_wrapper)
        except SlurmError as exc:
            warn(f"sreport: {exc}")
        binputs = _breakdown_inputs(opts, recon_w, warn)
    return rows, dq, {"previous": previous, "down_gpu_hours": down, "downtime": downtime, "sreport_gpu_hours": sreport_h,
                      "recon_window": recon_w, "capacity_gpus": cap, "breakdown_inputs": binputs}


def _breakdown_inputs(opts: WeeklyOptions, recon_w: Window, warn) -> dict | None:
    """sreport's breakdown inputs over ``recon_w`` (:func:`slurmkit.report.live.breakdown_inputs`)
    with sreport's own cluster utilization and AccountUtilizationByUser (None each when sreport
    fails: a warning); None when Slurm cannot give the inputs (a warning)."""
    from slurmkit.report import live
    from slurmkit.report import sreport as S
    from slurmkit.slurm.commands import SlurmError

    try:
        inputs = live.breakdown_inputs(recon_w.start, recon_w.end, opts.cluster)
    except SlurmError as exc:
        warn(f"sreport's breakdown not computed: {exc}")
        return None
    inputs["window"] = recon_w
    for key, report, parse in (("sreport", "utilization", S.cluster_utilization),
                               ("account_users", "AccountUtilizationByUser", S.account_users)):
        try:
            inputs[key] = parse(live.sreport_text(report, recon_w.start, recon_w.end, opts.cluster,
                                                  wrapper=opts.sreport_wrapper), "seconds")
        except SlurmError as exc:
            inputs[key] = None
            warn(f"sreport cluster {report}: {exc}")
    return inputs


def fill_store(opts: WeeklyOptions, store_dir, warn=None, replace: bool = False, now=None) -> dict:
    """Store the captures of ``opts`` (read as the weekly report reads them, :func:`_captured`:
    several captures merged, the latest copy of a row kept) in the Parquet store at
    ``store_dir`` (cluster ``opts.cluster``), day by day as daily live pulls would have listed
    them, each day merged with what the store holds by the store's key
    (:func:`slurmkit.accounting.store.fill_from_capture`; ``replace``: the days hold this
    capture's rows only), the captures taken at ``as of`` (``opts.as_of``, else the latest time
    in them). With ``opts.window``, only its days are stored. Days starting at or after ``now``
    (a time; default: the current time) are not stored, and a capture time after ``now`` is
    told to ``warn`` (times read in the wrong zone?). The zone the captures' times were read in
    (``opts.tz``), whether it was given (``opts.tz_given``, or the times are epoch seconds) and
    whether the times are local go into each written day's manifest entry (``time_zone``,
    ``time_zone_given``, ``times_local``), for the period report's "About" block and the zone
    check of a later merge; UTC assumed for local times is told to ``warn`` (a callable taking
    the message) as ``report weekly`` tells it (:func:`tz_assumed_note`).

    Returns ``{"store", "cluster", "as_of", "now", "replace", "written", "final", "unchanged",
    "after_now", "forgotten", "days", "totals", "time_zone", "time_zone_given",
    "time_zone_note", "data_quality"}`` (``days`` and ``totals``: rows added, replaced, kept
    ...: :data:`slurmkit.accounting.store.DAY_COUNTS`). Raises
    :class:`~slurmkit.errors.InputError` for a capture that cannot be read or holds no times,
    and for days stored in another zone (:func:`~slurmkit.accounting.store.fill_from_capture`)."""
    from slurmkit.accounting.store import DAY_COUNTS, Store, fill_from_capture

    check_zone(opts.tz)
    now_ts = _timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    rows, dq, window, as_of, inputs = _captured(opts, empty_hint="")
    if as_of is None:
        raise InputError(",".join(map(str, opts.captures)), None, "no times in the captures: give --as-of")
    if inputs.get("as_of_warning") and warn:
        warn(inputs["as_of_warning"])
    if not len(rows.allocs):
        steps = dq.skipped.get("step row without its allocation row", 0) + len(rows.steps)
        raise InputError(",".join(map(str, opts.captures)), None, "no allocation row in the captures"
                         + (f" ({steps} step row(s) without their job's allocation row: capture with "
                            "sacct's allocation rows, not -s/--steps alone)" if steps else "") + ": nothing to store")
    rec = inputs_record(opts, window, inputs)
    if not rec["time_zone_given"] and warn:
        warn(rec["time_zone_note"])
    local = any(f.get("times") == "local" for f in inputs.get("files") or [])
    zone = {"time_zone": rec["time_zone"], "time_zone_given": rec["time_zone_given"]}
    named = sorted({str(c) for c in rows.allocs["cluster"].dropna().unique() if str(c)}) \
        if "cluster" in rows.allocs else []
    if not opts.cluster and named and warn:
        # (the folder is the store's cluster: a later capture with --cluster NAME goes elsewhere)
        warn(f"the captures' Cluster column names {', '.join(named)}, and no --cluster was given: the days go "
             "under cluster=_default; " + (f"give --cluster {named[0]} to file them under the cluster's name"
                                           if len(named) == 1 else
                                           "store each cluster's capture with its own --cluster")
             + " (report period --cluster reads a store cluster by its folder)")
    if as_of > now_ts and warn:
        warn(f"the capture time {iso_z(as_of)} is after now ({iso_z(now_ts)}"
             + (", --now" if now is not None else "") + ")"
             + (": times read in the wrong zone (--tz)?" if local else "")
             + "; days starting at or after now are not stored")
    st = Store(store_dir, opts.cluster or "")
    first = last = None
    if opts.window is not None:
        rows = _in_window(rows, opts.window)
        first, last = _timestamp(opts.window.start).timestamp(), _timestamp(opts.window.end).timestamp() - 1
    try:
        res = fill_from_capture(st, rows, as_of.timestamp(), first_day=first, last_day=last, replace=replace,
                                record={**zone, "times_local": local}, now=now_ts.timestamp())
    except InputError as exc:
        if Path(exc.file).name not in ("allocs.parquet", "steps.parquet") or Path(exc.file).parent.parent != st.dir:
            raise
        day = Path(exc.file).parent.name[len("day="):]
        # (a day file the merge cannot read: nothing is written; the way on is the user's choice)
        raise InputError(exc.file, exc.line, f"{exc.message}; nothing was stored. To store that day again from the "
                         f"captures alone (what the file held is lost): --replace --start {day} --end <the next "
                         "day>; or restore the file", exc.key) from None
    totals = {k: sum(d.get(k, 0) for d in res["days"].values())
              for k in (*DAY_COUNTS, *(f"steps_{k}" for k in DAY_COUNTS))}
    return {"store": str(st.dir), "cluster": st.cluster, "as_of": iso_z(as_of), "now": iso_z(now_ts),
            "replace": replace, **res, "totals": totals, **zone,
            "time_zone_note": rec["time_zone_note"], "data_quality": dq.as_dict()}


def _in_window(rows, window):
    """The rows of jobs overlapping ``window`` (steps with their allocation)."""
    from slurmkit.accounting.frame import JobRows

    a = rows.allocs
    s, e = pd.Timestamp(window.start), pd.Timestamp(window.end)
    lo = a["start"].fillna(a["submit"]).fillna(a["end"])
    keep = (lo < e) & (a["end"].isna() | (a["end"] >= s))
    a = a[keep]
    return JobRows(a.reset_index(drop=True),
                   rows.steps[rows.steps["key_id"].isin(a["key_id"])].reset_index(drop=True))


# --- the per-job view's inputs (slurmkit report jobs) ----------------------------------------

@dataclass
class JobsOptions:
    """What :func:`load_jobs` reads. ``captures``: sacct captures (the weekly report's reader,
    with ``sacct_fields``, ``delimiter``, ``tz``, ``tz_given``, ``as_of``); else ``store_dir``:
    the days of ``window`` from the Parquet store, no sacct; else live sacct over ``window``
    (one call per UTC day, nothing stored); with no ``window``, the 7 UTC days before ``now`` and
    its own day. ``spool``: the hooks' energy spool; ``profile`` and the energy options as in
    :class:`WeeklyOptions`. ``cluster``: the store's cluster (None: every cluster in the store).
    ``now``: the time a running job is measured up to (default: ``as_of`` for captures, else
    the current time)."""

    window: object | None = None
    captures: Sequence[str] = ()
    sacct_fields: object | None = None
    delimiter: str | None = None
    tz: str = "UTC"
    tz_given: bool = False
    as_of: object | None = None
    cluster: str | None = None
    store_dir: str | None = None
    spool: str | None = None
    profile: object | None = None
    gpu_tdp_w: float | None = None
    trust_slurm_energy: bool | None = None
    now: object | None = None


#: A window far wider than any job: the per-job view never clips a job's figures to a window.
_ALL = (pd.Timestamp("1970-01-01", tz="UTC"), pd.Timestamp("2200-01-01", tz="UTC"))


def load_jobs(opts: JobsOptions, warn=None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """``(view, allocation frame, data quality dict)``: the per-job view
    (:func:`slurmkit.report.jobs.job_view`) of every allocation row the source holds (not yet
    filtered: :func:`slurmkit.report.jobs.select`), whole jobs (not
    clipped to the window). Raises :class:`~slurmkit.errors.InputError` for a capture that cannot
    be read, ``SlurmError`` when sacct fails."""
    from slurmkit.accounting.quality import UNTOLD_ATTEMPTS, DataQuality
    from slurmkit.report import energy as E
    from slurmkit.report import jobs as J
    from slurmkit.report.usage import STEP_BY_JOB_ID, allocations
    from slurmkit.report.window import Window

    wopts = WeeklyOptions(window=opts.window, captures=tuple(opts.captures), sacct_fields=opts.sacct_fields,
                          delimiter=opts.delimiter, tz=opts.tz, tz_given=opts.tz_given,
                          cluster=opts.cluster, spool=opts.spool, profile=opts.profile,
                          gpu_tdp_w=opts.gpu_tdp_w, trust_slurm_energy=opts.trust_slurm_energy,
                          as_of=opts.as_of)
    check_zone(opts.tz)
    now = _timestamp(opts.now)
    if opts.captures:
        rows, dq, _window, as_of, inputs = _captured(wopts, need_times=False)
        now = now if now is not None else as_of
        if not opts.tz_given and any(f.get("times") == "local" for f in inputs["files"]) and warn:
            warn(tz_assumed_note(opts.tz) + "; Start/End and --start/--end are read in it")
    else:
        t = now if now is not None else pd.Timestamp.now(tz="UTC")
        window = opts.window or Window((t - pd.Timedelta(days=7)).floor("D").to_pydatetime(),
                                       (t.floor("D") + pd.Timedelta(days=1)).to_pydatetime())
        days = [d for d, _ in window.days()]
        if opts.store_dir:
            from slurmkit.accounting.frame import JobRows
            from slurmkit.accounting.store import Store, clusters

            if not Path(opts.store_dir).is_dir():
                raise InputError(opts.store_dir, None, "no store there (not a folder)")
            # no --cluster: every cluster in the store, as report period reads it
            names = [opts.cluster] if opts.cluster else (clusters(opts.store_dir) or [""])
            parts, dq = [], DataQuality()
            for c in names:
                st = Store(opts.store_dir, c)
                crows, cdq = st.load(days)
                parts.append(crows)
                dq.merge(cdq)
                for lost in st.lost_files(days):
                    if warn:
                        warn(f"{lost}: missing, while the store's manifest lists its day: that day's jobs are "
                             "not listed")
            rows = JobRows.concat(parts)
            # (in Submit order, then JobIDRaw: not the files' row order, which the day sums
            # change, docs/report.md, Day sums)
            a = rows.allocs
            order = np.lexsort((a["key_id"].astype(str).to_numpy(),
                                pd.to_datetime(a["submit"], utc=True).astype("int64").to_numpy()))
            rows = JobRows(a.iloc[order].reset_index(drop=True), rows.steps)
        else:
            from slurmkit.report.live import ingest_window

            rows, dq, _ = ingest_window(window.days(), opts.cluster, None)
    dq = dq if dq is not None else DataQuality()
    spool_df, _problems = read_spool_frame(wopts, warn or (lambda m: None))
    a = allocations(rows, *_ALL, dq, now=now, source=",".join(map(str, opts.captures)) or "sacct", untimed=True)
    if dq.repaired.get(STEP_BY_JOB_ID) and warn:
        named = [p.detail for p in dq.problems if p.reason == STEP_BY_JOB_ID]
        warn(f"{dq.repaired[STEP_BY_JOB_ID]} step row(s) whose JobIDRaw names no allocation row matched to their "
             f"job by JobID ({'; '.join(named)})")
    if dq.skipped.get(UNTOLD_ATTEMPTS) and warn:
        named = [p.detail for p in dq.problems if p.reason == UNTOLD_ATTEMPTS]
        warn(f"{dq.skipped[UNTOLD_ATTEMPTS]} row(s) of requeued jobs' earlier attempts (allocation and step rows) "
             "not listed: the capture has no Submit or Start to tell a job's attempts apart, so each job is its last "
             f"row, as sacct without -D prints it ({'; '.join(named[:5])}{' ...' if len(named) > 5 else ''})")
    unmatched = dq.skipped.get("step row without its allocation row")
    if unmatched and warn:
        warn(f"{unmatched} step row(s) without their allocation row (by JobIDRaw or JobID): not in any job's "
             "figures (listed in data_quality)")
    a = E.attach_energy(a, report_assumptions(wopts), spool_df, dq)
    return J.job_view(a), a, dq.as_dict()


__all__ = ["TooManyRejected", "WeeklyOptions", "WeeklyResult", "weekly_report", "default_store_dir", "default_spool_dir", "JobsOptions", "load_jobs", "fill_store"]
