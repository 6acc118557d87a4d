"""``slurmkit report weekly``: utilization and energy report from Slurm accounting.

Maps the flags onto :class:`slurmkit.report.pipeline.WeeklyOptions`, runs
:func:`slurmkit.report.pipeline.weekly_report` and prints a summary (or the JSON report). Bad input (a
captured sacct file that cannot be read, a bad window, a bad profile) exits 2 with a message
naming the file and line; a failed Slurm command exits 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from slurmkit.cli import want_json
from slurmkit.cli.options import site_option
from slurmkit.errors import InputError


@click.group("report")
def cli():
    """Utilization and energy reports from Slurm accounting (sacct)."""


def assumption_options(f):
    """The energy and cost assumptions' options, the same on ``report weekly`` and ``report
    period`` (each overrides the site profile's ``[report]`` value; read by
    :func:`slurmkit.report.energy.assumptions_from_profile` and the pipelines)."""
    for opt in reversed((
            click.option("--pue", type=float, help="Power usage effectiveness (overrides the profile)."),
            click.option("--carbon-g-per-kwh", type=float, help="Carbon intensity, g CO2e per kWh."),
            click.option("--price-per-kwh", type=float, help="Energy price per kWh."),
            click.option("--price-per-gpu-hour", type=float, help="Price per GPU-hour."),
            click.option("--currency", help="Currency of the prices."),
            click.option("--gpu-tdp-w", type=float, help="GPU TDP in W for modelled energy (all GPU types)."),
            click.option("--trust-slurm-energy/--no-trust-slurm-energy", default=True, show_default=True,
                         help="Use Slurm's non-zero energy (ConsumedEnergyRaw, AllocTRES and the steps' "
                              "energy=)."))):
        f = opt(f)
    return f


def breakdown_capture_options(events_help: str, nodes_default: str):
    """The captures of sreport's breakdown and the account tree, shared by ``report weekly``
    and ``report period``: ``--events``, ``--reservations``, ``--nodes``, ``--assoc-tree``."""
    opts = [
        click.option("--events", "events", type=click.Path(dir_okay=False), help=events_help),
        click.option("--reservations", "reservations", type=click.Path(dir_okay=False),
                     help="Captured 'sacctmgr -P show reservation format=Name,ID,Flags,NodeNames,TRES,TimeStart,"
                          "TimeEnd,Associations' (or 'scontrol show reservation'): sreport's breakdown of captures."),
        click.option("--nodes", "nodes", type=click.Path(dir_okay=False),
                     help=f"Captured 'scontrol show -o nodes': node CPUs and GPUs for the breakdown {nodes_default}."),
        click.option("--assoc-tree", "assoc_tree", type=click.Path(dir_okay=False),
                     help="Captured 'sacctmgr -P show assoc tree format=Cluster,Account,User,ParentName,ID': the "
                          "account tree."),
    ]

    def apply(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return apply


@cli.command("weekly")
@click.option("--week", help="ISO week, e.g. 2026-W48 (Monday 00:00 UTC to the next Monday).")
@click.option("--start", help="Window start: ISO date or datetime, UTC unless a zone is given.")
@click.option("--end", help="Window end (exclusive); default start + 7 days.")
@click.option("--cluster", help="Slurm cluster (sacct -M); also names the store's folder.")
@click.option("--format", "formats", default="html,md,csv,json", show_default=True,
              help="Comma list of html, md, csv, json, parquet.")
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False),
              help="Output folder (default ./slurmkit-report-<start date>).")
@click.option("--mail-to", multiple=True, help="Mail the HTML report to ADDR (sendmail -t).")
@click.option("--from-sacct", "from_sacct", multiple=True, type=click.Path(dir_okay=False),
              help="Read captured sacct output instead of running sacct (repeatable).")
@click.option("--sacct-fields", help="Field list of a capture without header: a file or a comma list.")
@click.option("--delimiter", help="Delimiter of the capture (default: detected).")
@click.option("--tz", default=None, help="Zone of the capture's times when they carry none (sacct prints the "
              "local time of the host it ran on). Default: UTC, assumed, with a warning.")
@site_option("site_spec", help="Site profile (file or shipped name) for TDP, PUE, carbon, prices, capacity.",
             alias_envvar="SLURMKIT_PROFILE")
@breakdown_capture_options("Captured 'sacctmgr -P show event' output: node downtime and drains with their reasons "
                           "(live: sacctmgr is asked).", "(default: the profile)")
@click.option("--sreport-utilization", "sreport_utilization", type=click.Path(dir_okay=False),
              help="Captured 'sreport -P cluster utilization -T cpu,gres/gpu' to compare the breakdown with.")
@click.option("--sreport-accounts", "sreport_accounts", type=click.Path(dir_okay=False),
              help="Captured 'sreport -P cluster AccountUtilizationByUser -T cpu,gres/gpu' to compare the account tree with.")
@click.option("--spool", type=click.Path(), help="Hook energy spool (energy.jsonl or a folder of *.jsonl).")
@click.option("--prometheus", "prometheus_url", metavar="URL",
              help="Prometheus with the hooks' metrics: measured energy and GPU utilization per job where the spool has none.")
@click.option("--store", "store_dir", type=click.Path(file_okay=False), help="Parquet store folder.")
@click.option("--no-store", is_flag=True, help="Pull every day from sacct; keep nothing.")
@assumption_options
@click.option("--capacity-gpus", type=float, help="GPUs in the cluster (default: profile or scontrol).")
@click.option("--sreport/--no-sreport", "use_sreport", default=True, show_default=True,
              help="Live: reconcile with sreport (GPU-hours, sreport's breakdown, the account tree).")
@click.option("--rollup", is_flag=True, help="Run 'sacctmgr -i rollup' before sreport (root).")
@click.option("--as-of", "as_of", metavar="TIME",
              help="When the captures were taken (ISO, UTC unless a zone is given): running jobs count up to then "
                   "(default: the latest time in the captures).")
@click.option("--trend-weeks", type=click.IntRange(0, 520), default=8, show_default=True,
              help="Per-account and per-partition trends over the last N ISO weeks, from the weekly "
                   "aggregates kept in the store (0: none).")
@click.option("--allow-skipped", is_flag=True,
              help="Exit 0 even when more rows were skipped for a problem than --max-skipped allows.")
@click.option("--allow-empty", is_flag=True,
              help="Write the report even when no row of a non-empty capture is in the window.")
@click.option("--max-skipped", type=click.FloatRange(0, 100), default=1.0, show_default=True,
              help="Percent of rows that may be skipped for a problem before the report is flagged.")
@click.option("--now", "now_s", hidden=True, help="Time running jobs are taken to end (tests).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report to stdout.")
@click.pass_context
def weekly(ctx, week, start, end, cluster, formats, outdir, mail_to, from_sacct, sacct_fields,
           delimiter, tz, site_spec, events, reservations, nodes, assoc_tree, sreport_utilization, sreport_accounts, spool, prometheus_url, store_dir, no_store, pue, carbon_g_per_kwh,
           price_per_kwh, price_per_gpu_hour, currency, gpu_tdp_w, trust_slurm_energy,
           capacity_gpus, use_sreport, rollup, as_of, trend_weeks, allow_skipped, allow_empty, max_skipped, now_s,
           as_json):
    """Weekly GPU/CPU-hours, utilization, waste, queue wait, efficiency and energy.

    Live: one sacct call per day of the window (kept in a Parquet store, so a weekly run only
    re-reads recent days). --from-sacct FILE reads captured sacct output instead.
    """
    from click.core import ParameterSource

    from slurmkit.heap import keep_freed_memory
    from slurmkit.report import render, weekly_report
    from slurmkit.report.pipeline import WeeklyOptions
    from slurmkit.report.window import make_window, parse_when

    keep_freed_memory()   # a one-shot command: reuse freed memory (fewer page faults)
    window = make_window(week, start, end) if (week or start or end) else None
    spec = site_spec
    profile = None
    if spec:
        from slurmkit.profile import load_profile

        profile = load_profile(spec)
    trust = None
    if ctx.get_parameter_source("trust_slurm_energy") in (ParameterSource.COMMANDLINE,
                                                          ParameterSource.ENVIRONMENT):
        trust = trust_slurm_energy
    opts = WeeklyOptions(
        window=window, captures=tuple(from_sacct), sacct_fields=sacct_fields, delimiter=delimiter, tz=tz or "UTC", tz_given=tz is not None, allow_empty=allow_empty,
        cluster=cluster, events=events, reservations=reservations, nodes=nodes, assoc_tree=assoc_tree,
        sreport_utilization=sreport_utilization, sreport_accounts=sreport_accounts, spool=spool, prometheus_url=prometheus_url, store_dir=store_dir, use_store=not no_store, profile=profile,
        pue=pue, carbon_g_per_kwh=carbon_g_per_kwh, price_per_kwh=price_per_kwh,
        price_per_gpu_hour=price_per_gpu_hour, currency=currency, gpu_tdp_w=gpu_tdp_w,
        trust_slurm_energy=trust, capacity_gpus=capacity_gpus, use_sreport=use_sreport, rollup=rollup,
        now=now_s or None, as_of=parse_when(as_of, "--as-of") if as_of else None, trend_weeks=trend_weeks, max_rejected_share=max_skipped / 100.0, allow_rejected=allow_skipped, formats=formats.split(","), outdir=outdir, mail_to=tuple(mail_to))
    bar = None

    def progress(done, total):
        nonlocal bar
        if bar is None and done == 0 and total > 1 and sys.stderr.isatty():
            bar = click.progressbar(length=total, label="sacct", file=sys.stderr)
            bar.__enter__()
        elif bar is not None:
            bar.update(1)

    try:
        res = weekly_report(opts, progress=progress,
                            warn=lambda msg: click.echo(f"slurmkit: warning: {msg}", err=True))
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    if not from_sacct and not no_store:
        from slurmkit.report.pipeline import default_store_dir

        _day_sums(store_dir or default_store_dir(), cluster or "")
    report = res.report
    if want_json(ctx, as_json):
        click.echo(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        t = report["totals"]
        click.echo(f"{report['window']['start']} .. {report['window']['end']}: {t['jobs']} jobs, "
                   f"{render.known(report, 'gpu_hours', t['gpu_hours'])} GPU-h"
                   + (f" ({render.requested_note(report)})" if render.requested_note(report) else "") + ", "
                   f"{render.known(report, 'cpu_hours', t['cpu_hours'])} CPU-h, "
                   f"energy {render.energy_coverage_text(t, short=True)}; "
                   f"rows read {report['data_quality']['rows_read']}, skipped "
                   f"{report['data_quality']['rows_skipped']}")
        for p in res.written:
            click.echo(f"  {p}")


@cli.command("store")
@click.option("--from-sacct", "from_sacct", multiple=True, required=True, type=click.Path(dir_okay=False),
              help="Captured sacct output (repeatable; several are merged, the latest copy of a row kept).")
@click.option("--store", "store_dir", required=True, type=click.Path(file_okay=False), help="Parquet store folder.")
@click.option("--cluster", help="The store's cluster folder (default: _default).")
@click.option("--week", help="Store only this ISO week's days.")
@click.option("--start", help="Store only days from this one: ISO date, UTC.")
@click.option("--end", help="... to this one (exclusive).")
@click.option("--sacct-fields", help="Field list of a capture without header: a file or a comma list.")
@click.option("--delimiter", help="Delimiter of the capture (default: detected).")
@click.option("--tz", default=None, help="Zone of the capture's times when they carry none (sacct prints the "
              "local time of the host it ran on). Default: UTC, assumed, with a warning; recorded in the store.")
@click.option("--as-of", "as_of", metavar="TIME",
              help="When the captures were taken (default: the latest time in them): days ending more than "
                   "an hour before it, with no running or pending job, are final.")
@click.option("--replace", is_flag=True,
              help="The days stored hold these captures' rows only: what the store held for them is dropped "
                   "(days stored with the wrong --tz); with --start/--end, the store's days of that span after "
                   "the capture time are removed too. Without it each day is merged job by job.")
@click.option("--now", "now_s", metavar="TIME",
              help="The current time (default: the clock's): days starting at or after it are not stored.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (every day's counts).")
@click.pass_context
def store(ctx, from_sacct, store_dir, cluster, week, start, end, sacct_fields, delimiter, tz, as_of, replace, now_s,
          as_json):
    """Store captured sacct output in the Parquet store's days, as daily live pulls would have
    listed them (a job in every UTC day it overlaps), so that `report period` can be built from
    captures.

    Every day from the captures' first to the day they were taken is stored (an empty day
    too: the capture covers it). Each day is merged job by job with what the store holds (by
    cluster, JobIDRaw, Submit and Start): jobs the day lacks are added, a stored copy is
    replaced by a later capture's, and the store's other jobs are kept. Prints the job rows
    added, replaced and kept per day (a summary line over many days).
    """
    from slurmkit.report.pipeline import WeeklyOptions, fill_store
    from slurmkit.report.window import make_window, parse_when

    window = make_window(week, start, end) if (week or start or end) else None
    opts = WeeklyOptions(window=window, captures=tuple(from_sacct), sacct_fields=sacct_fields, delimiter=delimiter,
                         tz=tz or "UTC", tz_given=tz is not None, cluster=cluster,
                         as_of=parse_when(as_of, "--as-of") if as_of else None)
    res = fill_store(opts, store_dir, warn=lambda msg: click.echo(f"slurmkit: warning: {msg}", err=True),
                     replace=replace, now=parse_when(now_s, "--now") if now_s else None)
    _warn_skipped(res["data_quality"])
    res["day_sums"] = _day_sums(store_dir, cluster or "")
    if want_json(ctx, as_json):
        click.echo(json.dumps(res, indent=1))
        return
    for line in store_summary(res):
        click.echo(line)


#: ``report store`` lists each day's counts up to this many days; past it, a summary line.
STORE_TABLE_DAYS = 14


def store_summary(res: dict) -> list[str]:
    """The lines ``report store`` prints for :func:`~slurmkit.report.pipeline.fill_store`'s
    result ``res``: the days written and the zone; the job rows added, replaced and kept (a
    job over several days counts in each), per day as a table up to :data:`STORE_TABLE_DAYS`
    days, else in total; days not stored (after now) and removed (--replace); the day sums."""
    w, where = res["written"], res["store"]
    out = [f"{where}: {len(w)} day(s) written" + (f" ({w[0]} .. {w[-1]})" if w else "")
           + f", {len(res['final'])} final, {len(w) - len(res['final'])} not final (as of {res['as_of']})"
           + (f", {len(res['unchanged'])} unchanged" if res["unchanged"] else "")
           + f"; times read in {res['time_zone']}" + ("" if res["time_zone_given"] else " (assumed)")]
    t, days = res["totals"], res["days"]
    removed = f", {t['removed']:,} removed (--replace)" if res.get("replace") else ""
    out.append(f"{where}: job rows added {t['added']:,}, replaced {t['replaced']:,}, kept {t['kept']:,}"
               + (f", not newer than the store's {t['not_newer']:,}" if t["not_newer"] else "") + removed
               + " (a job counts in each day it ran in)")
    if days and len(days) <= STORE_TABLE_DAYS:
        cols = ["added", "replaced", "kept", "not_newer"] + (["removed"] if res.get("replace") else [])
        head = ["day", *cols, "rows", "final", "written"]
        rows = [[d, *(f"{c[k]:,}" for k in cols), f"{c['rows']:,}", "yes" if c["final"] else "no",
                 "yes" if c["written"] else "no"] for d, c in days.items()]
        width = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        for r in [head, *rows]:
            out.append("  " + "  ".join(str(v).ljust(width[i]) if i == 0 else str(v).rjust(width[i])
                                        for i, v in enumerate(r)).rstrip())
    elif days:
        out.append(f"{where}: {len(days)} day(s): --json lists each day's counts")
    if res["after_now"]:
        a = res["after_now"]
        out.append(f"{where}: {len(a)} day(s) after now ({res['now']}) not stored: {a[0]} .. {a[-1]}")
    if res["forgotten"]:
        f = res["forgotten"]
        out.append(f"{where}: {len(f)} day(s) after the capture time removed (--replace): {f[0]} .. {f[-1]}")
    ds = res.get("day_sums")
    if ds:
        out.append(f"{where}: day sums for the period report: {ds['plain_rows']:,} of {ds['rows']:,} "
                   f"rows summed ({ds['summed']} day(s) summed now)")
    return out


def _warn_skipped(dq: dict) -> None:
    """Warn of the rows a command skipped for a problem (a cut or damaged line of a capture):
    how many, and the first one's file, line and reason (every one is in ``data_quality``)."""
    from slurmkit.accounting.quality import first_problem, rejected_text

    if dq and dq.get("rows_rejected"):
        first = first_problem(dq)
        click.echo(f"slurmkit: warning: {rejected_text(dq)}" + (f"; {first}" if first else ""), err=True)


