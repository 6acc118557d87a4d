"""The active check: a short GPU self-test with DCGM (``dcgmi diag -r 1 -j``) and, optionally, a
node-local NCCL all-reduce bandwidth floor (nccl-tests ``all_reduce_perf``,
``[health] nccl_busbw_min_gbps``).

Heavier than reading counters (``-r 1`` takes seconds to a minute and uses the GPUs), so it
never runs inside a job's prolog: the healthcheck hook runs it before slurmkit resumes a node it
drained, and the node comes back only when it passes (:mod:`slurmkit.hooks.gate`).

:func:`read_diag` reads the JSON ``dcgmi diag -j`` prints, as DCGM's own writer
(``dcgmi/Diag.cpp``) and schema (``testing/python3/dcgm_diag_schema.json``) have it:

- DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_id": "1", "status": "Pass|Fail|Skip", "warnings": [{"warning",
  "error_id", "error_category", "error_severity"}], "info"}]}]}]}, "version", "Driver Version
  Detected", ...}``; the Deployment tests have one result for all GPUs (``gpu_id`` only when an
  error names one, its warnings' text under ``"warnings"``: 3.x's writer used that key);
- DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group": "GPU",
  "entity_group_id": 1, "entity_id": 0, "status", "warnings", "info"}], "test_summary":
  {"status"}]}, "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}``;
  ``{"DCGM Diagnostic": {"runtime_error": ...}}`` when the diag could not run; ``{"iterations":
  [...]}`` for ``-n``.

DCGM writes a warned result as ``Fail`` and a result it did not run not at all (or ``Not
Run``); the severity of each warning (``dcgmErrorSeverity_t`` in ``dcgm_errors.h``) says what
it means: a failed result whose warnings are all ``DCGM_ERROR_CONFIG`` (5, "this error can be
configured": persistence mode disabled, CUDA environment variables, ECC off) is a setting of the
node, so it warns naming the setting; any other severity (``ISOLATE`` 2, ``RESET`` 6, ...) or
none stays a fail. :func:`dcgm_diag` runs ``dcgmi`` (or reads a recorded output, for replay and
tests) under a timeout and folds the results into a :class:`DiagReport`. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: The status words of a :class:`DiagReport` beyond the checks' pass / warn / fail.
SKIP, ERROR = "skip", "error"
_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": SKIP, "skipped": SKIP,
           "not run": SKIP}

#: ``dcgmErrorSeverity_t`` (DCGM ``dcgmlib/dcgm_errors.h``): severity number -> name.
SEVERITIES = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG", 6: "RESET"}
SEVERITY_CONFIG = 5  # DCGM_ERROR_CONFIG: "This error can be configured"


@dataclass
class DiagTest:
    """One test result: ``name`` (``GPU Memory``, ``pcie``, ``software``...), ``entity``
    (``GPU1``, ``Switch0``: DCGM's entity group and id; ``*`` for a result about every GPU),
    ``status`` (pass | warn | fail | skip, after :func:`read_diag`'s severity rule), the
    ``warnings`` dcgmi gave (text), their ``severities`` (``error_severity``, None where dcgmi
    gave none) and ``error_ids`` (``dcgmError_t``), and ``dcgm_status`` (the status word dcgmi
    printed, e.g. ``Fail`` for a configuration warning)."""

    name: str
    entity: str
    status: str
    warnings: list[str] = field(default_factory=list)
    severities: list = field(default_factory=list)
    error_ids: list = field(default_factory=list)
    dcgm_status: str = ""

    @property
    def gpu_index(self) -> int | None:
        """The GPU's DCGM id (NVML index) for a ``GPU<n>`` entity, else None."""
        return int(self.entity[3:]) if self.entity.startswith("GPU") and self.entity[3:].isdigit() else None

    @property
    def config_only(self) -> bool:
        """True when every warning carries DCGM_ERROR_CONFIG severity (a setting of the node)."""
        return bool(self.severities) and all(s == SEVERITY_CONFIG for s in self.severities)

    def describe(self) -> str:
        where = f"{self.entity} " if self.entity != "*" else ""
        text = f"{where}{self.name}: {self.status}"
        if self.status == "warn" and self.config_only:
            return text + f" (setting, DCGM severity CONFIG: {self.warnings[0]})"
        return text + (f" ({self.warnings[0]})" if self.warnings else "")


@dataclass
class DiagRun:
    """What one ``dcgmi diag -j`` output holds: its ``tests`` (:class:`DiagTest`, one per
    result), ``version`` (DCGM's, from ``metadata`` / the 3.x top level; "" when absent),
    ``driver_version`` ("Driver Version Detected") and ``entities`` (``GPU0`` -> ``{"device_id",
    "serial_num"}`` from DCGM 4's ``entity_groups``)."""

    tests: list[DiagTest]
    version: str = ""
    driver_version: str = ""
    entities: dict = field(default_factory=dict)


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


def _warnings(r: dict) -> tuple[list[str], list, list]:
    """(texts, severities, error ids) of a result's ``warnings``."""
    texts, sevs, ids = [], [], []
    for w in r.get("warnings") or []:
        sev = eid = None
        if isinstance(w, dict):
            sev, eid = w.get("error_severity"), w.get("error_id")
            # 4.x and 3.x per-GPU tests: "warning"; 3.x Deployment tests: "warnings" (its writer's key)
            text = w.get("warning", w.get("warnings", w.get("message")))
            w = text if isinstance(text, str) else json.dumps(w)
        texts.append(" ".join(str(w).split()))
        sevs.append(sev if isinstance(sev, int) and not isinstance(sev, bool) else None)
        ids.append(eid if isinstance(eid, int) and not isinstance(eid, bool) else None)
    return texts, sevs, ids


def _entity(r: dict) -> str:
    if "entity_id" in r:
        return f"{r.get('entity_group', 'GPU')}{r['entity_id']}"
    ids = str(r.get("gpu_ids", r.get("gpu_id", "*")))
    return f"GPU{ids}" if ids.isdigit() else "*"


def _one_doc(doc: dict, origin: str, out: DiagRun) -> None:
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(diag, dict):
        raise ValueError(f"{origin}: not dcgmi diag output (no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic')")
    if diag.get("runtime_error"):
        raise ValueError(f"{origin}: dcgmi diag could not run: {' '.join(str(diag['runtime_error']).split())}")
    cats = diag.get("test_categories")
    if not isinstance(cats, list):
        raise ValueError(f"{origin}: no 'test_categories' in the diag output")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else doc
    out.version = out.version or str(meta.get("version") or diag.get("version") or "")
    out.driver_version = out.driver_version or str(meta.get("Driver Version Detected") or "")
    for grp in doc.get("entity_groups") or []:
        for e in (grp.get("entities") or []) if isinstance(grp, dict) else []:
            if isinstance(e, dict) and "entity_id" in e:
                out.entities[f"{grp.get('entity_group', 'GPU')}{e['entity_id']}"] = {
                    k: e[k] for k in ("device_id", "serial_num") if k in e}
    for cat in cats:
        for t in (cat.get("tests") or []) if isinstance(cat, dict) else []:
            name = str(t.get("name", "?"))
            for r in t.get("results") or []:  # a test DCGM did not run has no results
                word = str(r.get("status", "")).strip()
                status = _STATUS.get(word.lower())
                if status is None:
                    raise ValueError(f"{origin}: test {name!r}: unknown status {r.get('status')!r}")
                texts, sevs, ids = _warnings(r)
                test = DiagTest(name, _entity(r), status, texts, sevs, ids, word)
                if status == "fail" and test.config_only:
                    test.status = "warn"  # a setting of the node (DCGM_ERROR_CONFIG), not the hardware
                out.tests.append(test)


def read_diag(text: str, origin: str = "dcgmi") -> DiagRun:
    """The results, DCGM version and entities in ``dcgmi diag -j`` output ``text`` (DCGM 3.x or
    4.x, any text around the JSON ignored; see the module docstring). Raises ValueError naming
    ``origin`` for output without such a document: no JSON, bad JSON, another document, an
    unknown status word, or DCGM's ``runtime_error`` (the diag did not run)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"{origin}: no JSON in the output: {' '.join(text.split())[:160]!r}")
    try:
        doc = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{origin}: bad JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{origin}: want a JSON object")
    out = DiagRun([])
    docs = doc.get("iterations") if isinstance(doc.get("iterations"), list) else [doc]  # dcgmi diag -n N
    for d in docs:
        if not isinstance(d, dict):
            raise ValueError(f"{origin}: an iteration is not a JSON object")
        _one_doc(d, origin, out)
    return out


def parse_diag(text: str, origin: str = "dcgmi") -> list[DiagTest]:
    """The test results of :func:`read_diag` (raises as it does)."""
    return read_diag(text, origin).tests


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
    or, when ``capture`` is given, read that recorded output instead (nothing runs).

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
        run = read_diag(text, source)
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
