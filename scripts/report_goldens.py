#!/usr/bin/env python3
"""The report's goldens: what ``report weekly``, ``report store`` + ``report period`` and
``report jobs`` give on the shared corpus's sacct captures and on the benches' generated inputs,
kept as JSON in ``tests/fixtures/report_goldens/`` (SOURCE.md there says where each comes from).

    .venv/bin/python scripts/report_goldens.py [--corpus ../shared/corpus] [--only NAME ...] [--check]

Each golden is the JSON the command writes (``weekly.json``, ``period.json``, ``report jobs
--format json``), run through the CLI as a user runs it, with what differs from one run or
machine to the next taken out (:func:`normalise`): the corpus's and the temporary folders'
absolute paths become ``<corpus>`` / ``<tmp>``, and ``inputs.tool`` (the version string) is
dropped. Every figure is kept. ``--check`` compares instead of writing (as
tests/report/test_report_goldens.py does) and prints the first difference of each.

The benches' inputs are made here with the benches' own generators
(:func:`bench.report_scale.generate`, :func:`bench.report_period.write_store`) at a small
seeded size; the golden records the generated capture's SHA-256 (``input_sha256``), so a change
of the generator is told apart from a change of the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"
GOLDENS = REPO / "tests" / "fixtures" / "report_goldens"

#: The energy / cost / capacity assumptions of the ``*_assumed`` goldens (every figure the weekly
#: report derives from them then has a value): CLI options of ``report weekly``.
ASSUMED = ("--gpu-tdp-w", "400", "--pue", "1.25", "--carbon-g-per-kwh", "50", "--price-per-kwh", "0.2",
           "--price-per-gpu-hour", "1.5", "--currency", "EUR", "--capacity-gpus", "64")

#: Habrok's capture (the corpus README: June 2023 to April 2024, 100 jobs + 142 steps).
HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"
HABROK_SNOWMAN = "sacct/habrok_gpu_cluster_snowman_delim.txt"
HABROK_FIELDS = "sacct/habrok_format_fields.txt"
CSCS = "sacct/cscs_energy_parsable2.psv"
PCLUSTER_FIELDS = "sacct/pcluster_header_fields.txt"


def _pcluster_fields(corpus: Path, drop=()) -> str:
    """The pcluster captures' field list (a comma list), less ``drop`` (the array and
    multi-node files have no Partition column: corpus README)."""
    from slurmkit.accounting.read import read_field_list

    names = read_field_list((corpus / PCLUSTER_FIELDS).read_text())
    return ",".join(n for n in names if n not in drop)


#: ``report weekly`` goldens of the captures: (golden name, capture, extra CLI arguments; ``{fields:DROP}``
#: is the pcluster field list less DROP). With no window the report covers the whole UTC days the
#: capture spans. Not here: pcluster_issue63 (no Submit/Start/End in any row: "no times in the
#: input"), mavis and torchx (no Submit/Start/End field: refused) — their ``report jobs`` goldens are.
WEEKLY = [
    ("weekly_habrok", HABROK, ()),
    ("weekly_habrok_assumed", HABROK, ("--tz", "Europe/Amsterdam", *ASSUMED)),
    ("weekly_habrok_2024-W12_assumed", HABROK, ("--week", "2024-W12", "--tz", "Europe/Amsterdam", *ASSUMED)),
    ("weekly_habrok_2024-W16_partial", HABROK, ("--week", "2024-W16", "--tz", "Europe/Amsterdam", *ASSUMED)),
    ("weekly_habrok_snowman", HABROK_SNOWMAN, ("--sacct-fields", "{corpus}/" + HABROK_FIELDS)),
    ("weekly_cscs_energy", CSCS, ()),
    ("weekly_cscs_energy_assumed", CSCS, ("--tz", "Europe/Zurich", *ASSUMED)),
    ("weekly_pcluster_issue59_node_fail", "sacct/pcluster_issue59_node_fail.psv", ("--sacct-fields", "{fields:}")),
    ("weekly_pcluster_issue61_cancelled_invalid", "sacct/pcluster_issue61_cancelled_invalid.psv",
     ("--sacct-fields", "{fields:}")),
    ("weekly_pcluster_array_job", "sacct/pcluster_array_job.psv", ("--sacct-fields", "{fields:Partition}", *ASSUMED)),
    ("weekly_pcluster_multi_node", "sacct/pcluster_multi_node.psv", ("--sacct-fields", "{fields:Partition}", *ASSUMED)),
    ("weekly_trex_format_all", "sacct2/trex_sacct_-X_-P_--format_ALL.psv", ()),
]

#: ``report jobs --format json`` goldens: (golden name, capture, extra CLI arguments).
JOBS = [
    ("jobs_habrok", HABROK, ("--tz", "Europe/Amsterdam")),
    ("jobs_cscs_energy", CSCS, ("--tz", "Europe/Zurich")),
    ("jobs_pcluster_array_job", "sacct/pcluster_array_job.psv", ("--sacct-fields", "{fields:Partition}")),
    ("jobs_pcluster_issue63_interactive_step", "sacct/pcluster_issue63_interactive_step.psv",
     ("--sacct-fields", "{fields:Partition}")),
    ("jobs_mavis_long", "sacct2/mavis_sacct-long-parsable_trailing-delim_L230-332.psv", ()),
    ("jobs_torchx_cancelled_by", "sacct2/torchx_sacct-parsable2_CANCELLED-by_L1083-1086.psv", ()),
    ("jobs_trex_format_all", "sacct2/trex_sacct_-X_-P_--format_ALL.psv", ()),
]

#: The store the ``period_*`` goldens read: (cluster, captures, extra ``report store`` arguments).
#: Habrok's days from 2024 only (its jobs of Q1 and April; ``report store`` of all its 324 days takes
#: 20 s here, too long for the test).
STORE = [
    ("habrok", (HABROK,), ("--tz", "Europe/Amsterdam", "--start", "2024-01-01", "--end", "2024-05-01")),
    ("santis", (CSCS,), ("--tz", "Europe/Zurich")),
    ("pcluster", ("sacct/pcluster_array_job.psv",), ("--sacct-fields", "{fields:Partition}")),
]
#: "now" of the period goldens: after every stored day (pinned: the report's figures do not move).
PERIOD_NOW = "2024-06-01T00:00:00Z"

#: ``report period`` goldens: (golden name, CLI arguments).
PERIOD = [
    ("period_habrok_2024-Q1_by_week", ("--quarter", "2024-Q1", "--by", "week", "--cluster", "habrok")),
    ("period_habrok_2024-Q1", ("--quarter", "2024-Q1", "--cluster", "habrok")),
    ("period_habrok_2024_by_month", ("--year", "2024", "--cluster", "habrok")),
    ("period_all_2024-03_by_week", ("--month", "2024-03")),
    ("period_habrok_2024-04_partial", ("--month", "2024-04", "--cluster", "habrok")),
]

#: The benches' generated inputs, small: allocations (each with 3 steps) of the weekly bench's capture;
#: weeks and allocations a week of the period bench's store.
BENCH_WEEKLY_ROWS = 20_000
BENCH_PERIOD_WEEKS, BENCH_PERIOD_ROWS = 2, 5_000


def _cli(args) -> str:
    """Run ``slurmkit ARGS`` in this process (click's runner); its stdout. Raises RuntimeError
    with the output when it fails."""
    from click.testing import CliRunner

    from slurmkit.cli import cli

    # (a site profile named in the environment would change the assumptions)
    res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False,
                             env={"SLURMKIT_SITE": None, "SLURMKIT_PROFILE": None})
    if res.exit_code != 0:
        raise RuntimeError(f"slurmkit {' '.join(map(str, args))}: exit {res.exit_code}\n{res.output}")
    return res.stdout


def _args(args, corpus: Path) -> list[str]:
    out = []
    for a in args:
        if a.startswith("{fields:"):
            a = _pcluster_fields(corpus, tuple(x for x in a[len("{fields:"):-1].split(",") if x))
        out.append(a.replace("{corpus}", str(corpus)))
    return out


def normalise(obj, paths: dict[str, str]):
    """``obj`` (parsed JSON) with each absolute path of ``paths`` (path -> placeholder) replaced
    in every string, and ``tool`` (the version string) dropped."""
    if isinstance(obj, dict):
        return {k: normalise(v, paths) for k, v in obj.items() if k != "tool"}
    if isinstance(obj, list):
        return [normalise(v, paths) for v in obj]
    if isinstance(obj, str):
        for p, name in paths.items():
            obj = obj.replace(p, name)
    return obj


@dataclass
class Context:
    """Where the goldens' inputs are: the corpus (None: absent, the bench goldens only) and a
    scratch folder."""

    corpus: Path | None
    tmp: Path
    _store: Path | None = None

    def paths(self) -> dict[str, str]:
        # longest first: the scratch folder may sit under another one named here
        pairs = {str(self.tmp): "<tmp>"}
        if self.corpus is not None:
            pairs.update({str(self.corpus): "<corpus>", str(self.corpus.resolve()): "<corpus>"})
        return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))

    def store(self) -> Path:
        """The period goldens' store (:data:`STORE`), filled with ``report store`` once."""
        if self._store is None:
            root = self.tmp / "store"
            for cluster, captures, extra in STORE:
                cap = [x for c in captures for x in ("--from-sacct", self.corpus / c)]
                _cli(["report", "store", *cap, "--store", root, "--cluster", cluster, *_args(extra, self.corpus)])
            self._store = root
        return self._store


def weekly(ctx: Context, name: str, capture: str, extra) -> dict:
    out = ctx.tmp / name
    _cli(["report", "weekly", "--from-sacct", ctx.corpus / capture, "--format", "json", "-o", out,
          "--trend-weeks", "0", "--allow-skipped", "--no-store", *_args(extra, ctx.corpus)])
    return json.loads((out / "weekly.json").read_text())


def jobs(ctx: Context, name: str, capture: str, extra) -> dict:
    return json.loads(_cli(["report", "jobs", "--from-sacct", ctx.corpus / capture, "--format", "json",
                            *_args(extra, ctx.corpus)]))


def period(ctx: Context, name: str, args) -> dict:
    out = ctx.tmp / name
    _cli(["report", "period", *args, "--store", ctx.store(), "--now", PERIOD_NOW, "--format", "json", "-o", out])
    return json.loads((out / "period.json").read_text())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _bench():
    sys.path.insert(0, str(REPO / "bench"))
    import report_period
    import report_scale

    return report_scale, report_period


def bench_weekly(ctx: Context, name: str) -> dict:
    """The weekly bench's capture (:func:`report_scale.generate`, seed 48, ISO week 2026-W48) at
    :data:`BENCH_WEEKLY_ROWS` allocations, reported over its week as the bench does (GPU TDP
    700 W, running jobs up to the week's end), through ``report weekly``."""
    import datetime as dt

    from slurmkit.accounting.fields import FIELDS

    report_scale, _ = _bench()
    path = ctx.tmp / f"{name}.psv"
    report_scale.generate(str(path), BENCH_WEEKLY_ROWS)
    end = dt.datetime.fromtimestamp(report_scale.WEEK_START + 7 * 86400, dt.timezone.utc).isoformat()
    out = ctx.tmp / name
    _cli(["report", "weekly", "--from-sacct", path, "--sacct-fields", ",".join(FIELDS), "--delimiter", "|",
          "--week", "2026-W48", "--gpu-tdp-w", "700", "--now", end, "--format", "json", "-o", out,
          "--trend-weeks", "0", "--allow-skipped", "--no-store"])
    rep = json.loads((out / "weekly.json").read_text())
    return {"input_sha256": _sha256(path), "rows": BENCH_WEEKLY_ROWS, "report": rep}


def bench_period(ctx: Context, name: str) -> dict:
    """The period bench's store (:func:`report_period.write_store`, seed 40, from ISO week
    2026-W40) of :data:`BENCH_PERIOD_WEEKS` weeks of :data:`BENCH_PERIOD_ROWS` allocations, its
    period broken down by week, up to its end, through ``report period``. ``input_sha256``: of
    the SHA-256s of the weekly captures ``write_store`` generates (seed 40 + k, JobIDs from
    10,000,000 x (k + 1), as it calls :func:`report_scale.generate`)."""
    report_scale, report_period = _bench()
    root = ctx.tmp / f"{name}-store"
    report_period.write_store(str(root), BENCH_PERIOD_WEEKS, BENCH_PERIOD_ROWS)
    per = report_period.period_of(BENCH_PERIOD_WEEKS)
    # the input: the weekly captures write_store generates (its seeds and JobIDs), not the
    # store's files (their layout is the store's, and the day sums stamp each file's mtime)
    h = hashlib.sha256()
    for k in range(BENCH_PERIOD_WEEKS):
        path = ctx.tmp / f"{name}-week{k}.psv"
        report_scale.generate(str(path), BENCH_PERIOD_ROWS, seed=40 + k,
                              week_start=report_period.FIRST_WEEK + 7 * 86400 * k, first_id=10_000_000 * (k + 1))
        h.update(_sha256(path).encode())
        path.unlink()
    out = ctx.tmp / name
    _cli(["report", "period", "--start", per.window.start.isoformat(), "--end", per.window.end.isoformat(),
          "--by", "week", "--store", root, "--cluster", report_period.CLUSTER, "--now", per.window.end.isoformat(),
          "--format", "json", "-o", out])
    rep = json.loads((out / "period.json").read_text())
    return {"input_sha256": h.hexdigest(), "weeks": BENCH_PERIOD_WEEKS, "rows_per_week": BENCH_PERIOD_ROWS,
            "report": rep}


def goldens() -> dict[str, Callable[[Context], dict]]:
    """{golden name: how to make it from a :class:`Context`}, in the order they are made."""
    out: dict[str, Callable[[Context], dict]] = {}
    for name, capture, extra in WEEKLY:
        out[name] = lambda ctx, n=name, c=capture, e=extra: weekly(ctx, n, c, e)
    for name, capture, extra in JOBS:
        out[name] = lambda ctx, n=name, c=capture, e=extra: jobs(ctx, n, c, e)
    for name, args in PERIOD:
        out[name] = lambda ctx, n=name, a=args: period(ctx, n, a)
    out["bench_weekly_20k"] = lambda ctx: bench_weekly(ctx, "bench_weekly_20k")
    out["bench_period_2x5k"] = lambda ctx: bench_period(ctx, "bench_period_2x5k")
    return out


def make(name: str, ctx: Context) -> dict:
    """The golden ``name`` made with the current code, normalised (:func:`normalise`)."""
    return normalise(goldens()[name](ctx), ctx.paths())


def golden_path(name: str, folder: Path = GOLDENS) -> Path:
    return folder / f"{name}.json"


def read_golden(name: str, folder: Path = GOLDENS) -> dict:
    return json.loads(golden_path(name, folder).read_text(encoding="utf-8"))


def write_golden(name: str, obj: dict, folder: Path = GOLDENS) -> Path:
    """Write ``obj`` as ``NAME.json`` (sorted keys, one item a line: a regenerated golden's
    diff shows each figure that changed)."""
    path = golden_path(name, folder)
    path.write_text(json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


#: Relative tolerance of floats (the reports round their figures to at most 9 decimals).
REL_TOL = 1e-9


def first_difference(want, got, path: str = "", exceptions: dict[str, str] | None = None) -> str | None:
    """The first place ``got`` differs from ``want`` ("key.path: want X, got Y"), None when
    equal: floats within :data:`REL_TOL` (relative, or 1e-12 absolute near 0), ints and
    strings exactly, dicts key by key (a key added or missing is a difference), lists item by
    item. ``exceptions``: {key path: why} not compared (the path with ``[]`` for any list
    index: ``totals.energy_kwh``, ``by_user[].gpu_hours``)."""
    exceptions = exceptions or {}
    generic = _generic(path)
    if generic in exceptions or path in exceptions:
        return None
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            if k not in got and f"{path}.{k}".lstrip(".") not in exceptions \
                    and f"{generic}.{k}".lstrip(".") not in exceptions:
                return f"{path}.{k}".lstrip(".") + ": missing (golden has " + _short(want[k]) + ")"
        for k in got:
            if k not in want and f"{path}.{k}".lstrip(".") not in exceptions \
                    and f"{generic}.{k}".lstrip(".") not in exceptions:
                return f"{path}.{k}".lstrip(".") + ": new key (not in the golden): " + _short(got[k])
        for k in want:
            if k in got:
                d = first_difference(want[k], got[k], f"{path}.{k}".lstrip("."), exceptions)
                if d:
                    return d
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (w, g) in enumerate(zip(want, got)):
            d = first_difference(w, g, f"{path}[{i}]", exceptions)
            if d:
                return d
        if len(want) != len(got):
            return f"{path}: {len(got)} items, the golden {len(want)}"
        return None
    if isinstance(want, bool) or isinstance(got, bool) or not (
            isinstance(want, (int, float)) and isinstance(got, (int, float))):
        return None if want == got and type(want) is type(got) else f"{path}: want {_short(want)}, got {_short(got)}"
    if isinstance(want, int) and isinstance(got, int):
        return None if want == got else f"{path}: want {want}, got {got}"
    if math.isclose(want, got, rel_tol=REL_TOL, abs_tol=1e-12):
        return None
    return f"{path}: want {want!r}, got {got!r}"


def _generic(path: str) -> str:
    import re

    return re.sub(r"\[\d+\]", "[]", path)


def _short(v) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 120 else s[:117] + "..."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the shared corpus (default ../shared/corpus)")
    ap.add_argument("--out", type=Path, default=GOLDENS, help="the goldens' folder")
    ap.add_argument("--only", nargs="*", help="these goldens only (names as in SOURCE.md)")
    ap.add_argument("--check", action="store_true", help="compare with the goldens instead of writing them")
    args = ap.parse_args(argv)
    names = list(goldens())
    bad = [n for n in args.only or () if n not in names]
    if bad:
        ap.error(f"unknown golden(s) {', '.join(bad)} (choose from {', '.join(names)})")
    tmp = Path(tempfile.mkdtemp(prefix="sk-goldens-"))
    ctx = Context(args.corpus, tmp)
    failed = 0
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in args.only or names:
            got = make(name, ctx)
            if args.check:
                d = first_difference(read_golden(name, args.out), got)
                print(f"{name}: {'same' if d is None else d}")
                failed += d is not None
            else:
                p = write_golden(name, got, args.out)
                print(f"{p.relative_to(REPO) if p.is_relative_to(REPO) else p}: {p.stat().st_size:,} bytes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