def _day_sums(store_dir, cluster: str, unreadable_warns: bool = True, memory_limit: str | None = None,
              temp_dir: str | None = None) -> dict | None:
    """Bring the store cluster's day sums up to date after days were stored (the period
    report's: docs/report.md, *Day sums*); a failure is a warning (the period report then
    reads every row), never lost days. Returns :func:`~slurmkit.report.day_sums.summarize`'s
    result, None when it failed. ``unreadable_warns`` False: a store file that cannot be read
    raises its InputError (exit 2, naming the file) instead of warning."""
    import duckdb

    from slurmkit.report.day_sums import summarize

    try:
        return summarize(store_dir, cluster, memory_limit=memory_limit, temp_dir=temp_dir)
    except (OSError, duckdb.Error, InputError) as exc:
        if isinstance(exc, InputError) and not unreadable_warns:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        click.echo(f"slurmkit: warning: day sums of {store_dir} not updated ({first}); the period report reads "
                   "every row of the days stored until 'slurmkit report day-sums' succeeds", err=True)
        return None


@cli.command("day-sums")
@click.option("--store", "store_dir", type=click.Path(file_okay=False),
              help="Parquet store folder (default: the weekly report's).")
@click.option("--cluster", help="Store cluster(s), comma list (default: every cluster in the store).")
@click.option("--memory-limit", help="DuckDB's memory limit (default 2GB, as report period's); past it the passes "
                                     "spill to --temp-dir.")
