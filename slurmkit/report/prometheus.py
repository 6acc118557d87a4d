"""Per-job GPU energy and utilization from Prometheus, for sites whose hook spool is not shared.

jobstats' approach: the hooks expose which job holds each GPU as an info series that exists
only while the job runs (``slurmkit_gpu_job_info{node,gpu,pci_bus_id,job_id,user} 1``, written by
the prolog, gone after the epilog) next to each GPU's readings
(``slurmkit_gpu_energy_joules_total``, ``slurmkit_gpu_utilization_ratio``;
:mod:`slurmkit.hooks.metrics`). A range query of each over the report window, joined here on
``(node, gpu)``, gives per job and node:

- ``start_s`` / ``end_s``: the first / last step at which the job's info series was seen (epoch s);
- ``energy_mj``: the rise of each GPU's energy counter from ``start_s`` to the first reading
  after ``end_s`` (the epilog's, which removes the info series in the same write), summed over the
  job's GPUs, in mJ; a counter that goes down (driver reload) restarts the sum, as Prometheus'
  ``increase()`` does. NaN when a GPU of the job has no energy reading;
- ``gpu_util_pct``: the mean of the job's GPUs' utilization samples while it ran, in %.

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


def job_figures(info: list, energy: list, util: list) -> list[dict]:
    """Join the three range results (:func:`query_range` of :data:`INFO`, :data:`ENERGY`,
    :data:`UTIL`) into one row per (job, node) with :data:`COLUMNS` (see the module docstring).
    Pure: no I/O."""
    jobs: dict = {}
    for s in info:
        m = s.get("metric", {})
        ts = [float(t) for t, v in s.get("values", []) if float(v) > 0]
        if not ts or not m.get("job_id"):
            continue
        key = (str(m["job_id"]), m.get("node", ""))
        j = jobs.setdefault(key, {"gpus": set(), "t0": math.inf, "t1": -math.inf})
        j["gpus"].add(m.get("gpu", ""))
        j["t0"], j["t1"] = min(j["t0"], ts[0]), max(j["t1"], ts[-1])
    e_by, u_by = _series(energy), _series(util)
    rows = []
    for (job_id, node), j in sorted(jobs.items()):
        rises = [_rise(e_by.get((node, g), []), j["t0"], j["t1"]) for g in sorted(j["gpus"])]
        measured = bool(rises) and all(r is not None for r in rises)
        samples = [v for g in j["gpus"] for t, v in u_by.get((node, g), []) if j["t0"] <= t <= j["t1"]]
        rows.append({"job_id": job_id, "node": node, "start_s": j["t0"], "end_s": j["t1"],
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


def read_jobs(url: str, start_s: float, end_s: float, step_s: float | None = None):
    """Per (job, node) GPU figures measured through Prometheus at ``url`` over [start_s, end_s]
    (epoch s): a DataFrame with :data:`COLUMNS`. Raises :class:`PrometheusError`."""
    import pandas as pd

    url = check_url(url)
    step = step_s or step_for(start_s, end_s)
    # the epilog's reading lands just after the info series goes: look one step past the end
    info = query_range(url, INFO, start_s, end_s, step)
    energy = query_range(url, ENERGY, start_s, end_s + step, step)
    util = query_range(url, UTIL, start_s, end_s, step)
    return pd.DataFrame(job_figures(info, energy, util), columns=COLUMNS)


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
