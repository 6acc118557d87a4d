"""Entry point of the hook shims: ``main(hook, config_path) -> exit status`` (0 or 1).

The shims in ``prolog_epilog/`` call this directly (no click). It finds the node name
(``SLURMD_NODENAME``, else the host name), loads the hooks config (``config_path``, else
``SLURMKIT_HOOKS_CONFIG``), runs the flow (:mod:`slurmkit.hooks.flows`), writes the Prometheus
textfile and turns any exception into logged, counted own trouble with exit 0.
"""

from __future__ import annotations

import os
import time

from slurmkit.hooks.log import HookLog


def node_name(env) -> str:
    """The Slurm node name: ``SLURMD_NODENAME`` (prolog / epilog), else the short host name
    (HealthCheckProgram gets no Slurm variables; slurmd runs it on its own host)."""
    return env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]


def main(hook: str, config_path: str | None = None, env=None) -> int:
    """Run ``hook`` (prolog | epilog | healthcheck). Never raises; returns 0 or 1.

    Python's cyclic garbage collector is off while the hook runs and back as it was after: a
    run is short and leaves little cyclic garbage, and the collector's passes over the objects
    of every module the run loads cost it ~2 ms (about 5 % of a prolog). What the run allocated
    is then moved to the oldest generation (``gc.freeze()`` and ``gc.unfreeze()``, unless the
    caller keeps objects frozen itself), so turning the collector back on does not start with
    one young pass over all of it."""
    import gc

    was_on = gc.isenabled()
    gc.disable()
    try:
        return _run(hook, config_path, env)
    finally:
        if was_on:
            if not gc.get_freeze_count():
                # what the run allocated joins the oldest generation (freeze, then unfreeze:
                # the young count starts again at 0) instead of one young pass over all of it
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _run(hook: str, config_path: str | None, env) -> int:
    t0 = time.monotonic()
    env = os.environ if env is None else env
    node = node_name(env)
    log = HookLog(hook, node, env.get("SLURM_JOB_ID"))
    try:
        from slurmkit.hooks import flows
        from slurmkit.hooks.config import HookConfigError, load

        if hook not in flows.FLOWS:
            log.error(f"unknown hook {hook!r} (want prolog, epilog or healthcheck)")
            return 0
        path = config_path or env.get("SLURMKIT_HOOKS_CONFIG")
        if not path:
            log.error("slurmkit's own trouble (no drain): no hooks config (run 'slurmkit hooks install')")
            write_config_trouble(hook, node, None, time.monotonic() - t0, log)
            return 0
        try:
            cfg = load(path)
        except HookConfigError as exc:
            log.error(f"slurmkit's own trouble (no drain): {exc}")
            write_config_trouble(hook, node, path, time.monotonic() - t0, log)
            return 0
    except Exception as exc:  # a bug or a broken install: never block jobs for it
        log.error(f"slurmkit's own trouble (no drain): internal error: {type(exc).__name__}: {exc}")
        return 0
    run = flows.Run(hook, node, env, cfg, log)
    code = 0
    try:
        code = flows.FLOWS[hook](run)
    except Exception as exc:
        import traceback

        run.own_error(f"internal error: {type(exc).__name__}: {exc}")
        for line in traceback.format_exc().splitlines():
            log.error(line)
        code = 0
    code = 1 if code == 1 else 0
    duration = time.monotonic() - t0
    total, last = 0, None
    if run.verdict.own_errors:
        from slurmkit.hooks.nodestate import count_own_error

        total = count_own_error(cfg.state_dir, node, hook)
        last = time.time()
    try:
        from slurmkit.hooks.nodestate import load_health

        h = load_health(cfg.state_dir, node)
        total, last = (total or h.own_errors.get(hook, 0)), h.own_error_at.get(hook, last)
    except OSError:
        pass
    try:
        write_textfile(run, code, duration, total, last)
    except OSError as exc:
        log.error(f"slurmkit's own trouble (no drain): textfile {cfg.textfile_dir}: {exc.strerror or exc}")
    except Exception as exc:  # a bug in the metrics must not fail the job either
        log.error(f"slurmkit's own trouble (no drain): textfile: internal error: {type(exc).__name__}: {exc}")
    log.info(f"{hook} done in {duration:.3f} s, exit {code}"
             + (f", drain reason: {run.verdict.drain_reason}" if run.verdict.drain_reason else ""))
    write_log_file(cfg, node, log)
    return code


def write_log_file(cfg, node: str, log) -> None:
    """Append the run's log lines to ``<state_dir>/<node>/hooks.log`` where
    :func:`slurmkit.hooks.log.wants_file` says so (the config's ``log_file``, else no syslog);
    a failure is said on stderr only (never raises)."""
    from slurmkit.hooks.log import log_path, wants_file

    if not wants_file(cfg.log_file):
        return
    try:
        log.append_to(log_path(cfg.state_dir, node))
    except Exception as exc:  # a log file that cannot be written must not fail the job
        import sys

        try:
            sys.stderr.write(f"slurmkit-{log.hook}: error: log file under {cfg.state_dir}: {exc}\n")
        except Exception:
            pass


def config_dirs(path: str | None) -> tuple[str, str]:
    """``(state_dir, textfile_dir)`` for a run whose hooks config cannot be loaded: the values
    the file gives on lines of their own (``textfile_dir = "..."``) where it can be read, else
    :data:`slurmkit.hooks.config.DEFAULTS`'."""
    from slurmkit.hooks.config import DEFAULTS

    dirs = {"state_dir": DEFAULTS["state_dir"], "textfile_dir": DEFAULTS["textfile_dir"]}
    try:
        with open(path) as fh:  # type: ignore[arg-type]
            lines = fh.read(1 << 20).splitlines()
    except (OSError, TypeError, UnicodeDecodeError):
        lines = []
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            break  # top-level keys only
        key, eq, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if eq and key in dirs and value.startswith('"') and '"' in value[1:]:
            dirs[key] = value[1:value.index('"', 1)]
    return dirs["state_dir"], dirs["textfile_dir"]