@click.option("--temp-dir", type=click.Path(file_okay=False), help="DuckDB's spill folder (default: the system's temp).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def day_sums(ctx, store_dir, cluster, memory_limit, temp_dir, as_json):
    """Bring the store's day sums up to date (what report weekly and report store do after
    storing days): for a store copied, edited or filled by another writer, whose period reports
    say 'day sums: stale'. Days unchanged are left as they are (docs/report.md, Day sums)."""
    from slurmkit.accounting.store import clusters as store_clusters
    from slurmkit.report.pipeline import default_store_dir

    root = store_dir or default_store_dir()
    have = store_clusters(root) if Path(root).is_dir() else []
    names = [c.strip() or "_default" for c in cluster.split(",")] if cluster else have
    lost = [c for c in names if c not in have]
    if lost or not names:
        raise InputError(str(root), None, (f"cluster(s) {', '.join(lost)} not in the store" if lost else
                                           "no cluster= folders in it: not a store, or an empty one")
                         + f" (it holds: {', '.join(have) or 'none'})")
    out = {}
    for c in names:
        res = _day_sums(root, c, unreadable_warns=False, memory_limit=memory_limit, temp_dir=temp_dir)
        if res is None:
            ctx.exit(1)
        out[c] = res
    if want_json(ctx, as_json):
        click.echo(json.dumps(out, indent=1))
        return
    for c, r in out.items():
        click.echo(f"cluster={c}: {r['days']} day(s), {r['summed']} summed now in {r['seconds']:.1f} s; "
                   f"{r['plain_rows']:,} of {r['rows']:,} stored rows (a job's copy in each day it ran counts) "
                   f"in the sums, {r['direct_rows']:,} read as one copy per job")


@cli.command("jobs")
@click.argument("job_ids", nargs=-1)
@click.option("--user", "users", multiple=True, help="Only this user's jobs (repeatable).")
@click.option("--account", "accounts", multiple=True, help="Only this account's jobs (repeatable).")
@click.option("--state", "states", help="Only jobs in these states: a comma list (COMPLETED,FAILED; any case).")
@click.option("--week", help="Jobs that ran in this ISO week, e.g. 2026-W48 (UTC).")
@click.option("--start", help="Jobs that ran at or after this time: ISO date or datetime, UTC unless a zone is given.")
@click.option("--end", help="... and before this time (exclusive); default start + 7 days.")
@click.option("--from-sacct", "from_sacct", multiple=True, type=click.Path(dir_okay=False),
              help="Read captured sacct output instead of running sacct (repeatable).")
@click.option("--sacct-fields", help="Field list of a capture without header: a file or a comma list.")
@click.option("--delimiter", help="Delimiter of the capture (default: detected).")
@click.option("--tz", default=None, help="Zone of the capture's times when they carry none (default: UTC, assumed).")
@click.option("--as-of", "as_of", metavar="TIME", help="When the captures were taken: running jobs are measured up to then.")
@click.option("--store", "store_dir", type=click.Path(file_okay=False),
              help="Read the window's days from this Parquet store (no sacct).")
@click.option("--cluster", help="Slurm cluster (sacct -M; the store's folder; with --store, default: every "
                                "cluster in the store).")
@click.option("--spool", type=click.Path(), help="Hook energy spool (energy.jsonl or a folder of *.jsonl).")
@site_option("site_spec", help="Site profile (file or shipped name) for the GPU TDP of modelled energy.",
             alias_envvar="SLURMKIT_PROFILE")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
@click.option("--now", "now_s", hidden=True, help="Time running jobs are measured up to (tests).")
@click.pass_context
def jobs(ctx, job_ids, users, accounts, states, week, start, end, from_sacct, sacct_fields, delimiter, tz,
         as_of, store_dir, cluster, spool, site_spec, fmt, output, now_s):
    """One line per job, like reportseff: state, elapsed, time-limit, CPU and memory efficiency,
    GPUs, GPU utilization and memory, energy and its source ("unknown" where not known).

    Live: sacct over the window (default: the last full ISO week; give --start for older jobs).
    JOBID: a JobID as sacct prints it (123_4), its JobIDRaw, or a job (123: all its tasks).
    """
    from slurmkit.cli.output import write_output
    from slurmkit.report import jobs as J
    from slurmkit.report.pipeline import JobsOptions, load_jobs
    from slurmkit.report.window import make_window, parse_when

    window = make_window(week, start, end) if (week or start or end) else None
    profile = None
    if site_spec:
        from slurmkit.profile import load_profile

        profile = load_profile(site_spec)
    opts = JobsOptions(window=window, captures=tuple(from_sacct), sacct_fields=sacct_fields, delimiter=delimiter,
                       tz=tz or "UTC", tz_given=tz is not None,
                       as_of=parse_when(as_of, "--as-of") if as_of else None, cluster=cluster,
                       store_dir=store_dir, spool=spool, profile=profile, now=now_s or None)
    view, _allocs, dq = load_jobs(opts, warn=lambda msg: click.echo(f"slurmkit: warning: {msg}", err=True))
    _warn_skipped(dq)
    sel = J.select(view, users=users, accounts=accounts,
                   states=[s.strip() for s in states.split(",") if s.strip()] if states else (),
                   job_ids=job_ids, window=window)
    if job_ids:
        missing = [j for j in job_ids if not len(J.select(sel, job_ids=[j]))]
        why: dict[str, list[str]] = {}
        for j in missing:
            why.setdefault(J.why_not_listed(view, j, window, users=users, accounts=accounts, states=[
                s.strip() for s in states.split(",") if s.strip()] if states else ()), []).append(j)
        for reason, ids in why.items():
            click.echo(f"slurmkit: warning: {reason}: {', '.join(ids)}", err=True)
    if not len(sel):
        click.echo(f"slurmkit: warning: no job matched ({len(view)} job(s) read"
                   + (f" from the store {store_dir}" if store_dir and not from_sacct else "") + ")", err=True)
    if fmt == "json":
        text = json.dumps({"jobs": J.to_rows(sel), "columns": J.COLUMNS, "data_quality": dq},
                          indent=1, ensure_ascii=False) + "\n"
    elif fmt == "csv":
        text = J.to_csv(sel)
    else:
        text = J.to_table(sel)
    write_output(text, output)


def _echo_period_summary(report: dict, written) -> None:
    """``report period``'s lines on stdout: the period's totals, the days read and missing (per
    cluster with several), then each file written."""
    from slurmkit.report import render
    from slurmkit.report.period_text import period_span

    t = report["totals"]

    def f(x):
        return "unknown" if x is None else render.fmt(x)

    future = report["store"].get("days_future") or []
    several = len(report["store"]["clusters"]) > 1
    click.echo(f"{period_span(report['period'])}: {f(t['jobs'])} job{'' if t['jobs'] == 1 else 's'}, "
               f"{f(t['gpu_hours'])} GPU-h, {f(t['cpu_hours'])} CPU-h, energy {render.energy_coverage_text(t, short=True)}; "
               f"{report['store']['days']} day(s) from the store, "
               + ("missing: " + ", ".join(f"{c} {len(v['days_missing'])}" for c, v in report["store"]["clusters"].items())
                  if several else f"{len(report['store']['days_missing'])} missing")
               + (f", {len(future)} not yet (after {report['as_of']})" if future else "")
               + (f" ({len(report['store']['days_after_now'])} of them stored and not read: give a later --now "
                  "to read them)" if report["store"].get("days_after_now") else ""))
    for p in written:
        click.echo(f"  {p}")


@cli.command("period")
@click.option("--month", help="Calendar month, e.g. 2026-11 (UTC).")
@click.option("--quarter", help="Quarter, e.g. 2026-Q4 (UTC).")
@click.option("--year", help="Year, e.g. 2026 (UTC).")
@click.option("--start", help="Period start: ISO date or datetime, UTC unless a zone is given (with --end).")
@click.option("--end", help="Period end (exclusive).")
@click.option("--by", type=click.Choice(["week", "month"]),
              help="Breakdown inside the period (default: weeks for a month or up to 62 days, else months).")
@click.option("--cluster", help="Store cluster(s), comma list (default: every cluster in the store); "
                                "with several, each also on its own (by_cluster).")
@click.option("--store", "store_dir", type=click.Path(file_okay=False),
              help="Parquet store folder (default: the weekly report's).")
@click.option("--format", "formats", default="json,csv,md", show_default=True,
              help="Comma list of json, csv, md, html (period.html: per-part plots by account and partition).")
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False),
              help="Output folder (default ./slurmkit-period-<label>).")
