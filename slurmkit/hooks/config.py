"""The hooks' own configuration: ``<slurm.conf dir>/slurmkit-hooks.toml``, written by
``slurmkit hooks install`` and read by every hook run.

Keys (all optional except ``slurm_conf``)::

    slurm_conf = "/etc/slurm/slurm.conf"  # used when the hook's environment has no SLURM_CONF
                                          # (HealthCheckProgram runs with none)
    gres_conf = "/etc/slurm/gres.conf"    # expected GPUs and Slurm's GPU index -> device file;
                                          # unset: the gres.conf beside the slurm.conf found
    conf_cache = "/var/spool/slurmd/%n/conf-cache"  # slurmd's configless cache (%n: node
                                          # name); unset: /run/slurm/conf, then
                                          # /var/spool/slurmd/conf-cache
                                          # (which files are read: slurmkit/hooks/confpaths.py)
    profile = "/etc/slurm/site.toml"      # site profile: [health] thresholds, mode, clocks, power
    mode = "observe"                      # enforce | observe; unset: the profile's [health].mode
    deadline_s = 8.0                      # total NVML deadline per hook run (seconds); unset: the
                                          # profile's [health].deadline_s
    resume_after = 3                      # clean health checks in a row before slurmkit resumes a
                                          # node it drained
    scontrol_timeout_s = 5.0              # drain / resume / show node deadline (seconds)
    slurm_bin_dir = "/usr/bin"            # where scontrol is (Slurm gives hooks no PATH)
    dcgmi = "/usr/bin/dcgmi"              # DCGM's CLI for the active check (absent: skipped)
    all_reduce_perf = "/usr/bin/all_reduce_perf"  # nccl-tests, for [health] nccl_busbw_min_gbps
    state_dir = "/var/lib/slurmkit/hooks" # per-node state (clean-run counter, prolog energy)
    jobs_dir = "/var/lib/slurmkit/jobs"   # what the prolog publishes to a job's user (its
                                          # kernel-log window; unset: "jobs" beside state_dir)
    spool_dir = "/var/spool/slurmkit"     # per-job energy spool (root only)
    textfile_dir = "/var/lib/prometheus/node-exporter"  # node_exporter textfile collector dir
    log_file = true                       # also write log lines to <state_dir>/<node>/hooks.log;
                                          # unset: only where syslog (/dev/log) is absent
    health_check_node_state = "IDLE"      # slurm.conf's HealthCheckNodeState as install found it
                                          # (unset: not known); exported so the stale-hook alert
                                          # spares a busy node the health check skips by design
    [checks]                              # per-check switches over the profile's [health.checks]
    pcie_width = false                    # (check ids: slurmkit/health/checks.toml)
    [nodes.n3]                            # per node: where its GPU state comes from
    snapshot = "/path/to/n3.json"         # replay a recorded snapshot (default: live NVML)
    sysfs = "/path/to/n3-sys"             # with a snapshot: read InfiniBand ports under this root
    dcgm_diag = "/path/to/n3-diag.json"   # replay a recorded `dcgmi diag -j` output (or its -r N table)
    nccl_allreduce = "/path/to/n3-ar.txt" # replay a recorded `all_reduce_perf` output
    kmsg = "/path/to/n3-kmsg"             # live: read the kernel log from this file (records in
                                          # /dev/kmsg's format) instead of /dev/kmsg

Only ``tomllib`` is imported (a hook reads this on every job). Hook-only values have their one
default in :data:`DEFAULTS`; ``mode`` and ``deadline_s`` override profile values, so theirs is
"unset" and :meth:`HookConfig.over_profile` takes the profile's (defaults:
:class:`slurmkit.profile.health.Health`).
"""

from __future__ import annotations

from slurmkit.errors import InputError

import os

from slurmkit.records import field, record

FILE_NAME = "slurmkit-hooks.toml"

#: The one default of each hook-only value (``slurmkit hooks install`` shows these too).
DEFAULTS = {
    "resume_after": 3, "scontrol_timeout_s": 5.0,
    "state_dir": "/var/lib/slurmkit/hooks", "spool_dir": "/var/spool/slurmkit",
    "textfile_dir": "/var/lib/prometheus/node-exporter", "dcgmi": "/usr/bin/dcgmi",
    "all_reduce_perf": "/usr/bin/all_reduce_perf",
}


#: The keys of a ``[nodes.<n>]`` table (each a path).
NODE_KEYS = ("snapshot", "sysfs", "dcgm_diag", "nccl_allreduce", "kmsg")


class HookConfigError(InputError):
    """The hooks config cannot be read: ``file``, ``line`` (TOML syntax errors), ``message``,
    ``key`` (the key that is wrong)."""


