"""The per-node metric families the hooks write for node_exporter's textfile collector.

Each hook run writes its own file ``slurmkit_<node>_<hook>.prom`` (:func:`slurmkit.hooks.main.
write_textfile`: check status, run time, deadline, exit code, own-trouble count) and, through
:func:`node_files`, the per-node files that every hook run replaces, so a series exists in
exactly one file (node_exporter refuses a series that two files both carry):

``slurmkit_<node>_node.prom`` (rewritten by every run)

- ``slurmkit_node_drained_by_slurmkit{node}`` gauge: 1 while a drain set by slurmkit is in force;
- ``slurmkit_node_drain_info{node,check,reason}`` gauge 1, only while slurmkit's drain is in
  force (``reason``: the drain reason as Slurm shows it);
- ``slurmkit_drains_total{node,check}`` counter: times the node became drained by slurmkit, by
  the check that failed (a health check that finds the drained node still failing re-asserts
  the drain but does not count it again);
- ``slurmkit_observed_drains_total{node,check}`` counter: would-be drains slurmkit did not set
  (observe mode, or the node's reason belongs to someone else), once per distinct would-be
  reason until a clean run;
- ``slurmkit_resumes_total{node,check}`` counter: resumes of a node slurmkit drained, by the
  check it had been drained for;
- ``slurmkit_gpu_xid_errors_total{node,gpu,pci_bus_id,xid,class}`` counter: NVRM Xid lines seen
  in the kernel log, each line once whichever hook and run reads it (:func:`count_run`;
  ``class``: hardware | application | other, from the ``xid`` check's verdict:
  :mod:`slurmkit.health.xidcatalog`);
- ``slurmkit_gpu_xid_last_timestamp_seconds{node,gpu,pci_bus_id,xid,class}`` gauge: Unix time
  of the hook run that last counted a new line of that Xid; the alert fires on a recent time, so
  a series that reappears after a gap in the data (Prometheus restart, node_exporter down) does
  not re-fire, and a line read again by another hook does not refresh it;
- ``slurmkit_gpu_job_info{node,gpu,pci_bus_id,job_id,user}`` gauge 1, one per GPU of a running
  job: written by the prolog, gone after the epilog (it lists the prolog records in the state
  directory), so job ids never pile up as series;
- ``slurmkit_node_running_jobs{node}`` gauge: those jobs (their prolog ran, their epilog not);
- ``slurmkit_healthcheck_skips_busy{node,states}`` gauge, when the hooks config has
  ``health_check_node_state`` (slurm.conf's HealthCheckNodeState, ``states``): 1 when it leaves
  busy nodes unchecked (:func:`skips_busy`), else 0; the stale-hook alert spares such a node
  while it runs a job.

``slurmkit_<node>_gpus.prom`` (rewritten by every run; a run that could not read the GPUs writes
``slurmkit_gpus_read`` 0 and no readings, so no earlier reading looks current)

- ``slurmkit_gpus_read{node}`` (1 / 0) and ``slurmkit_gpus_read_timestamp_seconds{node}`` (the
  run's Unix time);

- ``slurmkit_gpus_expected{node}`` / ``slurmkit_gpus_visible{node}`` gauges: GPUs in gres.conf /
  GPUs NVML enumerates with a usable handle (a lost GPU does not count);
- per GPU (labels ``node``, ``gpu`` = NVML index, ``pci_bus_id``): ``slurmkit_gpu_info`` (1, plus
  ``uuid``, and ``UUID`` / ``dcgm_pci_bus_id`` as dcgm-exporter labels the GPU: :func:`dcgm_labels`),
  ``slurmkit_gpu_status`` (the worst verdict of the run's checks of the GPU: 0 pass, 1 warn,
  2 fail), ``slurmkit_gpu_energy_joules_total`` (counter since the driver
  loaded, nvmlDeviceGetTotalEnergyConsumption / 1000), ``slurmkit_gpu_power_watts``,
  ``slurmkit_gpu_temperature_celsius``, ``slurmkit_gpu_utilization_ratio`` (0..1),
  ``slurmkit_gpu_ecc_errors_total{scope,error_type}`` (volatile | aggregate; correctable |
  uncorrectable | sram_correctable); and only where not 0 (a healthy GPU has none, which keeps
  a fleet's series few): ``slurmkit_gpu_retired_pages{cause}`` (sbe | dbe),
  ``slurmkit_gpu_retired_pages_pending``, ``slurmkit_gpu_remapped_rows{cause}`` (correctable |
  uncorrectable), ``slurmkit_gpu_row_remap_pending``, ``slurmkit_gpu_row_remap_failure`` (1),
  ``slurmkit_gpu_clock_event_reason_active{reason}`` (1 per active nvmlClocksEventReason bit).

``slurmkit_<node>_fabric.prom`` (rewritten by every run that read the GPUs):
``slurmkit_fabric_port_expected_rate_bytes_per_second`` per port the site profile expects
(:func:`fabric_families`); node_exporter's infiniband collector has the ports' state, rate and
counters. The node file also carries ``slurmkit_node_metrics_timestamp_seconds{node}``.

A value NVML did not give (NOT_SUPPORTED, an error) is left out, never written as 0. The counters
(drains, resumes, Xids) live in ``<state_dir>/<node>/counters.json``. Only the standard library
and :mod:`slurmkit.hooks.textfile` are imported (a hook runs this on every job).
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from slurmkit.hooks.nodestate import JobStart

NODE_FILE = "slurmkit_{node}_node.prom"
GPUS_FILE = "slurmkit_{node}_gpus.prom"
FABRIC_FILE = "slurmkit_{node}_fabric.prom"
COUNTERS_FILE = "counters.json"

#: nvmlClocksEventReason* bits (nvml.h) -> the ``reason`` label.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
_XID_CLASS = {"fail": "hardware", "pass": "application", "warn": "other"}
_RANK = {"pass": 0, "warn": 1, "fail": 2}


def check_of(reason: str | None) -> str:
    """The check id of a slurmkit drain reason (``slurmkit: row_remap_pending GPU1 ...: ...`` ->
    ``row_remap_pending``; ``slurmkit: nvml-timeout`` -> ``nvml_timeout``), or for the checks
    beyond NVML the reason's short tag (``slurmkit: ib mlx5_0/1 ...`` -> ``ib``:
    :data:`slurmkit.health.result.REASON_TAGS`); "" for None."""
    if not reason:
        return ""
    body = reason.split(":", 1)[1] if reason.startswith("slurmkit:") else reason
    word = body.strip().split(" ", 1)[0].rstrip(":")
    return word.replace("-", "_")


def check_samples(base: dict, results: list, nvml_timeout: bool = False) -> tuple[list, int]:
    """``(samples, passed)``: the samples of ``slurmkit_health_check_status`` for the run's
    ``CheckResult`` list (``results``) that did not pass, one per (check, GPU, device, port) with
    its worst status (a check may judge one GPU twice, e.g. ``app_clocks`` for the graphics and
    the memory clock): 1 warn, 2 fail (an own-trouble ``error`` result counts as 2); and
    ``passed``, how many such (check, GPU, device, port) all passed (``slurmkit_health_checks_passed``:
    a healthy node's results in one series). Labels: ``base`` (node, hook) plus ``check``,
    ``gpu`` (NVML index, "" for a node-level check; ``slurmkit_gpu_info`` maps it to
    ``pci_bus_id`` and ``uuid``), ``device`` and ``port`` (a fabric result's HCA and port as
    node_exporter's infiniband collector labels them, from the result's ``place``:
    :func:`slurmkit.health.fabric.device_port`; "" for the others). ``nvml_timeout`` adds
    ``check="nvml_timeout"`` at 2 (the run's NVML hang)."""
    worst: dict[tuple, int] = {}
    for r in results:
        v = {"pass": 0, "warn": 1}.get(getattr(r.status, "value", r.status), 2)
        dev = port = ""
        if getattr(r, "place", ""):
            from slurmkit.health.fabric import device_port

            dev, port = device_port(r.place)
        key = (r.check, "" if r.gpu_index is None else str(r.gpu_index), dev, port)
        worst[key] = max(v, worst.get(key, 0))
    if nvml_timeout:
        worst[("nvml_timeout", "", "", "")] = 2
    samples = [({**base, "check": c, "gpu": g, "device": d, "port": p}, v)
               for (c, g, d, p), v in worst.items() if v]
    return samples, sum(1 for v in worst.values() if not v)


# ---- counters ------------------------------------------------------------------------------

_KINDS = ("drains", "observed_drains", "resumes", "xids", "xid_last", "xid_seen")

#: Kernel-log lines remembered in ``xid_seen`` (the newest; a line older than these is long
#: past every hook's kernel-log cursor).
XID_SEEN_MAX = 512


def load_counters(state_dir, node: str) -> dict:
    """``counters.json``: ``{"drains": {check: n}, "observed_drains": {...}, "resumes": {...},
    "xids": {"<xid>|<gpu>|<pci_bus_id>|<class>": n}, "xid_last": {same key: epoch s of the run
    that last counted it}, "xid_seen": {kernel-log line identity (:func:`xid_line_id`): epoch s
    of the run that counted it}, "drain_open": the slurmkit drain reason already counted (None),
    "observed_open": the would-be drain already counted (None)}`` (zeros when absent or
    unreadable)."""
    from slurmkit.hooks.nodestate import node_dir

    path = os.path.join(node_dir(state_dir, node), COUNTERS_FILE)
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    out = {k: dict(data.get(k) or {}) if isinstance(data.get(k) or {}, dict) else {} for k in _KINDS}
    for k in ("drain_open", "observed_open"):
        out[k] = data.get(k) if isinstance(data.get(k), str) else None
    return out


def save_counters(state_dir, node: str, data: dict) -> None:
    from slurmkit.hooks.nodestate import node_dir

    from slurmkit.atomicfile import atomic_write

    atomic_write(os.path.join(node_dir(state_dir, node), COUNTERS_FILE), json.dumps(data, sort_keys=True), 0o600)


def _would_be(reason: str) -> str:
    """A would-be drain reason without its value and ``(+N more)``: ``slurmkit: <check>
    GPU<i> <uuid>`` (one observed drain per such reason, however its value moves)."""
    head, sep, _ = reason.partition(": ")
    body, sep2, _ = reason[len(head) + len(sep):].partition(": ")
    return f"{head}: {body}" if sep and sep2 else reason.split(" (+", 1)[0]


def xid_line_id(x, boot: str | None = None) -> str:
    """The identity of one kernel-log Xid line (a :class:`slurmkit.health.state.Xid`), the same
    whichever hook reads it: ``/dev/kmsg``'s sequence number within the boot (``boot``) when it
    has one, else the kernel's timestamp as written, with the code, PCI bus id and message (a
    line without either: its line number in the capture)."""
    where = (f"seq:{boot or ''}:{x.seq}" if x.seq is not None
             else f"ts:{x.timestamp}" if x.timestamp else f"line:{x.line}")
    return f"{where}|{x.xid}|{x.pci_bus_id or ''}|{x.message}"


def count_run(counters: dict, run, drained_reason: str | None = None, now: float | None = None,
              boot: str | None = None) -> dict:
    """Add what ``run`` (a :class:`slurmkit.hooks.flows.Run`) did to ``counters`` (in place,
    returned). ``drained_reason``: slurmkit's drain in force after the run (``health.json``).

    - a drain counts once, when the node becomes drained by slurmkit (``drained_reason`` set and
      none counted yet), not on every run that finds the drained node still failing;
    - an observed drain (a would-be drain slurmkit did not set: observe mode, or a reason that
      belongs to someone else) counts once per distinct would-be reason (:func:`_would_be`),
      until a run that judged the GPUs finds none;
    - a resume;
    - each kernel-log Xid line once (by code, GPU and class; ``xid_last`` = ``now``), whichever
      hook and run reads it: the prolog, epilog and health check each keep their own kernel-log
      cursor and a replayed capture holds the same lines on every run, so a line whose
      :func:`xid_line_id` is in ``xid_seen`` is not counted again (``boot``: the kernel's boot id,
      :func:`slurmkit.hooks.nodestate.boot_id`, part of a ``/dev/kmsg`` line's identity).
    """
    now = time.time() if now is None else now

    def bump(kind, key, n=1):
        counters[kind][key] = int(counters[kind].get(key, 0)) + n

    if drained_reason:
        if not counters.get("drain_open"):
            bump("drains", check_of(drained_reason))
        counters["drain_open"] = drained_reason
    else:
        counters["drain_open"] = None
    if run.verdict.drain_reason and not run.verdict.drained and not drained_reason:
        key = _would_be(run.verdict.drain_reason)
        if counters.get("observed_open") != key:
            bump("observed_drains", check_of(run.verdict.drain_reason))
        counters["observed_open"] = key
    elif not run.verdict.drain_reason and run.state is not None:
        counters["observed_open"] = None   # judged and healthy: a later failure counts again
    resumed = run.verdict.resumed
    if resumed:
        bump("resumes", check_of(resumed))
    state = run.state
    seen = counters.setdefault("xid_seen", {})
    for r in run.verdict.results:
        if r.check != "xid":
            continue
        n = 1
        if state is not None:
            ids = [xid_line_id(x, boot) for x in state.xids
                   if x.xid == r.value and (x.pci_bus_id or None) == (r.pci_bus_id or None)]
            ids = ids or [f"result|{r.value}|{r.pci_bus_id or ''}"]  # (lines not matched to the result)
            new = [i for i in dict.fromkeys(ids) if i not in seen]
            for i in new:
                seen[i] = round(now, 3)
            n = len(new)
        if not n:
            continue
        gpu = "" if r.gpu_index is None else str(r.gpu_index)
        key = f"{r.value}|{gpu}|{r.pci_bus_id or ''}|{_XID_CLASS.get(r.status, 'other')}"
        bump("xids", key, n)
        counters["xid_last"][key] = round(now, 3)
    if len(seen) > XID_SEEN_MAX:
        counters["xid_seen"] = dict(sorted(seen.items(), key=lambda kv: kv[1])[-XID_SEEN_MAX:])
    return counters


# ---- families ------------------------------------------------------------------------------

def running_jobs(state_dir, node: str) -> list[tuple[str, "JobStart"]]:
    """``[(job id, prolog record), ...]`` of the jobs whose prolog ran on ``node`` and whose
    epilog has not (``<state_dir>/<node>/job-<id>.json``, read as
    :class:`~slurmkit.hooks.nodestate.JobStart`; unreadable ones left out), sorted by job id."""
    from slurmkit.hooks.nodestate import JobStart, node_dir

    d = node_dir(state_dir, node)
    try:  # (not glob: it would import fnmatch and compile two patterns on every hook run)
        names = sorted(n for n in os.listdir(d) if n.startswith("job-") and n.endswith(".json"))
    except OSError:
        names = []
    out = []
    for name in names:
        path, job_id = os.path.join(d, name), name[len("job-"):-len(".json")]
        try:
            with open(path) as fh:
                out.append((job_id, JobStart.from_json(json.load(fh))))
        except (OSError, ValueError):
            continue
    return out


def skips_busy(states: str) -> bool:
    """Whether slurm.conf's ``HealthCheckNodeState`` (``states``, e.g. ``IDLE,CYCLE``) leaves a
    busy node unchecked: true unless it has ``ANY`` or both ``ALLOC`` and ``MIXED`` (slurm.conf(5);
    ``CYCLE`` only spreads the runs)."""
    words = {w.strip().upper() for w in states.split(",")} - {"CYCLE", ""}
    return not (not words or "ANY" in words or {"ALLOC", "MIXED"} <= words)


def node_families(node: str, drained_reason: str | None, counters: dict, jobs: list,
                  health_check_node_state: str | None = None) -> list:
    """Families of ``slurmkit_<node>_node.prom`` (see the module docstring) in
    :func:`slurmkit.hooks.textfile.render`'s shape. ``health_check_node_state``: the hooks
    config's (slurm.conf's HealthCheckNodeState; None: unknown, no
    ``slurmkit_healthcheck_skips_busy``)."""
    base = {"node": node}
    xids = []
    for key, n in sorted(counters["xids"].items()):
        xid, gpu, bus, cls = (key.split("|") + ["", "", "", ""])[:4]
        xids.append(({**base, "gpu": gpu, "pci_bus_id": bus, "xid": xid, "class": cls}, int(n)))
    xid_last = []
    for key, t in sorted(counters.get("xid_last", {}).items()):
        xid, gpu, bus, cls = (key.split("|") + ["", "", "", ""])[:4]
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            xid_last.append(({**base, "gpu": gpu, "pci_bus_id": bus, "xid": xid, "class": cls}, t))
    info = []
    for job_id, rec in jobs:
        for g in rec.gpus:
            gpu = "" if g.nvml_index is None else str(g.nvml_index)
            info.append(({**base, "gpu": gpu, "pci_bus_id": g.pci_bus_id or "", "job_id": job_id,
                          "user": rec.user or ""}, 1))
    return [
        ("slurmkit_node_drained_by_slurmkit", "gauge", "1 while a drain set by slurmkit is in force.",
         [(base, 1 if drained_reason else 0)]),
        ("slurmkit_node_drain_info", "gauge", "1 while slurmkit's drain is in force, with its check and reason.",
         [({**base, "check": check_of(drained_reason), "reason": drained_reason}, 1)] if drained_reason else []),
        ("slurmkit_drains_total", "counter", "Drains set by slurmkit, by the check that failed.",
         [({**base, "check": c}, int(n)) for c, n in sorted(counters["drains"].items())]),
        ("slurmkit_observed_drains_total", "counter", "Drains observe mode would have set, by check.",
         [({**base, "check": c}, int(n)) for c, n in sorted(counters["observed_drains"].items())]),
        ("slurmkit_resumes_total", "counter", "Resumes of a node slurmkit drained, by the check it was drained for.",
         [({**base, "check": c}, int(n)) for c, n in sorted(counters["resumes"].items())]),
        ("slurmkit_gpu_xid_errors_total", "counter", "NVRM Xid events seen in the kernel log, by Xid code.", xids),
        ("slurmkit_gpu_xid_last_timestamp_seconds", "gauge",
         "Unix time of the hook run that last counted the Xid (alert on a recent one, not on a counter).",
         xid_last),
        ("slurmkit_gpu_job_info", "gauge", "1 for each GPU of a running job (prolog ran, epilog not yet).", info),
        ("slurmkit_node_running_jobs", "gauge", "Jobs whose prolog ran on the node and whose epilog has not.",
         [(base, len(jobs))]),
        ("slurmkit_healthcheck_skips_busy", "gauge",
         "1 when HealthCheckNodeState leaves busy nodes unchecked (states: its value in slurm.conf).",
         [] if health_check_node_state is None else
         [({**base, "states": health_check_node_state}, 1 if skips_busy(health_check_node_state) else 0)]),
    ]


def dcgm_labels(uuid: str | None, pci_bus_id: str | None) -> dict:
    """The labels dcgm-exporter gives the same GPU, for joins with its series (its
    ``internal/pkg/rendermetrics`` template: ``UUID="GPU-..."``, ``pci_bus_id="00000000:3B:00.0"``,
    DCGM's 8-hex-digit domain in capitals): ``{"UUID": uuid, "dcgm_pci_bus_id": "00000000:3B:00.0"}``
    from NVML's ``0000:3b:00.0`` (slurmkit's ``pci_bus_id`` keeps sysfs' form). Empty values for an
    unknown UUID or bus id."""
    bus = ""
    if pci_bus_id and pci_bus_id.count(":") == 2:
        dom, rest = pci_bus_id.split(":", 1)
        bus = f"{dom.upper():0>8}:{rest.upper()}"
    return {"UUID": uuid or "", "dcgm_pci_bus_id": bus}


def _nonzero(name: str, labels: dict, value) -> tuple:
    """``(name, labels, value)`` for :func:`gpu_families`' ``add``, the value None (no sample)
    when it is 0 or False."""
    return name, labels, (value if value else None)


def gpu_families(node: str, state, results: list, expected_gpus: int | None) -> list:
    """Families of ``slurmkit_<node>_gpus.prom`` from a ``NodeState`` and the run's
    ``CheckResult`` list (see the module docstring)."""
    base = {"node": node}
    worst: dict[int, str] = {}
    for r in results:
        if r.gpu_index is not None and _RANK.get(r.status, 2) > _RANK.get(worst.get(r.gpu_index, "pass"), 0):
            worst[r.gpu_index] = r.status if r.status in _RANK else "fail"
    fam: dict[str, list] = {}

    def add(name, labels, value):
        if value is None or isinstance(value, (list, dict, str)):
            return
        fam.setdefault(name, []).append((labels, value))

    for g in state.gpus:
        lab = {**base, "gpu": str(g.index), "pci_bus_id": g.pci_bus_id or ""}
        add("slurmkit_gpu_info", {**lab, "uuid": g.uuid or "", **dcgm_labels(g.uuid, g.pci_bus_id)}, 1)
        add("slurmkit_gpu_status", lab, _RANK[worst.get(g.index, "pass")])
        e = g.get("total_energy_mj")
        add("slurmkit_gpu_energy_joules_total", lab, None if e is None else e / 1000.0)
        add("slurmkit_gpu_power_watts", lab, g.get("power_draw_w"))
        add("slurmkit_gpu_temperature_celsius", lab, g.get("temperature_c"))
        u = g.get("utilization_gpu_pct")
        add("slurmkit_gpu_utilization_ratio", lab, None if u is None else u / 100.0)
        for scope, etype, key in (("volatile", "correctable", "ecc_volatile_correctable"),
                                  ("volatile", "uncorrectable", "ecc_volatile_uncorrectable"),
                                  ("aggregate", "uncorrectable", "ecc_aggregate_uncorrectable"),
                                  ("aggregate", "sram_correctable", "ecc_aggregate_sram_correctable")):
            add("slurmkit_gpu_ecc_errors_total", {**lab, "scope": scope, "error_type": etype}, g.get(key))
        # memory health and clock events: a sample only where it is not 0 (a healthy GPU has none)
        for cause in ("sbe", "dbe"):
            add(*_nonzero("slurmkit_gpu_retired_pages", {**lab, "cause": cause}, g.get(f"retired_pages_{cause}")))
        add(*_nonzero("slurmkit_gpu_retired_pages_pending", lab, g.get("retired_pages_pending")))
        for cause in ("correctable", "uncorrectable"):
            add(*_nonzero("slurmkit_gpu_remapped_rows", {**lab, "cause": cause}, g.get(f"remap_{cause}_rows")))
        add(*_nonzero("slurmkit_gpu_row_remap_pending", lab, g.get("remap_pending")))
        add(*_nonzero("slurmkit_gpu_row_remap_failure", lab, g.get("remap_failure")))
        bits = g.get("clock_event_reasons")
        if isinstance(bits, int) and not isinstance(bits, bool):
            for bit, reason in CLOCK_EVENT_REASONS.items():
                if bits & bit:
                    add("slurmkit_gpu_clock_event_reason_active", {**lab, "reason": reason}, 1)
    visible = sum(1 for g in state.gpus if g.handle_rc == "SUCCESS") if state.init_rc == "SUCCESS" else 0
    out = [("slurmkit_gpus_visible", "gauge", "GPUs NVML enumerates with a usable handle.", [(base, visible)])]
    if expected_gpus is not None:
        out.append(("slurmkit_gpus_expected", "gauge", "GPUs gres.conf lists for the node.", [(base, expected_gpus)]))
    for name, mtype, help_text in _GPU_HELP:
        out.append((name, mtype, help_text, fam.get(name, [])))
    return out


_GPU_HELP = [
    ("slurmkit_gpu_info", "gauge",
     "1 per GPU, with its UUID (gpu is the NVML index; UUID and dcgm_pci_bus_id as dcgm-exporter labels them)."),
    ("slurmkit_gpu_status", "gauge", "Worst verdict of the GPU's last check: 0 pass, 1 warn, 2 fail."),
    ("slurmkit_gpu_energy_joules_total", "counter", "Energy since the driver loaded, in joules (NVML)."),
    ("slurmkit_gpu_power_watts", "gauge", "Power draw in watts at the last check."),
    ("slurmkit_gpu_temperature_celsius", "gauge", "GPU temperature in degrees Celsius at the last check."),
    ("slurmkit_gpu_utilization_ratio", "gauge", "GPU utilization at the last check, 0 to 1."),
    ("slurmkit_gpu_ecc_errors_total", "counter", "ECC error counts (volatile: since boot; aggregate: lifetime)."),
    ("slurmkit_gpu_retired_pages", "gauge", "Retired memory pages by cause (no sample: none)."),
    ("slurmkit_gpu_retired_pages_pending", "gauge", "1 while a page retirement waits for a reset (no sample: none)."),
    ("slurmkit_gpu_remapped_rows", "gauge", "Remapped memory rows by cause (no sample: none)."),
    ("slurmkit_gpu_row_remap_pending", "gauge", "1 while a row remap waits for a GPU reset (no sample: none)."),
    ("slurmkit_gpu_row_remap_failure", "gauge", "1 when a row remap failed (no sample: none)."),
    ("slurmkit_gpu_clock_event_reason_active", "gauge",
     "1 while the clock event (throttle) reason is active (no sample: inactive)."),
]


# ---- files ---------------------------------------------------------------------------------

def node_files(run) -> list[tuple[str, str]]:
    """Count ``run`` into the node's counters (saved) and render the node's textfiles:
    ``[(path, text)]`` for ``slurmkit_<node>_gpus.prom`` (when the run read the GPUs, or could
    not: its marker), ``slurmkit_<node>_fabric.prom`` (when it read them) and
    ``slurmkit_<node>_node.prom`` (always), in the order they are to be renamed into place (GPU
    readings first: a scrape between two renames then sees a job's info series only with the
    readings taken at its prolog, and the epilog's readings before it goes). The caller writes
    them (:func:`slurmkit.hooks.textfile.write_all`, with the hook's own file). Raises OSError
    when the textfile directory cannot be made (the caller logs it as own trouble); a counters
    file that cannot be written only loses the counts."""
    try:
        return _node_files(run)
    except OSError:
        raise
    except Exception as exc:  # a bug here must not fail the hook: the caller logs it as own trouble
        raise OSError(f"internal error writing the node metrics: {type(exc).__name__}: {exc}") from exc


def _node_files(run) -> list[tuple[str, str]]:
    from slurmkit.hooks import textfile
    from slurmkit.hooks.nodestate import boot_id, load_health

    cfg, node = run.cfg, run.node
    boot = boot_id() if run.state is not None and run.state.xids else None
    try:
        drained = load_health(cfg.state_dir, node).drained_reason
        counters = count_run(load_counters(cfg.state_dir, node), run, drained, boot=boot)
        jobs = running_jobs(cfg.state_dir, node)
        loaded = True
    except OSError:
        drained, jobs, loaded = (run.verdict.drain_reason if run.verdict.drained else None), [], False
        counters = count_run({**{k: {} for k in _KINDS}, "drain_open": None, "observed_open": None}, run, drained,
                             boot=boot)
    if loaded:
        try:
            save_counters(cfg.state_dir, node, counters)
        except OSError as exc:  # a read-only or full state directory: this run's series are still written
            run.log.error(f"slurmkit's own trouble (no drain): cannot keep the node's counters under "
                          f"{cfg.state_dir}: {exc.strerror or exc}")
    os.makedirs(cfg.textfile_dir, exist_ok=True)
    out = []
    now = round(time.time(), 3)
    # A run that could not read the GPUs (own trouble, NVML hang) rewrites the GPU file with its
    # marker (slurmkit_gpus_read 0) instead of leaving the last good run's readings in place.
    expected = None if run.node_gpus.files is None else len(run.node_gpus.files)
    if run.state is not None or not run.node_gpus.gpuless:  # a CPU-only node has no GPU file
        fams = (gpu_families(node, run.state, run.verdict.results, expected) if run.state is not None
                else unread_gpu_families(node, expected))
        out.append((os.path.join(os.fspath(cfg.textfile_dir), GPUS_FILE.format(node=node)),
                    textfile.render(fams + gpu_file_stamps(node, now, run.state is not None))))
    if run.state is not None:  # the fabric the site profile expects, as the run found it
        out.append((os.path.join(os.fspath(cfg.textfile_dir), FABRIC_FILE.format(node=node)),
                    textfile.render(fabric_families(node, run.state.ib_ports))))
    out.append((os.path.join(os.fspath(cfg.textfile_dir), NODE_FILE.format(node=node)),
                textfile.render(node_families(node, drained, counters, jobs,
                                              getattr(cfg, "health_check_node_state", None))
                                + [file_stamp("slurmkit_node_metrics_timestamp_seconds", node, now)])))
    return out


# ---- run times, unread GPUs, the expected fabric ------------------------------------------

def file_stamp(name: str, node: str, now: float) -> tuple:
    """The family that says when a per-node file was written: ``<name>{node}`` = Unix time (s)
    of the hook run that wrote it (every textfile carries the time of its run)."""
    return (name, "gauge", "Unix time of the hook run that wrote this file.", [({"node": node}, now)])


def gpu_file_stamps(node: str, now: float, read: bool) -> list:
    """The GPU file's run families: ``slurmkit_gpus_read_timestamp_seconds{node}`` (Unix time of
    the hook run that wrote it) and ``slurmkit_gpus_read{node}``: 1 when that run read the GPUs,
    0 when it could not (own trouble, NVML hang; the file then holds no readings)."""
    return [file_stamp("slurmkit_gpus_read_timestamp_seconds", node, now),
            ("slurmkit_gpus_read", "gauge",
             "1 when the last hook run read the GPUs, 0 when it could not (the file then holds no readings).",
             [({"node": node}, 1 if read else 0)])]


def unread_gpu_families(node: str, expected_gpus: int | None) -> list:
    """The GPU file of a run that could not read the GPUs: ``slurmkit_gpus_expected`` (when
    gres.conf was read) and the empty per-GPU families, so no reading of an earlier run stays."""
    base = {"node": node}
    out = []
    if expected_gpus is not None:
        out.append(("slurmkit_gpus_expected", "gauge", "GPUs gres.conf lists for the node.", [(base, expected_gpus)]))
    return out + [(name, mtype, help_text, []) for name, mtype, help_text in _GPU_HELP]



def fabric_families(node: str, ports: list | None) -> list:
    """``slurmkit_<node>_fabric.prom``: what only slurmkit knows about the node's fabric, the
    ports the site profile expects (node_exporter's infiniband collector exports each port's
    state, rate and counters; rules and dashboard join the two on ``instance, device, port``).

    ``slurmkit_fabric_port_expected_rate_bytes_per_second{node, device, port, link_layer, role,
    tier, netdev, pci, expected_gbps, kind}`` gauge, one per port the run read
    (:func:`slurmkit.health.fabric.read_ib_ports`): the profile's rate in bytes/s (``rate_gbps``
    * 1e9 / 8, node_exporter's unit; 0 when the profile gives none). ``device``/``port``: the
    kernel's HCA name now and the port number, as node_exporter labels them (the HCA found by its
    PCI address; a missing one: the profile's name, ``port`` as the profile gives it or "");
    ``link_layer``: the profile's (InfiniBand | RoCE | Ethernet; a node without a node type: the
    port's own, as sysfs shows it); ``role``: compute | other | unlisted (no node type: every port
    the kernel lists); ``tier``: fail (a fault drains: compute, or any role with ``[health]
    ib_judge_other_nics``) | warn (a fault warns), the alerts' severity;
    ``expected_gbps``: the profile's rate in Gb/s ("" when none), for the alert text;
    ``kind``: ``rdma`` (under /sys/class/infiniband: node_exporter's infiniband collector) or
    ``netdev`` (a plain Ethernet NIC: its netclass collector)."""
    samples = []
    for p in ports or []:
        want = p.get("expected_rate_gbps")
        port = p.get("port")
        samples.append(({"node": node, "device": p.get("hca") or "", "port": "" if port is None else str(port),
                         "link_layer": (p.get("profile_link_layer") or p.get("expected_link_layer")
                                        or p.get("link_layer") or ""),
                         "role": p.get("role") or "compute", "tier": p.get("tier") or "fail",
                         "netdev": p.get("netdev") or "",
                         "pci": p.get("pci") or "", "expected_gbps": "" if not want else f"{want:g}",
                         "kind": "netdev" if p.get("kind") == "netdev" else "rdma"},
                        float(want) * 1e9 / 8 if want else 0))
    return [("slurmkit_fabric_port_expected_rate_bytes_per_second", "gauge",
             "Ports the site profile expects on the node, with their expected rate in bytes/s (0: none given).",
             samples)]
