"""``report period`` from its options to its files: the pipeline beside the weekly one
(:mod:`slurmkit.report.pipeline`).

:func:`run_period` reads the period report's inputs (sreport's breakdown and the account tree
from captures or live, the energy assumptions, the spool, the capacity), computes the report
(:func:`slurmkit.report.period.period_report`, DuckDB over the store's Parquet files), writes its
files and passes what the reader must know (days listed without their file, out-of-date day
sums, spool lines that do not parse) to ``warn``. The command line only parses options into a
:class:`PeriodOptions`, calls it and prints.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slurmkit.errors import UsageError
from slurmkit.report.period import Period

#: The output formats of ``report period``.
FORMATS = ("json", "csv", "md", "html")


@dataclass(frozen=True)
class PeriodOptions:
    """What ``report period`` is asked (each field is the option of the same name).

    ``period``: the window and its parts (:func:`slurmkit.report.period.parse_period`);
    ``clusters``: store clusters (None: every cluster in the store); ``store_dir``: the store
    (None: the weekly report's default); ``formats``: of :data:`FORMATS`; ``outdir``: None:
    ``./slurmkit-period-<label>``; ``memory_limit``: DuckDB's (e.g. ``"2GB"``; None: the
    default); breakdown captures ``events``, ``reservations``, ``nodes``, ``assoc_tree`` and
    sreport's ``sreport_utilization`` / ``sreport_accounts`` (paths), or ``live_breakdown``
    (with ``use_sreport``); ``tz``: the captures' zone; ``profile``: a loaded site profile;
    the energy assumptions' overrides as ``report weekly`` takes them (None: not given;
    ``trust_slurm_energy`` None: the default); ``now``: the report's time (ISO; None: the
    clock's)."""

    period: Period
    clusters: list[str] | None = None
    store_dir: str | None = None
    formats: tuple[str, ...] = ("json", "csv", "md")
    outdir: str | None = None
    memory_limit: str | None = None
    temp_dir: str | None = None
    use_sums: bool = True
    events: str | None = None
    reservations: str | None = None
    nodes: str | None = None
    assoc_tree: str | None = None
    tz: str | None = None
    live_breakdown: bool = False
    use_sreport: bool = False
    sreport_utilization: str | None = None
    sreport_accounts: str | None = None
    profile: object | None = None
    capacity_gpus: float | None = None
    spool: str | None = None
    pue: float | None = None
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None
    gpu_tdp_w: float | None = None
    trust_slurm_energy: bool | None = None
    now: str | None = None

    @property
    def store(self) -> str:
        """The store folder read: ``store_dir``, else the weekly report's default."""
        from slurmkit.report.pipeline import default_store_dir

        return self.store_dir or default_store_dir()