@record(frozen=True)
class HookConfig:
    """Parsed ``slurmkit-hooks.toml``: paths as ``str`` (a relative one in the file is taken
    from the file's directory), ``nodes`` {node: {"snapshot": path, ...}}.

    ``mode`` / ``deadline_s`` (s): None when the file does not set them, until
    :meth:`over_profile` fills them from the profile's ``[health]``. ``jobs_dir``: where the
    prolog publishes a job's kernel-log window to the job's user
    (:func:`slurmkit.hooks.nodestate.publish_job`); unset, ``jobs`` beside ``state_dir`` (whose
    own mode, 0700, lets nobody else in)."""

    path: str
    slurm_conf: str
    gres_conf: str | None = None
    conf_cache: str | None = None
    profile: str | None = None
    mode: str | None = None
    deadline_s: float | None = None
    resume_after: int = DEFAULTS["resume_after"]
    scontrol_timeout_s: float = DEFAULTS["scontrol_timeout_s"]
    slurm_bin_dir: str | None = None
    dcgmi: str = DEFAULTS["dcgmi"]
    all_reduce_perf: str = DEFAULTS["all_reduce_perf"]
    state_dir: str = DEFAULTS["state_dir"]
    jobs_dir: str = os.path.join(os.path.dirname(DEFAULTS["state_dir"]), "jobs")
    spool_dir: str = DEFAULTS["spool_dir"]
    textfile_dir: str = DEFAULTS["textfile_dir"]
    log_file: bool | None = None
    health_check_node_state: str | None = None
    nodes: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)

    def snapshot_for(self, node: str) -> str | None:
        """The snapshot file node ``node`` replays, or None for live NVML."""
        return self.nodes.get(node, {}).get("snapshot")

    def sysfs_for(self, node: str) -> str | None:
        """The sysfs root node ``node``'s InfiniBand ports are read from when it replays a
        snapshot (``[nodes.<n>] sysfs``; None: live reads ``/sys``, a replay keeps its capture's)."""
        return self.nodes.get(node, {}).get("sysfs")

    def dcgm_capture_for(self, node: str) -> str | None:
        """The recorded ``dcgmi diag -j`` output node ``node``'s active check replays
        (``[nodes.<n>] dcgm_diag``; None: run ``dcgmi``)."""
        return self.nodes.get(node, {}).get("dcgm_diag")

    def nccl_capture_for(self, node: str) -> str | None:
        """The recorded ``all_reduce_perf`` output the bandwidth floor replays (``[nodes.<n>]
        nccl_allreduce``; None: run it)."""
        return self.nodes.get(node, {}).get("nccl_allreduce")

    def kmsg_for(self, node: str) -> str | None:
        """The file node ``node``'s live reads take the kernel log from (``[nodes.<n>] kmsg``, in
        ``/dev/kmsg``'s record format; None: ``/dev/kmsg``)."""
        return self.nodes.get(node, {}).get("kmsg")

    def over_profile(self, health) -> "HookConfig":
        """This config with ``mode`` / ``deadline_s`` taken from ``health`` (the profile's
        :class:`~slurmkit.profile.health.Health`) where this file leaves them unset."""
        from slurmkit.records import replace

        return replace(self, mode=self.mode if self.mode is not None else health.mode,
                       deadline_s=self.deadline_s if self.deadline_s is not None else float(health.deadline_s))


_TYPES = {"slurm_conf": str, "gres_conf": str, "conf_cache": str, "profile": str, "mode": str, "deadline_s": (int, float),
          "resume_after": int, "scontrol_timeout_s": (int, float), "slurm_bin_dir": str, "dcgmi": str, "all_reduce_perf": str, "state_dir": str, "jobs_dir": str, "spool_dir": str,
          "textfile_dir": str, "log_file": bool, "health_check_node_state": str, "nodes": dict, "checks": dict}


_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


def _bare(key: str) -> bool:
    """A TOML bare key: one or more of ``A-Za-z0-9_-``."""
    return bool(key) and _BARE.issuperset(key)


def _decimal(text: str) -> bool:
    """``-?(0|[1-9][0-9]*)``: a TOML decimal integer without ``+``, ``_`` or leading zeros."""
    digits = text[1:] if text.startswith("-") else text
    return digits == "0" or (bool(digits) and digits[0] != "0" and _DIGITS.issuperset(digits))


def _plain_float(text: str) -> bool:
    """``-?(0|[1-9][0-9]*)\\.[0-9]+``: a TOML float without exponent, ``+`` or ``_``."""
    whole, dot, frac = text.partition(".")
    return bool(dot) and _decimal(whole) and bool(frac) and _DIGITS.issuperset(frac)