@click.option("--memory-limit", help="DuckDB's memory limit (default 2GB: the period report's DEFAULT_MEMORY_LIMIT); "
                                     "past it the aggregation spills to --temp-dir.")
@click.option("--temp-dir", type=click.Path(file_okay=False), help="DuckDB's spill folder (default: the system's temp).")
@click.option("--no-day-sums", "no_day_sums", is_flag=True,
              help="Read every stored row, not the day sums the store keeps (the same figures, slower: a check "
                   "of the sums; docs/report.md, Day sums).")
@breakdown_capture_options("Captured 'sacctmgr -P show event format=NodeName,TimeStart,TimeEnd,State,TRES,Reason' "
                           "over the period: sreport's breakdown.", "(without it no breakdown; the account tree still "
                           "comes)")
@click.option("--tz", default=None,
              help="Zone of the times in --events, --reservations and sreport captures' banners (sacctmgr and "
                   "sreport print the local time of the host they ran on). Default: the zone report store --tz "
                   "recorded for the cluster's days, else UTC, assumed, with a warning.")
@click.option("--live-breakdown", is_flag=True,
              help="Read the breakdown's inputs live (scontrol show nodes, sacctmgr show event / reservation / "
                   "assoc tree), as report weekly does.")
@click.option("--sreport", "use_sreport", is_flag=True,
              help="With --live-breakdown: put sreport's own breakdown and AccountUtilizationByUser beside ours, "
                   "per part and over the period.")