def write_config_trouble(hook: str, node: str, path: str | None, duration_s: float, log) -> None:
    """A run that could not load its hooks config still counts its own trouble and writes
    ``slurmkit_<node>_<hook>.prom`` (exit code 0, ``slurmkit_hook_own_errors_total``, duration,
    last run time), so ``SlurmkitHookOwnTrouble`` fires on the first run instead of the nodes
    going dark; directories from :func:`config_dirs`. Logs (never raises) when it cannot."""
    from slurmkit.hooks import textfile
    from slurmkit.hooks.nodestate import count_own_error

    state_dir, textfile_dir = config_dirs(path)
    base = {"node": node, "hook": hook}
    total = max(1, count_own_error(state_dir, node, hook))
    families = [
        ("slurmkit_hook_duration_seconds", "gauge", "Wall time of the last hook run in seconds.",
         [(base, round(duration_s, 6))]),
        ("slurmkit_hook_last_run_timestamp_seconds", "gauge", "Unix time of the last hook run.",
         [(base, round(time.time(), 3))]),
        ("slurmkit_hook_exit_code", "gauge", "Exit status of the last hook run (0 or 1).", [(base, 0)]),
        ("slurmkit_hook_own_errors_total", "counter",
         "Hook runs that hit slurmkit's own trouble (logged, never a drain).",
         [(base, total)]),
        own_error_family(base, time.time()),
    ]
    try:
        os.makedirs(textfile_dir, exist_ok=True)
        textfile.write(os.path.join(textfile_dir, f"slurmkit_{node}_{hook}.prom"), textfile.render(families))
    except OSError as exc:
        log.error(f"slurmkit's own trouble (no drain): textfile {textfile_dir}: {exc.strerror or exc}")


def textfile_path(cfg, node: str, hook: str) -> str:
    """``<textfile_dir>/slurmkit_<node>_<hook>.prom``."""
    return os.path.join(os.fspath(cfg.textfile_dir), f"slurmkit_{node}_{hook}.prom")


def own_error_family(base: dict, last: float | None) -> tuple:
    """``slurmkit_hook_own_error_last_timestamp_seconds{node,hook}``: Unix time of the hook's last
    run that hit slurmkit's own trouble (``health.json`` ``own_error_at``; no sample when none
    has). ``SlurmkitHookOwnTrouble`` fires on a recent one: a count that only reappears after a
    gap in the data (reboot, Prometheus restart) is not a new trouble."""
    return ("slurmkit_hook_own_error_last_timestamp_seconds", "gauge",
            "Unix time of the last hook run that hit slurmkit's own trouble.",
            [] if last is None else [(base, round(last, 3))])


def write_textfile(run, code: int, duration_s: float, own_errors_total: int,
                   own_error_last: float | None = None) -> str:
    """Write the run's metrics: its own file (see :mod:`slurmkit.hooks.textfile`) and the
    node's (:func:`slurmkit.hooks.metrics.node_files`), renamed into place in that order with
    one fsync of the textfile directory; returns the path of its own file. Raises OSError (the
    hook's own file is still written when only the node files fail)."""
    from slurmkit.hooks import textfile
    from slurmkit.hooks.metrics import check_samples, node_files
    from slurmkit.profile.health import Health

    node, hook = run.node, run.hook
    base = {"node": node, "hook": hook}
    checks, passed = check_samples(base, run.verdict.results,
                                   nvml_timeout=run.verdict.drain_reason == "slurmkit: nvml-timeout")
    families = [
        ("slurmkit_health_check_status", "gauge",
         "Worst result of the last run per check, GPU and port that did not pass: 1 warn, 2 fail.", checks),
        ("slurmkit_health_checks_passed", "gauge",
         "Results of the last run (per check, GPU and port) that passed.", [(base, passed)]),
        ("slurmkit_hook_duration_seconds", "gauge", "Wall time of the last hook run in seconds.",
         [(base, round(duration_s, 6))]),
        ("slurmkit_hook_last_run_timestamp_seconds", "gauge", "Unix time of the last hook run.",
         [(base, round(time.time(), 3))]),
        ("slurmkit_hook_exit_code", "gauge", "Exit status of the last hook run (0 or 1).", [(base, code)]),
        ("slurmkit_hook_own_errors_total", "counter",
         "Hook runs that hit slurmkit's own trouble (logged, never a drain).", [(base, own_errors_total)]),
        own_error_family(base, own_error_last),
        ("slurmkit_hook_deadline_seconds", "gauge", "NVML deadline of a hook run in seconds (deadline_s).",
         [(base, float(run.cfg.deadline_s if run.cfg.deadline_s is not None else Health.deadline_s))]),
        ("slurmkit_hook_observed_actions", "gauge",
         "Observe mode: actions the last hook run would have carried out (kill, clocks, power, accounting).",
         [({**base, "action": kind}, n) for kind, n in sorted(run.verdict.observed.items())]),
    ]
    os.makedirs(run.cfg.textfile_dir, exist_ok=True)
    path = textfile_path(run.cfg, node, hook)
    files = [(path, textfile.render(families))]
    try:
        files += node_files(run)  # node-level and GPU series: one file per node (slurmkit.hooks.metrics)
    finally:
        textfile.write_all(files)
    return path