def simple_toml(text: str) -> dict | None:
    """The data of TOML ``text`` when it is written in the plain subset :func:`render` writes,
    else None (then ``tomllib`` reads it: the judge of anything else, errors included).

    The subset: blank and ``#`` comment lines, ``[a.b]`` table headers (each once), and
    ``key = value`` lines with a bare key and a value that is a ``"string"`` without a backslash
    or inner quote, ``true`` / ``false``, a decimal integer or a plain decimal float. Every such
    text means the same to ``tomllib``. It exists because a hook reads the config on every job
    and importing ``tomllib`` costs several milliseconds of the prolog's start-up; it uses string
    methods only (compiling regular expressions for it cost the hook another half millisecond).
    """
    data: dict = {}
    table, seen = data, set()
    for raw in text.split("\n"):
        if "\r" in raw[:-1] or not raw.replace("\t", " ").rstrip("\r").isprintable():
            return None  # a lone CR or a control character (in a comment too): tomllib's to judge
        line = raw.strip(" \t\r")
        if not line or line.startswith("#"):
            continue
        if line[0] == "[" and line[-1] == "]" and all(_bare(part) for part in line[1:-1].split(".")):
            name = line[1:-1]
            if name in seen:
                return None
            seen.add(name)
            table = data
            for part in name.split("."):
                table = table.setdefault(part, {})
                if not isinstance(table, dict):
                    return None
            continue
        key, eq, v = line.partition("=")
        key, v = key.rstrip(" \t"), v.lstrip(" \t")
        if not eq or not _bare(key) or key in table:
            return None
        if len(v) >= 2 and v[0] == v[-1] == '"' and '"' not in v[1:-1] and "\\" not in v \
                and all(c >= " " or c == "\t" for c in v) and "\x7f" not in v:
            table[key] = v[1:-1]
        elif v in ("true", "false"):
            table[key] = v == "true"
        elif _decimal(v):
            table[key] = int(v)
        elif _plain_float(v):
            table[key] = float(v)
        else:
            return None
    return data


def parse(text: str, path) -> HookConfig:
    """Parse the TOML ``text`` of ``path``. Raises :class:`HookConfigError` naming the file and
    the line (TOML syntax) or the key (unknown key, wrong type, bad mode). The plain subset that
    ``hooks install`` writes is read without importing ``tomllib`` (:func:`simple_toml`)."""
    data = simple_toml(text)
    if data is None:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            import re

            m = re.search(r"\(at line (\d+)", str(exc))  # Python < 3.14 has no exc.lineno
            line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
            if line is None and "(at end of document)" in str(exc):
                line = max(1, len(text.splitlines()))   # cut short: the last line is where it stops
            raise HookConfigError(path, line, f"not valid TOML: {exc}") from None
    for key, value in data.items():
        want = _TYPES.get(key)
        if want is None:
            raise HookConfigError(path, None, f"unknown key (known: {', '.join(_TYPES)})", key)
        if isinstance(value, bool) is not (want is bool) or not isinstance(value, want):
            raise HookConfigError(path, None, f"wrong type {type(value).__name__}", key)
    if "slurm_conf" not in data:
        raise HookConfigError(path, None, "missing (the path of slurm.conf)", "slurm_conf")
    mode = data.get("mode")
    if mode not in (None, "enforce", "observe"):
        raise HookConfigError(path, None, f"want enforce or observe, got {mode!r}", "mode")
    if int(data.get("resume_after", DEFAULTS["resume_after"])) < 1:
        raise HookConfigError(path, None, "want 1 or more", "resume_after")
    if data.get("checks"):
        from slurmkit.health.config import check_ids

        known = check_ids()
        for cid, on in data["checks"].items():
            if cid not in known:
                raise HookConfigError(path, None, f"unknown check id (known: {', '.join(known)})", f"checks.{cid}")
            if not isinstance(on, bool):
                raise HookConfigError(path, None, "want true or false", f"checks.{cid}")
    base = os.path.dirname(os.fspath(path))
    nodes = {}
    for name, table in data.get("nodes", {}).items():
        if not isinstance(table, dict) or set(table) - set(NODE_KEYS):
            raise HookConfigError(path, None, f"want a table with only {', '.join(NODE_KEYS)}", f"nodes.{name}")
        entry = {}
        for key in NODE_KEYS:
            if key in table:
                if not isinstance(table[key], str):
                    raise HookConfigError(path, None, "want a path string", f"nodes.{name}.{key}")
                entry[key] = os.path.join(base, table[key])
        nodes[name] = entry

    def p(key):
        v = data.get(key, DEFAULTS.get(key))
        return None if v is None else os.path.join(base, v)

    return HookConfig(
        path=os.fspath(path), slurm_conf=p("slurm_conf"), gres_conf=p("gres_conf"), conf_cache=p("conf_cache"),
        profile=p("profile"),
        mode=mode, deadline_s=float(data["deadline_s"]) if "deadline_s" in data else None,
        resume_after=int(data.get("resume_after", DEFAULTS["resume_after"])),
        scontrol_timeout_s=float(data.get("scontrol_timeout_s", DEFAULTS["scontrol_timeout_s"])),
        slurm_bin_dir=data.get("slurm_bin_dir"), dcgmi=data.get("dcgmi", DEFAULTS["dcgmi"]),
        all_reduce_perf=data.get("all_reduce_perf", DEFAULTS["all_reduce_perf"]), state_dir=p("state_dir"),
        jobs_dir=p("jobs_dir") if "jobs_dir" in data else os.path.join(os.path.dirname(p("state_dir")), "jobs"),
        spool_dir=p("spool_dir"), textfile_dir=p("textfile_dir"), log_file=data.get("log_file"),
        health_check_node_state=data.get("health_check_node_state"), nodes=nodes,
        checks=dict(data.get("checks", {})))