@click.option("--sreport-utilization", "sreport_utilization", type=click.Path(dir_okay=False),
              help="Captured 'sreport -P cluster utilization -T cpu,gres/gpu start=... end=...' of the period or "
                   "of one part (its banner names which; without one, -n: the period) to compare the breakdown "
                   "with (needs --nodes).")
@click.option("--sreport-accounts", "sreport_accounts", type=click.Path(dir_okay=False),
              help="Captured 'sreport -P cluster AccountUtilizationByUser -T cpu,gres/gpu start=... end=...' (as "
                   "--sreport-utilization) to compare the account tree with (needs --assoc-tree).")
@site_option("site_spec", help="Site profile (file or shipped name) for TDP, PUE, carbon, prices, capacity "
                                "(as report weekly).", alias_envvar="SLURMKIT_PROFILE")
@click.option("--capacity-gpus", type=float,
              help="GPUs in the cluster, the utilization's capacity (default: the profile's, else the node list of "
                   "--nodes or --live-breakdown).")
@click.option("--spool", type=click.Path(), help="Hook energy spool (energy.jsonl or a folder of *.jsonl): measured "
                                                 "energy (the day sums are then not read).")
@assumption_options
@click.option("--now", "now_s", metavar="TIME",
              help="The report's time (default: the clock's): running jobs end at it at the latest, and the "
                   "store's days starting at or after it are not read (the output says how many). Give it for "
                   "figures that do not move between runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report to stdout.")