def cluster_names(text: str | None) -> list[str] | None:
    """``--cluster``'s comma list as names, each once (None when not given). Raises
    :class:`~slurmkit.errors.UsageError` for a list with no name (the store's unnamed cluster
    is ``_default``, named as such)."""
    if not text:
        return None
    names = list(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    if not names:
        raise UsageError("--cluster", f"no cluster name in {text!r} (the store's unnamed cluster is _default)")
    return names


def check_formats(text: str) -> tuple[str, ...]:
    """``--format``'s comma list, checked against :data:`FORMATS` (raises
    :class:`~slurmkit.errors.UsageError` naming the unknown ones)."""
    formats = tuple(f for f in text.split(",") if f)
    bad = set(formats) - set(FORMATS)
    if bad:
        raise UsageError("--format", f"unknown {', '.join(sorted(bad))} (choose from {', '.join(FORMATS)})")
    return formats


def _check_breakdown_options(opts: PeriodOptions) -> None:
    """Raises :class:`~slurmkit.errors.UsageError` for breakdown options that do not go together."""
    if opts.use_sreport and not opts.live_breakdown:   # alone too: else --sreport would be dropped unsaid
        raise UsageError("--sreport", "compares with sreport live: give --live-breakdown too")
    for opt, path, need, name in (("--sreport-utilization", opts.sreport_utilization, opts.nodes, "--nodes"),
                                  ("--sreport-accounts", opts.sreport_accounts, opts.assoc_tree, "--assoc-tree")):
        if path and not need:    # (a capture is compared with captures: not with --live-breakdown)
            raise UsageError(opt, f"compares sreport's capture with the breakdown of captures: give {name} too")
    if opts.live_breakdown and any((opts.events, opts.reservations, opts.nodes, opts.assoc_tree)):
        raise UsageError("--live-breakdown", "reads the inputs live: leave out --events, --reservations, "
                                             "--nodes and --assoc-tree")


def _captured_inputs(opts: PeriodOptions, scope: list[str], warn: Callable[[str], None]) -> tuple[dict, str]:
    """``(inputs, zone)``: the breakdown's captured inputs
    (:func:`slurmkit.report.period_breakdown.captured_inputs`) read in the captures' zone, and
    that zone (``--tz``, else the store's recorded one, else UTC, warned about)."""
    from slurmkit.report import period_breakdown as PB

    zone, how = PB.capture_zone(opts.store, scope[0] if scope else "_default", opts.period.window, opts.tz)
    local = PB.local_times(opts.events, opts.reservations, opts.sreport_utilization, opts.sreport_accounts)
    if local and how.startswith("assumed"):
        warn("time zone UTC assumed for --events / --reservations / --sreport-*: sacctmgr and sreport print the "
             "local time of the host they ran on, and "
             + (f"no --tz was given, while {how.split(': ', 1)[1]} (give --tz)" if ": " in how else
                "neither --tz nor the store (report store --tz) names it"))
    inputs = PB.captured_inputs(opts.events, opts.reservations, opts.nodes, opts.assoc_tree, tz=zone)
    if local:
        inputs["source"] += f"; times read in {zone} ({how})"
        inputs["time_zone"] = zone
    return inputs, zone


def breakdown_inputs(opts: PeriodOptions, warn: Callable[[str], None]) -> tuple[dict | None, dict | None]:
    """``(sections, inputs)``: the period report's ``sections=``
    (:func:`slurmkit.report.period_breakdown.breakdown_sections`): sreport's breakdown and the
    account tree from captures or read live, and their inputs (node TRES, events: the
    utilization's capacity and down time too); ``(None, None)`` when neither is asked. Raises
    :class:`~slurmkit.errors.UsageError` for options that do not go together and for a
    breakdown asked over several clusters (the inputs describe one cluster)."""
    _check_breakdown_options(opts)
    captures_given = (("--events", opts.events), ("--reservations", opts.reservations), ("--nodes", opts.nodes),
                      ("--assoc-tree", opts.assoc_tree))
    if not (opts.live_breakdown or any(v for _, v in captures_given)):
        return None, None
    from slurmkit.accounting.store import clusters as store_clusters
    from slurmkit.report import period_breakdown as PB
    from slurmkit.report.pipeline import read_capture

    # (one scontrol / sacctmgr view, or its captures, describes one cluster: a report over
    # several would set every cluster's jobs against that one's nodes)
    scope = opts.clusters if opts.clusters is not None else store_clusters(opts.store)
    if len(scope) > 1:
        given = "--live-breakdown" if opts.live_breakdown else next(o for o, v in captures_given if v)
        raise UsageError(given, f"the breakdown's inputs describe one cluster, and this report covers "
                                f"{len(scope)} ({', '.join(scope)}): give --cluster NAME for the cluster "
                                f"they come from (one report per cluster)")
    names = opts.clusters
    slurm_cluster = names[0] if names and len(names) == 1 and names[0] not in ("", "_default") else None
    if opts.live_breakdown:
        inputs, zone = PB.live_inputs(opts.period.window, slurm_cluster, now=opts.now), "UTC"
    else:
        inputs, zone = _captured_inputs(opts, scope, warn)
    sreport = None
    if opts.use_sreport:
        from slurmkit.report.live import sreport_text

        def sreport(kind, w):
            return sreport_text(kind, w.start, w.end, slurm_cluster)
    captures = {k: (str(p), read_capture(p)) for k, p in (("utilization", opts.sreport_utilization),
                                                           ("AccountUtilizationByUser", opts.sreport_accounts)) if p}
    return PB.breakdown_sections(opts.store, inputs, now=opts.now, sreport=sreport, captures=captures, tz=zone), inputs


def energy_inputs(opts: PeriodOptions, inputs: dict | None, warn: Callable[[str], None]):
    """``(assumptions, spool frame or None, capacity)``: the energy assumptions as ``report
    weekly`` reads them (:func:`slurmkit.report.pipeline.report_assumptions`: the site profile's,
    each option over it), the spool only when ``opts.spool`` names one (never the host's own
    spool folder unasked: it would turn the day sums off for every period report there; lines
    that do not parse go to ``warn``), and the capacity of
    :func:`slurmkit.report.period.capacity_inputs`."""
    from slurmkit.report.period import capacity_inputs
    from slurmkit.report.pipeline import WeeklyOptions, read_spool_frame, report_assumptions

    wopts = WeeklyOptions(profile=opts.profile, pue=opts.pue, carbon_g_per_kwh=opts.carbon_g_per_kwh,
                          price_per_kwh=opts.price_per_kwh, price_per_gpu_hour=opts.price_per_gpu_hour,
                          currency=opts.currency, gpu_tdp_w=opts.gpu_tdp_w,
                          trust_slurm_energy=opts.trust_slurm_energy, spool=opts.spool)
    spool_df = read_spool_frame(wopts, warn)[0] if opts.spool else None
    capacity = capacity_inputs(opts.capacity_gpus,
                               "--capacity-gpus (given)" if opts.capacity_gpus is not None else None,
                               opts.profile, inputs, opts.live_breakdown)
    return report_assumptions(wopts), spool_df, capacity


@dataclass
class PeriodResult:
    """``report``: the period report (:func:`slurmkit.report.period.period_report`'s dict);
    ``written``: the files written (paths, in the order written)."""

    report: dict
    written: list


def _store_warnings(opts: PeriodOptions, report: dict, warn: Callable[[str], None]) -> None:
    """Warns about each day the store's manifest lists without its file, and about day sums
    out of date (every row read instead)."""
    from slurmkit.accounting.store import Store

    for c, v in report["store"]["clusters"].items():
        for lost in Store(opts.store, c).lost_files(v.get("days_missing") or []):
            warn(f"{lost}: missing, while the store's manifest lists its day: the day is counted as missing")
        if v.get("day_sums") == "stale":
            warn(f"the day sums of cluster {c} are out of date (a day stored, copied or edited since they were "
                 f"made): every row was read, the same figures, slower; 'slurmkit report day-sums --store "
                 f"{opts.store}' brings them up to date")


def run_period(opts: PeriodOptions, warn: Callable[[str], None] | None = None,
               progress: Callable[[str], None] | None = None) -> PeriodResult:
    """Computes the period report of ``opts`` and writes its files (see the module docstring).

    ``warn``: gets each warning (one line, no prefix); ``progress``: gets the steps of a long
    run (None: silent). Raises :class:`~slurmkit.errors.UsageError` for options that do not go
    together, :class:`~slurmkit.errors.InputError` for unreadable inputs (the store's files,
    captures), as :func:`slurmkit.report.period.period_report` does."""
    from slurmkit.report.period import DEFAULT_MEMORY_LIMIT, period_report, write_period

    warn = warn or (lambda msg: None)
    sections, inputs = breakdown_inputs(opts, warn)
    assumptions, spool_df, capacity = energy_inputs(opts, inputs, warn)
    report = period_report(opts.store, opts.period, opts.clusters, now=opts.now,
                           memory_limit=opts.memory_limit or DEFAULT_MEMORY_LIMIT, temp_dir=opts.temp_dir,
                           progress=progress, sections=sections, use_sums=opts.use_sums, assumptions=assumptions,
                           spool=spool_df, capacity=capacity)
    written = write_period(report, opts.outdir or f"slurmkit-period-{opts.period.label.replace(':', '')}",
                           list(opts.formats))
    _store_warnings(opts, report, warn)
    return PeriodResult(report, written)