def load(path) -> HookConfig:
    """Read and parse the config file ``path`` (:class:`HookConfigError` when unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise HookConfigError(path, None, f"cannot read: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    return parse(text, path)


def render(slurm_conf, *, gres_conf=None, conf_cache=None, profile=None, mode=None, state_dir=None, spool_dir=None,
           textfile_dir=None, jobs_dir=None, resume_after=DEFAULTS["resume_after"], deadline_s=None,
           snapshots: dict | None = None, slurm_bin_dir=None, sysfs: dict | None = None,
           dcgm_diag: dict | None = None, nccl_allreduce: dict | None = None, kmsg: dict | None = None,
           log_file: bool | None = None, health_check_node_state: str | None = None) -> str:
    """The TOML text install writes (absolute paths; ``conf_cache`` as given, ``%n`` kept for
    the hooks to expand; ``snapshots`` {node: path}, ``sysfs``
    {node: sysfs root}, ``dcgm_diag`` {node: recorded dcgmi output}, ``kmsg`` {node: kernel-log
    file}; ``jobs_dir`` None: not written, "jobs" beside ``state_dir``). ``mode`` /
    ``deadline_s`` None: not written, so the hooks take the profile's ``[health]`` values;
    ``log_file`` None: not written (the log file only where syslog is absent);
    ``health_check_node_state``: slurm.conf's HealthCheckNodeState (None: not written)."""
    def q(v):
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["# slurmkit hooks configuration, written by `slurmkit hooks install` (see",
             "# slurmkit/hooks/config.py for every key). Hooks read it on every run.",
             f"slurm_conf = {q(os.path.abspath(slurm_conf))}"]
    if gres_conf:
        lines.append(f"gres_conf = {q(os.path.abspath(gres_conf))}")
    if conf_cache:
        lines.append(f"conf_cache = {q(conf_cache)}")
    if profile:
        lines.append(f"profile = {q(os.path.abspath(profile))}")
    if mode is not None:
        lines.append(f"mode = {q(mode)}")
    if deadline_s is not None:
        lines.append(f"deadline_s = {float(deadline_s)}")
    lines += [f"resume_after = {int(resume_after)}",
              f"state_dir = {q(os.path.abspath(state_dir or DEFAULTS['state_dir']))}",
              f"spool_dir = {q(os.path.abspath(spool_dir or DEFAULTS['spool_dir']))}",
              f"textfile_dir = {q(os.path.abspath(textfile_dir or DEFAULTS['textfile_dir']))}"]
    if jobs_dir:
        lines.append(f"jobs_dir = {q(os.path.abspath(jobs_dir))}")
    if log_file is not None:
        lines.append(f"log_file = {'true' if log_file else 'false'}")
    if slurm_bin_dir:
        lines.append(f"slurm_bin_dir = {q(slurm_bin_dir)}")
    if health_check_node_state:
        lines.append(f"health_check_node_state = {q(health_check_node_state)}")
    per_node = {"snapshot": snapshots or {}, "sysfs": sysfs or {}, "dcgm_diag": dcgm_diag or {},
                "nccl_allreduce": nccl_allreduce or {}, "kmsg": kmsg or {}}
    for node in sorted(set().union(*per_node.values())):
        lines += ["", f"[nodes.{node}]"]
        for key, paths in per_node.items():
            if node in paths:
                lines.append(f"{key} = {q(os.path.abspath(paths[node]))}")
    return "\n".join(lines) + "\n"