@click.pass_context
def period(ctx, month, quarter, year, start, end, by, cluster, store_dir, formats, outdir, memory_limit,
           temp_dir, no_day_sums, events, reservations, nodes, assoc_tree, tz, live_breakdown, use_sreport, sreport_utilization,
           sreport_accounts, site_spec, capacity_gpus, spool, pue, carbon_g_per_kwh, price_per_kwh, price_per_gpu_hour,
           currency, gpu_tdp_w, trust_slurm_energy, now_s, as_json):
    """GPU/CPU-hours, energy, CO2e, cost, utilization, efficiency, outcomes and waits over a month, quarter, year or span.

    Read from the Parquet store only (days the weekly report pulled): nothing is asked of
    sacct, and days missing from the store are listed. Aggregated in DuckDB over the store's
    files, so memory stays within --memory-limit (plus DuckDB's own) whatever the period.
    sreport's breakdown and the account tree (per part and over the period) with captures
    (--events, --reservations, --nodes, --assoc-tree) or --live-breakdown. Energy, CO2e and cost
    under the weekly report's assumptions (--site and the options over it); utilization of the
    capacity of --capacity-gpus, the site profile or the node list read for the breakdown.
    """
    from click.core import ParameterSource

    from slurmkit.report import period_pipeline as PP
    from slurmkit.report.period import parse_period

    per = parse_period(month, quarter, year, start, end, by)
    progress = None
    if sys.stderr.isatty():
        def progress(msg):
            click.echo(f"period {per.label}: {msg}", err=True)
    profile = None
    if site_spec:
        from slurmkit.profile import load_profile

        profile = load_profile(site_spec)
    trust = (trust_slurm_energy if ctx.get_parameter_source("trust_slurm_energy") in
             (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT) else None)
    opts = PP.PeriodOptions(
        period=per, clusters=PP.cluster_names(cluster), store_dir=store_dir, formats=PP.check_formats(formats),
        outdir=outdir, memory_limit=memory_limit, temp_dir=temp_dir, use_sums=not no_day_sums, events=events,
        reservations=reservations, nodes=nodes, assoc_tree=assoc_tree, tz=tz, live_breakdown=live_breakdown,
        use_sreport=use_sreport, sreport_utilization=sreport_utilization, sreport_accounts=sreport_accounts,
        profile=profile, capacity_gpus=capacity_gpus, spool=spool, pue=pue, carbon_g_per_kwh=carbon_g_per_kwh,
        price_per_kwh=price_per_kwh, price_per_gpu_hour=price_per_gpu_hour, currency=currency, gpu_tdp_w=gpu_tdp_w,
        trust_slurm_energy=trust, now=now_s or None)
    res = PP.run_period(opts, warn=lambda msg: click.echo(f"slurmkit: warning: {msg}", err=True), progress=progress)
    report, written = res.report, res.written
    if want_json(ctx, as_json):
        click.echo(json.dumps(report, indent=1, ensure_ascii=False))
        return
    _echo_period_summary(report, written)
