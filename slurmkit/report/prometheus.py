"""Per-job GPU energy and utilization from Prometheus, for sites whose hook spool is not shared.

jobstats' approach: the hooks expose which job holds each GPU as an info series that exists
only while the job runs (``slurmkit_gpu_job_info{node,gpu,pci_bus_id,job_id,user} 1``, written by
the prolog, gone after the epilog) next to each GPU's readings
(``slurmkit_gpu_energy_joules_total``, ``slurmkit_gpu_utilization_ratio``;
:mod:`slurmkit.hooks.metrics`). A range query of each over the report window, joined here on
``(node, gpu)``, gives per job and node:

- ``start_s`` / ``end_s``: the first / last step at which the job's info series was seen (epoch s),
  per attempt of a requeued job (they share the job id: split by the attempts' sacct Start);
- ``energy_mj``: the rise of each GPU's energy counter from ``start_s`` to the first reading
  after ``end_s`` (the epilog's, which removes the info series in the same write), summed over the
  job's GPUs, in mJ; a counter that goes down (driver reload) restarts the sum, as Prometheus'
  ``increase()`` does. NaN when a GPU of the job has no energy reading;
- ``gpu_util_pct``: the mean of the job's GPUs' utilization samples while it ran, in % (the
  reading in force at its start when none fell inside).

A job shorter than a step or a scrape is not seen. The hooks write readings when they run
(prolog, epilog, periodic health check), so the figures have the hooks' time resolution.

:func:`read_jobs` returns these rows in the shape of :func:`slurmkit.report.energy.read_spool`
(plus ``provenance`` = ``prometheus``); :func:`fill_spool` adds them to a spool frame for the jobs
and nodes the spool has no record of. HTTP through ``urllib`` only (an adapter:
:func:`query_range`); the join is pure (:func:`job_figures`).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request

from slurmkit.errors import SlurmkitError, UsageError

INFO = "slurmkit_gpu_job_info"
ENERGY = "slurmkit_gpu_energy_joules_total"
UTIL = "slurmkit_gpu_utilization_ratio"
PROVENANCE = "prometheus"
#: Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 10_000
COLUMNS = ["job_id", "node", "start_s", "end_s", "energy_mj", "measured", "gpu_util_pct", "provenance"]


class PrometheusError(SlurmkitError):
    """Prometheus could not be queried (unreachable, an HTTP error, a refused query): the
    message names the URL and what Prometheus said. CLI exit status 1."""


def check_url(url: str, option: str = "--prometheus") -> str:
    """``url`` without a trailing slash; :class:`slurmkit.errors.UsageError` unless it is an
    http(s) URL with a host."""
    u = urllib.parse.urlparse(url or "")
    if u.scheme not in ("http", "https") or not u.netloc:
        raise UsageError(option, f"want an http(s) URL of Prometheus such as http://prometheus:9090, got {url!r}")
    return url.rstrip("/")


def query_range(url: str, expr: str, start_s: float, end_s: float, step_s: float, timeout: float = 60) -> list:
    """``GET <url>/api/v1/query_range``: the matrix result, ``[{"metric": {label: value},
    "values": [[epoch s, "value"], ...]}, ...]``. Raises :class:`PrometheusError`."""
    q = urllib.parse.urlencode({"query": expr, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
                                "step": f"{step_s:g}"})
    full = f"{url}/api/v1/query_range?{q}"
    try:
        with urllib.request.urlopen(full, timeout=timeout) as r:
            body = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            msg = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            msg = exc.reason
        raise PrometheusError(f"Prometheus {url}: query {expr!r} refused (HTTP {exc.code}): {msg}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise PrometheusError(f"Prometheus {url}: cannot reach it: {getattr(exc, 'reason', exc)}") from None
    except ValueError:
        raise PrometheusError(f"Prometheus {url}: the answer to {expr!r} is not JSON (is this Prometheus?)") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise PrometheusError(f"Prometheus {url}: query {expr!r} failed: {body.get('error') if isinstance(body, dict) else body}")
    data = body.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"Prometheus {url}: want a matrix for {expr!r}, got {data.get('resultType')}")
    return data.get("result") or []


def _series(result: list) -> dict:
    """``{(node, gpu): [(t, value), ...] sorted}``; NaN samples dropped."""
    out = {}
    for s in result:
        m = s.get("metric", {})
        pts = [(float(t), float(v)) for t, v in s.get("values", []) if v not in ("NaN", "+Inf", "-Inf")]
        out.setdefault((m.get("node", ""), m.get("gpu", "")), []).extend(pts)
    return {k: sorted(v) for k, v in out.items()}


def _rise(points: list, t0: float, t1: float) -> float | None:
    """Counter rise from the last reading at or before ``t0`` (else the first after it) to the
    first reading after ``t1`` (else the last one): resets restart the sum. None without any."""
    if not points:
        return None
    before = [p for p in points if p[0] <= t0]
    first = before[-1] if before else points[0]
    after = [p for p in points if p[0] > t1]
    last = after[0] if after else points[-1]
    seg = [p for p in points if first[0] <= p[0] <= last[0]]
    if len(seg) < 1:
        return None
    total = 0.0
    for (_, a), (_, b) in zip(seg, seg[1:]):
        total += b - a if b >= a else b
    return total


def _segments(times: list[float], starts: list[float] | None, gap_s: float) -> list[list[float]]:
    """Split the sorted step times at which a job's info series was seen into its attempts:
    by the attempts' sacct Start times (``starts``, sorted epoch s: a time goes to the latest
    attempt that started at or before it, a time before the first to the first), else at gaps
    longer than ``gap_s`` (the epilog removed the series, a requeued attempt's prolog brought it
    back)."""
    out: list[list[float]] = []
    if starts:
        import bisect

        by: dict[int, list[float]] = {}
        for t in times:
            by.setdefault(max(0, bisect.bisect_right(starts, t) - 1), []).append(t)
        return [by[k] for k in sorted(by)]
    for t in times:
        if out and t - out[-1][-1] <= gap_s:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def job_figures(info: list, energy: list, util: list, step_s: float | None = None,
                attempts: dict | None = None) -> list[dict]:
    """Join the three range results (:func:`query_range` of :data:`INFO`, :data:`ENERGY`,
    :data:`UTIL`) into one row per job attempt and node with :data:`COLUMNS` (see the module
    docstring). A requeued job's attempts share its id: ``attempts`` (``{job id: [sacct Start,
    epoch s, ...]}``, the report's allocation rows) splits its info series into attempts, so
    each attempt gets the energy of its own span and none is counted twice; a job without
    them is split where its series was absent for more than two steps (``step_s``; default: the
    smallest spacing seen). ``gpu_util_pct``: the mean of the job's GPUs' utilization samples
    within the attempt, else the reading in force at its start (the prolog's). Pure: no I/O."""
    seen: dict = {}
    for s in info:
        m = s.get("metric", {})
        ts = [float(t) for t, v in s.get("values", []) if float(v) > 0]
        if not ts or not m.get("job_id"):
            continue
        seen.setdefault((str(m["job_id"]), m.get("node", "")), {}).setdefault(m.get("gpu", ""), set()).update(ts)
    e_by, u_by = _series(energy), _series(util)
    rows = []
    for (job_id, node), by_gpu in sorted(seen.items()):
        times = sorted(set().union(*by_gpu.values()))
        step = step_s or min((b - a for a, b in zip(times, times[1:])), default=1.0)
        starts = sorted((attempts or {}).get(job_id) or []) or None
        for seg in _segments(times, starts, 2 * step):
            t0, t1 = seg[0], seg[-1]
            gpus = sorted(g for g, ts in by_gpu.items() if any(t0 <= t <= t1 for t in ts))
            rises = [_rise(e_by.get((node, g), []), t0, t1) for g in gpus]
            measured = bool(rises) and all(r is not None for r in rises)
            samples = []
            for g in gpus:
                pts = u_by.get((node, g), [])
                inside = [v for t, v in pts if t0 <= t <= t1]
                before = [v for t, v in pts if t < t0]
                samples += inside or before[-1:]
            rows.append({"job_id": job_id, "node": node, "start_s": t0, "end_s": t1,
                         "energy_mj": sum(rises) * 1000.0 if measured else math.nan, "measured": measured,
                         "gpu_util_pct": 100.0 * sum(samples) / len(samples) if samples else None,
                         "provenance": PROVENANCE})
    return rows


def step_for(start_s: float, end_s: float) -> float:
    """The query step (s): the finest whole second at which the window fits in
    :data:`MAX_POINTS` points (a week: 61 s, a day: 9 s). A job shorter than the step may be
    missed; one that ends within a step of the next job on its GPUs is still told apart by
    ``job_id``."""
    return float(max(1, math.ceil((end_s - start_s) / MAX_POINTS)))


def read_jobs(url: str, start_s: float, end_s: float, step_s: float | None = None,
              attempts: dict | None = None, deadline_s: float = 120.0):
    """Per job attempt and node GPU figures measured through Prometheus at ``url`` over
    [start_s, end_s] (epoch s): a DataFrame with :data:`COLUMNS`. ``attempts``: see
    :func:`job_figures`. The three queries together take at most ``deadline_s`` seconds.
    Raises :class:`PrometheusError` (unreachable, refused, past the deadline) and
    :class:`~slurmkit.errors.UsageError` for a malformed URL."""
    import time

    import pandas as pd

    url = check_url(url)
    step = step_s or step_for(start_s, end_s)
    end_at = time.monotonic() + deadline_s

    def q(expr, t1):
        left = end_at - time.monotonic()
        if left <= 0:
            raise PrometheusError(f"Prometheus {url}: no answer within {deadline_s:g} s in all")
        return query_range(url, expr, start_s, t1, step, timeout=left)

    # the epilog's reading lands just after the info series goes: look one step past the end
    info = q(INFO, end_s)
    energy = q(ENERGY, end_s + step)
    util = q(UTIL, end_s)
    return pd.DataFrame(job_figures(info, energy, util, step, attempts), columns=COLUMNS)


def attempts_of(allocs) -> dict:
    """``{job id: [sacct Start, epoch s, ...]}`` of an allocation frame (``key_id``, ``start``:
    :class:`slurmkit.accounting.frame.JobRows` ``allocs``); attempts without a Start left out."""
    import pandas as pd

    if allocs is None or len(allocs) == 0 or "start" not in allocs:
        return {}
    t = allocs["start"]
    ok = t.notna().to_numpy()
    secs = (t[ok] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(float)
    out: dict = {}
    for k, v in zip(allocs["key_id"].astype(str).to_numpy()[ok], secs):
        out.setdefault(k, []).append(float(v))
    return out


def fill_spool(spool, prom):
    """The spool frame (:func:`slurmkit.report.energy.read_spool`, or None) with the rows of
    ``prom`` (:func:`read_jobs`) for the (job, node) pairs the spool has no record of; spool
    rows get ``provenance`` = ``spool``."""
    import pandas as pd

    if prom is None or prom.empty:
        return spool
    if spool is None or spool.empty:
        return prom.reset_index(drop=True)
    spool = spool.assign(provenance=spool.get("provenance", "spool"))
    have = set(zip(spool["job_id"].astype(str), spool["node"].astype(str)))
    keep = [(j, n) not in have for j, n in zip(prom["job_id"].astype(str), prom["node"].astype(str))]
    return pd.concat([spool, prom[keep]], ignore_index=True)
