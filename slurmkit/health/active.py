"""The active check: a short GPU self-test with DCGM (``dcgmi diag -r 1 -j``) and, optionally, a
node-local NCCL all-reduce bandwidth floor (nccl-tests ``all_reduce_perf``,
``[health] nccl_busbw_min_gbps``).

Heavier than reading counters (``-r 1`` takes seconds to a minute and uses the GPUs), so it
never runs inside a job's prolog: the healthcheck hook runs it before slurmkit resumes a node it
drained, and the node comes back only when it passes (:mod:`slurmkit.hooks.gate`).

The diag's output is read by :func:`slurmkit.health.dcgm.read_diag` (``dcgmi diag -j``, DCGM
3.x and 4.x; the module holds DCGM's every format, the severity rule included) and folded by
:func:`verdict`. :func:`dcgm_diag` runs ``dcgmi`` (or reads a recorded output, for replay and
tests) under a timeout and folds the results into a :class:`DiagReport`. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from slurmkit.health.dcgm import (ERROR, SEVERITIES, SEVERITY_CONFIG, SKIP, DiagRun, DiagTest,  # noqa: F401  (the active check's vocabulary)
                                  kind_of, parse_diag, read_diag, read_diag_table)


@dataclass
class DiagReport:
    """The active check's verdict: ``status`` pass | warn | fail (hardware evidence) | skip (DCGM
    not installed: documented, not a gate) | error (slurmkit's own trouble: dcgmi could not reach
    its host engine, printed no JSON); ``tests`` the parsed results; ``message`` one line;
    ``source`` where the results came from (the command or the recorded file)."""

    status: str
    tests: list[DiagTest] = field(default_factory=list)
    message: str = ""
    source: str = ""

    check: str = "dcgm_diag"
    timed_out: bool = False  # the diag overran its deadline (and was killed)
    dcgm_version: str = ""  # DCGM's version as the output states it ("" when it does not)

    def reason(self) -> str:
        """The drain reason: ``slurmkit: dcgm_diag: GPU1 Memory: fail (...)`` (the first failing
        test; ``+N more`` when several failed; ``nccl_allreduce`` for the bandwidth floor), cut
        to :data:`slurmkit.health.result.REASON_MAX` by the one rule
        (:func:`~slurmkit.health.result.fit_reason`: dcgmi's warnings run long)."""
        from slurmkit.health.result import fit_reason

        bad = [t for t in self.tests if t.status == "fail"]
        if not bad:
            return fit_reason(f"slurmkit: {self.check}: {self.message}")
        extra = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        return fit_reason(f"slurmkit: {self.check}: {bad[0].describe()}{extra}")



def verdict(tests: list[DiagTest], source: str) -> DiagReport:
    """Fold test results: any fail -> fail, else any warn -> warn, else pass (skipped tests do
    not count; no result at all is own trouble)."""
    judged = [t for t in tests if t.status != SKIP]
    if not judged:
        return DiagReport(ERROR, tests, "dcgmi diag reported no test result", source)
    for st in ("fail", "warn"):
        hits = [t for t in judged if t.status == st]
        if hits:  # DCGM 4 fails a setting on every GPU: the first two said, the rest counted
            more = f" (+{len(hits) - 2} more)" if len(hits) > 2 else ""
            return DiagReport(st, tests, "; ".join(t.describe() for t in hits[:2]) + more, source)
    return DiagReport("pass", tests, f"{len(judged)} results passed", source)


def _running_diag(pidfile: Path) -> tuple[int, float] | None:
    """(pid, started at: epoch s) of a ``dcgmi diag`` an earlier run started and recorded in
    ``pidfile`` that is still running; None (the stale file removed) when there is none."""
    try:
        pid = int(pidfile.read_text().split()[0])
        started = pidfile.stat().st_mtime
    except (OSError, ValueError, IndexError):
        return None
    alive = True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        alive = False
    except PermissionError:
        pass
    if alive:
        try:  # a reused pid is not our diag
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                alive = b"diag" in fh.read()
        except OSError:
            pass
    if not alive:
        try:
            pidfile.unlink()
        except OSError:
            pass
        return None
    return pid, started


def _killpg(pid: int) -> None:
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _earlier_diag(pidfile: Path, timeout_s: float, level: int, source: str) -> DiagReport | None:
    """The report when a diag started by an earlier run (its pid in ``pidfile``) is still
    running: ``error`` while it is within ``timeout_s`` (not starting another); past it, it is
    killed and the run is a ``fail`` (the diag hung). None when there is none."""
    import time

    earlier = _running_diag(pidfile)
    if earlier is None:
        return None
    pid, started = earlier
    age = time.time() - started
    if age < timeout_s:
        return DiagReport(ERROR, message=f"an earlier dcgmi diag (pid {pid}, started {age:.0f} s ago) "
                                         "is still running: not starting another", source=source)
    _killpg(pid)
    try:
        pidfile.unlink()
    except OSError:
        pass
    return DiagReport("fail", message=f"dcgmi diag -r {int(level)} did not finish within {timeout_s:g} s "
                                      f"(pid {pid}, left by an earlier health check, {age:.0f} s old: killed)",
                      source=source, timed_out=True)


def _run_diag(dcgmi, level: int, timeout_s: float, pidfile: Path | None, source: str) -> str | DiagReport:
    """Run ``<dcgmi> diag -r <level> -j`` in its own session, killed with its process group at
    ``timeout_s`` or when the hook is ended (SIGTERM / SIGINT / SIGHUP); its pid kept in
    ``pidfile`` while it runs. Returns its output (stdout, with stderr when stdout holds no
    JSON), or the report when it could not start (``error``) or overran (``fail``)."""
    import signal

    # the handlers go in before the diag starts: a SIGTERM that lands while it is being started
    # (before Popen returns its pid) is held and acted on as soon as the pid is known, so that
    # no window leaves a diag running without its hook
    live: dict = {"proc": None, "pending": None}
    old_handlers = {}

    def _end(signum):  # the hook is being ended: the diag goes with it
        _killpg(live["proc"].pid)
        if pidfile is not None:
            try:
                pidfile.unlink()
            except OSError:
                pass
        prev = old_handlers.get(signum)
        signal.signal(signum, prev if prev not in (None, _on_signal) else signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _on_signal(signum, frame):
        if live["proc"] is None:
            live["pending"] = signum
            return
        _end(signum)

    def _restore():
        for sig, h in old_handlers.items():
            try:
                signal.signal(sig, h)
            except (ValueError, OSError, TypeError):
                pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            old_handlers[sig] = signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not the main thread: the pid file is the backstop
            pass
    try:  # own session: at the deadline the whole group (dcgmi and the nvvs it starts) is killed
        proc = subprocess.Popen([os.fspath(dcgmi), "diag", "-r", str(int(level)), "-j"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace",  # dcgmi's output: only its ASCII JSON is read
                                start_new_session=True)
    except OSError as exc:
        _restore()
        if live["pending"] is not None:  # ended while failing to start: nothing to take along
            os.kill(os.getpid(), live["pending"])
        return DiagReport(ERROR, message=f"{dcgmi}: {exc.strerror or exc}", source=source)
    live["proc"] = proc
    if live["pending"] is not None:
        _end(live["pending"])
    if pidfile is not None:
        try:
            from slurmkit.atomicfile import atomic_write

            atomic_write(pidfile, f"{proc.pid}\n")
        except OSError:
            pass
    try:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid)
            proc.communicate()
            return DiagReport("fail", message=f"dcgmi diag -r {int(level)} did not finish within {timeout_s:g} s",
                              source=source, timed_out=True)
    finally:
        _restore()
        if pidfile is not None:
            try:
                pidfile.unlink()
            except OSError:
                pass
    return out + ("\n" + err if "{" not in out else "")


def dcgm_diag(level: int = 1, timeout_s: float = 45.0, *, dcgmi: str | os.PathLike = "/usr/bin/dcgmi",
              capture: str | os.PathLike | None = None, pidfile: str | os.PathLike | None = None) -> DiagReport:
    """Run ``<dcgmi> diag -r <level> -j`` (at most ``timeout_s`` s; the process is killed then)
    or, when ``capture`` is given, read that recorded output instead (nothing runs): ``dcgmi
    diag -j`` or the ``-r N`` table (:mod:`slurmkit.health.dcgm`).

    The diag runs in its own session (so the deadline kills dcgmi and the nvvs it starts). So that
    it never outlives the hook: while it runs, SIGTERM / SIGINT / SIGHUP (slurmd ending the hook)
    kill its process group before the hook exits; and its pid is kept in ``pidfile`` (the state
    directory), so that a diag left by a run that was SIGKILLed is found by the next one: it is
    not started twice (``error``, own trouble, while the earlier one is within ``timeout_s``;
    past it, the earlier one is killed and the run is a ``fail``: the diag hung).

    Returns a :class:`DiagReport`: ``skip`` when ``dcgmi`` is not installed; ``fail`` when a test
    failed or the diag overran ``timeout_s`` (a GPU that hangs a self-test; ``timed_out``);
    ``error`` (own trouble) when dcgmi ran but gave no parseable result (host engine not running,
    bad output). Raises nothing.
    """
    if capture is not None:
        try:
            text = Path(capture).read_text(encoding="utf-8", errors="replace")  # a tool's output: only its ASCII JSON/text is read
        except OSError as exc:
            return DiagReport(ERROR, message=f"recorded dcgmi output {capture}: {exc.strerror or exc}",
                              source=str(capture))
        source = str(capture)
    else:
        source = f"{dcgmi} diag -r {int(level)} -j"
        if not os.access(dcgmi, os.X_OK):
            return DiagReport(SKIP, message=f"{dcgmi} not installed (DCGM absent): active check skipped",
                              source=source)
        pidfile = Path(pidfile) if pidfile is not None else None
        if pidfile is not None:
            stale = _earlier_diag(pidfile, timeout_s, level, source)
            if stale is not None:
                return stale
        text = _run_diag(dcgmi, level, timeout_s, pidfile, source)
        if isinstance(text, DiagReport):
            return text
    try:
        # a recorded output may be the diag's table (dcgmi diag -r N without -j): its own reader
        run = read_diag_table(text, source) if capture is not None and kind_of(text) == "diag-table" \
            else read_diag(text, source)
    except ValueError as exc:
        return DiagReport(ERROR, message=str(exc), source=source)
    rep = verdict(run.tests, source)
    rep.dcgm_version = run.version
    return rep


# ---- node-local NCCL all-reduce bandwidth floor --------------------------------------------

def parse_allreduce(text: str, origin: str = "all_reduce_perf") -> tuple[float, int]:
    """``(average bus bandwidth in GB/s, wrong results)`` from nccl-tests ``all_reduce_perf``
    output (its ``# Avg bus bandwidth : X`` line and the ``#wrong`` columns of the result rows).
    Raises ValueError naming ``origin`` when there is no average line."""
    avg, wrong = None, 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# Avg bus bandwidth"):
            try:
                avg = float(s.split(":", 1)[1])
            except (IndexError, ValueError):
                raise ValueError(f"{origin}: unreadable line {s!r}") from None
        elif s and not s.startswith("#"):
            cols = s.split()
            # size count type redop root time algbw busbw #wrong time algbw busbw #wrong
            if len(cols) >= 13 and cols[0].isdigit():
                wrong += sum(int(c) for c in (cols[8], cols[12]) if c.isdigit())
    if avg is None:
        raise ValueError(f"{origin}: no '# Avg bus bandwidth' line: {' '.join(text.split())[-160:]!r}")
    return avg, wrong


def nccl_allreduce(floor_gbps: float, gpus: int, timeout_s: float = 45.0, *,
                   exe: str | os.PathLike = "/usr/bin/all_reduce_perf",
                   capture: str | os.PathLike | None = None) -> DiagReport:
    """Node-local all-reduce over ``gpus`` GPUs (``<exe> -b 1G -e 1G -g <gpus> -c 1``, at most
    ``timeout_s`` s) or a recorded output (``capture``): ``fail`` when the average bus bandwidth
    is below ``floor_gbps`` (GB/s, nccl-tests' busbw) or any result was wrong, or it overran;
    ``skip`` when nccl-tests is not installed; ``error`` for output without a result."""
    source = str(capture) if capture is not None else f"{exe} -b 1G -e 1G -g {int(gpus)} -c 1"
    if capture is not None:
        try:
            text = Path(capture).read_text(encoding="utf-8", errors="replace")  # a tool's output: only its ASCII text is read
        except OSError as exc:
            return DiagReport(ERROR, message=f"recorded all_reduce_perf output {capture}: {exc.strerror or exc}",
                              source=source)
    else:
        if not os.access(exe, os.X_OK):
            return DiagReport(SKIP, message=f"{exe} not installed (nccl-tests absent): bandwidth floor skipped",
                              source=source)
        text, timed_out = _run_killable([os.fspath(exe), "-b", "1G", "-e", "1G", "-g", str(int(gpus)), "-c", "1"],
                                        timeout_s)
        if timed_out:
            return DiagReport("fail", message=f"all_reduce_perf did not finish within {timeout_s:g} s", source=source,
                              check="nccl_allreduce", timed_out=True)
        if text is None:
            return DiagReport(ERROR, message=f"{exe}: could not be started", source=source)
    try:
        avg, wrong = parse_allreduce(text, source)
    except ValueError as exc:
        return DiagReport(ERROR, message=str(exc), source=source)
    test = DiagTest("nccl all_reduce busbw", "*", "pass", [])
    if wrong:
        test.status, test.warnings = "fail", [f"{wrong} wrong results"]
    elif avg < floor_gbps:
        test.status, test.warnings = "fail", [f"{avg:g} GB/s below {floor_gbps:g} GB/s"]
    return DiagReport(test.status, [test], check="nccl_allreduce", message=f"{avg:g} GB/s busbw (floor {floor_gbps:g} GB/s)"
                      + (f", {wrong} wrong" if wrong else ""), source=source)


def _run_killable(argv: list[str], timeout_s: float) -> tuple[str | None, bool]:
    """(stdout + stderr, timed out) of ``argv`` run in its own session, the group killed at
    ``timeout_s``; (None, False) when it cannot start."""
    import signal

    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", start_new_session=True)  # the tool's output: only its ASCII text is read
    except OSError:
        return None, False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return out, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return None, True


def worst(reports: list[DiagReport]) -> DiagReport:
    """The report that decides: fail > error > warn > pass > skip (the first of its kind)."""
    for st in ("fail", ERROR, "warn", "pass", SKIP):
        for r in reports:
            if r.status == st:
                return r
    raise ValueError("no report")
