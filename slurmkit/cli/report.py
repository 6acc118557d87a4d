"""``slurmkit report weekly``: utilization and energy report from Slurm accounting.

Parses flags, calls :mod:`slurmkit.accounting` and :mod:`slurmkit.report`, writes files. Bad
input (a captured sacct file that cannot be read, a bad window, a bad profile) exits 2 with a
message naming the file and line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from slurmkit.cli import want_json


def _default_store() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "slurmkit", "accounting")


def _load_profile(spec: str):
    """``(profile, path)``: through ``slurmkit.profile.load_profile`` when it exists, else the
    TOML read as a dict (a shipped name resolves to ``site/<name>.toml``)."""
    try:
        from slurmkit.profile import load_profile  # type: ignore[attr-defined]
    except ImportError:
        load_profile = None
    if load_profile is not None:
        prof = load_profile(spec)
        return prof, getattr(prof, "source", spec)
    import tomllib

    path = Path(spec)
    if not path.exists():
        import slurmkit.site as site_pkg

        path = Path(site_pkg.__file__).parent / f"{spec}.toml"
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh), str(path)
    except OSError as exc:
        raise click.UsageError(f"{spec}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise click.UsageError(f"{path}: {exc}") from None


class _Bad(click.ClickException):
    exit_code = 2


@click.group("report")
def cli():
    """Utilization and energy reports from Slurm accounting (sacct)."""


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
@click.option("--tz", default="UTC", show_default=True, help="Zone of the capture's times when they carry none.")
@click.option("--profile", "profile_spec", envvar="SLURMKIT_PROFILE",
              help="Site profile (file or shipped name) for TDP, PUE, carbon, prices, capacity.")
@click.option("--spool", type=click.Path(), help="Hook energy spool (energy.jsonl or a folder of *.jsonl).")
@click.option("--prometheus", "prometheus_url", metavar="URL",
              help="Prometheus with the hooks' metrics: measured energy and GPU utilization per job where the spool has none.")
@click.option("--store", "store_dir", type=click.Path(file_okay=False), help="Parquet store folder.")
@click.option("--no-store", is_flag=True, help="Pull every day from sacct; keep nothing.")
@click.option("--pue", type=float, help="Power usage effectiveness (overrides the profile).")
@click.option("--carbon-g-per-kwh", type=float, help="Carbon intensity, g CO2e per kWh.")
@click.option("--price-per-kwh", type=float, help="Energy price per kWh.")
@click.option("--price-per-gpu-hour", type=float, help="Price per GPU-hour.")
@click.option("--currency", help="Currency of the prices.")
@click.option("--gpu-tdp-w", type=float, help="GPU TDP in W for modelled energy (all GPU types).")
@click.option("--trust-slurm-energy/--no-trust-slurm-energy", default=True, show_default=True,
              help="Use non-zero ConsumedEnergyRaw.")
@click.option("--capacity-gpus", type=float, help="GPUs in the cluster (default: profile or scontrol).")
@click.option("--sreport/--no-sreport", "use_sreport", default=True, show_default=True,
              help="Reconcile with sreport (live only).")
@click.option("--rollup", is_flag=True, help="Run 'sacctmgr -i rollup' before sreport (root).")
@click.option("--now", "now_s", hidden=True, help="Time running jobs are taken to end (tests).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report to stdout.")
@click.pass_context
def weekly(ctx, week, start, end, cluster, formats, outdir, mail_to, from_sacct, sacct_fields,
           delimiter, tz, profile_spec, spool, prometheus_url, store_dir, no_store, pue, carbon_g_per_kwh,
           price_per_kwh, price_per_gpu_hour, currency, gpu_tdp_w, trust_slurm_energy,
           capacity_gpus, use_sreport, rollup, now_s, as_json):
    """Weekly GPU/CPU-hours, utilization, waste, queue wait, efficiency and energy.

    Live: one sacct call per day of the window (kept in a Parquet store, so a weekly run only
    re-reads recent days). --from-sacct FILE reads captured sacct output instead.
    """
    import pandas as pd

    from slurmkit.heap import keep_freed_memory

    keep_freed_memory()   # a one-shot command: reuse freed memory (fewer page faults)
    from slurmkit.accounting.quality import DataQuality
    from slurmkit.accounting.frame import JobRows, load_sacct
    from slurmkit.accounting.read import AccountingInputError, read_field_list
    from slurmkit.report import energy as E
    from slurmkit.report import render
    from slurmkit.report.capacity import gpus_per_node_profile
    from slurmkit.report.weekly import build_report
    from slurmkit.report.window import Window, WindowError, make_window
    from slurmkit.slurm.commands import SlurmError

    fmts = [f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in fmts if f not in render.FORMATS]
    if bad:
        raise _Bad(f"--format: unknown {', '.join(bad)} (choose from {', '.join(render.FORMATS)})")
    now = pd.Timestamp(now_s, tz="UTC") if now_s else None
    try:
        window = make_window(week, start, end)
    except WindowError as exc:
        raise _Bad(str(exc)) from None

    # assumptions: profile, then CLI
    profile = None
    if profile_spec:
        try:
            profile, ppath = _load_profile(profile_spec)
        except ValueError as exc:  # ProfileError names file and key
            raise _Bad(str(exc)) from None
        a = E.assumptions_from_profile(profile, ppath)
    else:
        a = E.Assumptions()
    for key, val in (("pue", pue), ("carbon_g_per_kwh", carbon_g_per_kwh),
                     ("price_per_kwh", price_per_kwh), ("price_per_gpu_hour", price_per_gpu_hour),
                     ("currency", currency), ("default_tdp_w", gpu_tdp_w)):
        if val is not None:
            setattr(a, key, val)
            a.origin[key] = "--" + key.replace("_", "-").replace("default-tdp-w", "gpu-tdp-w")
    a.trust_slurm = trust_slurm_energy
    from click.core import ParameterSource

    if ctx.get_parameter_source("trust_slurm_energy") in (ParameterSource.COMMANDLINE,
                                                          ParameterSource.ENVIRONMENT):
        a.origin["trust_slurm_energy"] = ("--trust-slurm-energy" if trust_slurm_energy
                                          else "--no-trust-slurm-energy")
    else:
        a.origin["trust_slurm_energy"] = "default"

    spool_df, spool_problems = None, []
    spool_path = spool or ("/var/spool/slurmkit" if os.path.isdir("/var/spool/slurmkit") else None)
    if spool_path:
        spool_df, spool_problems = E.read_spool(spool_path)
        for p in spool_problems[:20]:
            click.echo(f"slurmkit: warning: spool: {p}", err=True)

    previous = None
    sreport_h = recon_w = None
    down = None
    cap = capacity_gpus
    if cap is None and profile is not None:
        cap = float(sum(gpus_per_node_profile(profile).values())) or None
    try:
        if from_sacct:
            fields = None
            if sacct_fields:
                text = Path(sacct_fields).read_text() if os.path.exists(sacct_fields) else sacct_fields
                fields = read_field_list(text)
            rows_l, dq = [], DataQuality()
            for f in from_sacct:
                frows, fdq = load_sacct(f, None, fields, delimiter, cluster=cluster or "", tz=tz)
                rows_l.append(frows)
                dq.merge(fdq)
            rows = JobRows.concat(rows_l)
            if not (week or start or end):
                a_ = rows.allocs
                t = pd.concat([a_["submit"], a_["start"], a_["end"]]).dropna()
                if t.empty:
                    raise _Bad(f"{from_sacct[0]}: no times in the input; give --week or --start")
                window = Window(t.min().floor("D").to_pydatetime(),
                                (t.max().floor("D") + pd.Timedelta(days=1)).to_pydatetime())
        else:
            from slurmkit.accounting.store import Store
            from slurmkit.report import live

            store = None if no_store else Store(store_dir or _default_store(), cluster or "")
            days = window.days()
            bar = None
            if sys.stderr.isatty() and len(days) > 1:
                bar = click.progressbar(length=len(days), label="sacct", file=sys.stderr)
                bar.__enter__()
            try:
                rows, dq, _ = live.ingest_window(
                    days, cluster, store, progress=(lambda d, n: bar.update(1)) if bar else None)
            finally:
                if bar:
                    bar.__exit__(None, None, None)
            if store is not None:
                prev = window.previous()
                pdays = [d for d, _ in prev.days()]
                if store.has_days(pdays):
                    prows, pdq = store.load(pdays)
                    if len(prows):
                        prep, _ = build_report(prows, pdq, prev, a, spool_df, now=now)
                        previous = prep["totals"]
            if cap is None or down is None:
                try:
                    live_cap, down = live.live_capacity(window.start, window.end)
                    cap = cap or live_cap
                except SlurmError as exc:
                    click.echo(f"slurmkit: warning: capacity not known: {exc}", err=True)
            # sreport never reports the current hour: reconcile the whole hours before it
            hour_now = (now or pd.Timestamp.now(tz="UTC")).floor("h").to_pydatetime()
            recon_w = Window(*live.whole_hours(window.start, min(window.end, hour_now)))
            if use_sreport and recon_w.end > recon_w.start:
                try:
                    sreport_h = live.sreport_gpu_hours(recon_w.start, recon_w.end, cluster, rollup)
                except SlurmError as exc:
                    click.echo(f"slurmkit: warning: sreport: {exc}", err=True)
    except AccountingInputError as exc:
        raise _Bad(str(exc)) from None
    except SlurmError as exc:
        raise click.ClickException(str(exc)) from None
    if prometheus_url:  # per-job GPU figures the spool lacks, measured through Prometheus
        from slurmkit.report import prometheus as P

        spool_df = P.fill_spool(spool_df, P.read_jobs(prometheus_url, window.start.timestamp(), window.end.timestamp()))
    report, allocs = build_report(rows, dq, window, a, spool_df, capacity_gpus=cap,
                                  down_gpu_hours=down, sreport_gpu_hours=sreport_h,
                                  previous=previous, now=now, cluster=cluster or "",
                                  recon_window=recon_w,
                                  source=",".join(from_sacct) if from_sacct else "sacct")
    if spool_problems:
        report["spool_problems"] = spool_problems[:200]
    out = Path(outdir or f"slurmkit-report-{window.start:%Y-%m-%d}")
    written = render.write_outputs(report, allocs, out, fmts)
    for addr in mail_to:
        _mail(report, out / "weekly.html" if "html" in fmts else None, addr)
    if want_json(ctx, as_json):
        click.echo(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        t = report["totals"]
        click.echo(f"{report['window']['start']} .. {report['window']['end']}: {t['jobs']} jobs, "
                   f"{render.fmt(t['gpu_hours'])} GPU-h, {render.fmt(t['cpu_hours'])} CPU-h, "
                   f"energy {render.kwh(report, t['energy_kwh'])}; "
                   f"rows read {report['data_quality']['rows_read']}, skipped "
                   f"{report['data_quality']['rows_skipped']}")
        for p in written:
            click.echo(f"  {p}")


def _mail(report: dict, html_path, addr: str) -> None:
    """Send the HTML report (or the Markdown when there is no HTML) with ``sendmail -t``."""
    import shutil
    import subprocess
    from email.message import EmailMessage

    from slurmkit.report import render

    msg = EmailMessage()
    msg["Subject"] = render.title(report)
    msg["To"] = addr
    msg["From"] = os.environ.get("SLURMKIT_MAIL_FROM", "slurmkit")
    msg.set_content(render.to_markdown(report))
    if html_path is not None:
        msg.add_alternative(Path(html_path).read_text(encoding="utf-8"), subtype="html")
    sendmail = shutil.which("sendmail") or shutil.which("sendmail", path="/usr/sbin:/usr/lib")
    if not sendmail:
        raise click.ClickException("--mail-to: no sendmail on this host (install an MTA, e.g. msmtp-mta)")
    proc = subprocess.run([sendmail, "-t", "-oi"], input=msg.as_bytes(), capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise click.ClickException(f"sendmail failed (exit {proc.returncode}): "
                                   f"{proc.stderr.decode(errors='replace').strip()}")
