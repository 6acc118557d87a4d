"""``slurmkit hooks install`` / ``uninstall``: add the hooks to slurm.conf without taking anything away.

Rules:

- ``Prolog`` / ``Epilog`` by the site's layout (:func:`_plan_hook`), never creating a cycle and
  keeping every site script running in its order; each install says what slurmd will run, in
  which order (:func:`slurmd_order`: slurmd runs a glob's matches in *reverse* sorted order, stops
  at the first failure; src/plugins/prep/script/prep_script_slurmd.c):
  * a single script ``X`` becomes a glob ``<conf dir>/prolog.d/*`` holding a wrapper ``90-site``
    that ``exec``s X by its own path (runs first; X's ``$0`` stays X, so a script that finds
    its files through ``$(dirname "$0")`` keeps working, which a link would break) and our shim
    ``10-slurmkit`` (``slurmkit-prolog.d`` when ``prolog.d`` already holds the site's files: a
    glob over it would start running them);
  * a script that runs a directory itself (``run-parts DIR``, DeepOps' ``run-parts.sh DIR``, a
    ``for f in DIR/*.sh`` loop) is left as it is and our shim goes *into that directory*
    (``99-slurmkit``, last in its ascending order; ``99-slurmkit.sh`` for ``*.sh``): a glob over
    the directory with a link to the script would run the script that runs the directory;
  * a glob ``D/*`` or ``D/*.sh`` is kept and our shim added to ``D`` under a name the pattern
    matches and that sorts before the site's files (so it runs last), never a link to a pattern;
    a pattern install cannot match (``D/[0-9]*``, a wildcard in the directory) is refused;
- ``PrologFlags`` gains ``Alloc`` (the prolog runs at allocation, so a failing node is seen before
  the job starts; ``Contain`` and other flags are kept; the note says what that changes for the
  site's own prologs: :func:`alloc_note`); ``SchedulerParameters`` gains
  ``nohold_on_prolog_fail`` (a job whose prolog failed is requeued, not held);
- ``HealthCheckProgram`` (a foreign one only with ``replace``, or kept with ``chain``: run after
  slurmkit's check, bounded: :func:`chain_text`), ``HealthCheckInterval`` and
  ``PrologEpilogTimeout`` (a foreign value only with ``replace``; a site value is kept) are set;
- a key is edited in the file that defines it (``Include``s are followed); a new key replaces the
  template slot comment ``#Key=`` when there is one, else goes before the first node definition;
- every line we add or change carries the trailing comment ``# slurmkit-hooks: added`` or
  ``# slurmkit-hooks: was "<original line>"`` so :func:`plan_uninstall` can undo exactly that;
- writes are atomic (:func:`slurmkit.atomicfile.atomic_write`: temp file, fsync, rename) after a
  timestamped backup ``<file>.slurmkit-<UTC>`` (itself written atomically);
  the manifest ``<conf dir>/slurmkit-hooks.install.json`` records backups and the SHA-256 of what
  was written, so uninstall restores a backup byte for byte only when the file is unchanged since.

Planning is pure (:func:`plan_install`, :func:`plan_uninstall` over parsed files); :func:`apply`
does the I/O.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.errors import InputError
from slurmkit.hooks.flows import HEALTHCHECK_BUDGET_S
from slurmkit.profile.health import Health
from slurmkit.slurm import conf as sconf

MARK = "slurmkit-hooks:"
MANIFEST = "slurmkit-hooks.install.json"
CONFIG = "slurmkit-hooks.toml"
SITE_LINK = "90-site"  # the site script's wrapper; runs first: slurmd runs prolog.d/* in reverse alphabetical order
OUR_SHIM = "10-slurmkit"
HEALTHCHECK_SHIM = "slurmkit-healthcheck"
DEFAULT_INTERVAL_S = 300
DEFAULT_TIMEOUT_S = 60
DEFAULT_CHAIN_TIMEOUT_S = 30  # a chained HealthCheckProgram's bound: NHC's own default timeout (nhc -t)


class InstallError(InputError):
    """Install or uninstall cannot proceed: ``file`` and ``line`` name what stops it (a
    slurm.conf line, the manifest, a file that cannot be written), the message says why and what
    to do. CLI exit status 2."""


@dataclass
class NewFile:
    """A file the install creates: ``path``; ``text`` (its content) or ``link`` (a symlink target);
    ``mode`` (permission bits)."""

    path: Path
    text: str | None = None
    link: str | None = None
    mode: int = 0o755


@dataclass
class Plan:
    """What an install or uninstall will do: ``texts`` {path: (old text, new text)} for
    slurm.conf-syntax files, ``new_files`` (:class:`NewFile`), ``remove_files`` (paths),
    ``restore`` {path: backup path} (byte-for-byte restores), ``keep`` {path: new name} (files
    install created that an admin edited since: moved aside, not deleted), ``notes`` (lines for
    the admin)."""

    texts: dict = field(default_factory=dict)
    new_files: list = field(default_factory=list)
    remove_files: list = field(default_factory=list)
    restore: dict = field(default_factory=dict)
    keep: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(any(o != n for o, n in self.texts.values()) or self.new_files or self.remove_files
                    or self.restore or self.keep)

    def diff(self) -> str:
        """A unified diff of every slurm.conf-syntax change (restores shown as whole-file diffs)."""
        out = []
        for path, (old, new) in self.texts.items():
            if old != new:
                out.extend(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                f"{path} (now)", f"{path} (after)"))
        for path, backup in self.restore.items():
            out.append(f"restore {path} from {backup} (unchanged since install)\n")
        for f in self.new_files:
            out.append(f"create {f.path}" + (f" -> {f.link}" if f.link else "") + "\n")
        for p in self.remove_files:
            out.append(f"remove {p}\n")
        for p, new in self.keep.items():
            out.append(f"keep {p} (edited since install) as {new}\n")
        return "".join(out)


@dataclass(frozen=True)
class InstallSpec:
    """Inputs of an install: ``python`` (absolute interpreter the shims run with), ``config`` (the
    hooks config TOML text to write), ``interval_s`` (HealthCheckInterval, seconds),
    ``timeout_s`` (PrologEpilogTimeout, seconds; None: leave it as the site has it),
    ``deadline_s`` / ``scontrol_timeout_s`` / ``resume_after`` (the hooks' NVML deadline, scontrol
    deadline and clean runs before a resume, for the warnings of :func:`schedule_warnings`), ``replace`` (take over a foreign
    HealthCheckProgram / HealthCheckInterval / PrologEpilogTimeout; a timeout is only ever
    raised), ``chain`` (keep a foreign HealthCheckProgram such as NHC and run it after
    slurmkit's check, bounded), ``chain_timeout_s`` (that bound, seconds), ``active_timeout_s``
    (the active check's deadline when the health check may run it, seconds; None: it never
    does), ``configless`` (go ahead on a configless cluster: the admin copies the files
    install creates to every node)."""

    python: str = sys.executable
    config: str = ""
    interval_s: int = DEFAULT_INTERVAL_S
    timeout_s: int | None = DEFAULT_TIMEOUT_S
    deadline_s: float = 8.0
    scontrol_timeout_s: float = 5.0
    resume_after: int = 3
    replace: bool = False
    chain: bool = False
    chain_timeout_s: int = DEFAULT_CHAIN_TIMEOUT_S
    active_timeout_s: float | None = Health.active_timeout_s
    configless: bool = False


def chain_text(kind: str, chain: str, bound_s: int) -> str:
    """The shell lines that run a chained HealthCheckProgram ``chain`` (NHC) after slurmkit's
    check, from an ``EXIT`` trap (so it runs however the shim's Python part ends): bounded by
    ``bound_s`` seconds and by what is left of :data:`HEALTHCHECK_BUDGET_S` since the shim
    started, with GNU ``timeout -k 2`` (its own process group: on a timeout the whole group,
    NHC's children too, gets SIGTERM, then SIGKILL 2 s later). No time left: it is skipped and
    said so on stderr, as a timeout and a non-zero exit are."""
    q = "'" + chain.replace("'", "'\\''") + "'"
    tag = f"slurmkit-{kind}"
    return (f"# {MARK} chained: the site's health check runs after slurmkit's, bounded so the whole program\n"
            f"# ends inside slurmd's 60 s (at most {bound_s} s, and only what is left of {HEALTHCHECK_BUDGET_S} s)\n"
            "site_hc() {\n"
            f"    left=$(( {HEALTHCHECK_BUDGET_S} - ($(date +%s) - t0) ))\n"
            f"    [ \"$left\" -gt {bound_s} ] && left={bound_s}\n"
            "    if [ \"$left\" -lt 1 ]; then\n"
            f"        echo \"{tag}: warning: no time left for the site's health check {chain} (slurmd stops the program "
            "at 60 s): skipped this run\" >&2\n"
            "        return 0\n"
            "    fi\n"
            f"    timeout -k 2 \"$left\" {q}\n"
            "    hc_rc=$?\n"
            "    case $hc_rc in\n"
            "        0) ;;\n"
            f"        124|137) echo \"{tag}: warning: the site's health check {chain} ran past $left s: stopped "
            "(its process group killed)\" >&2 ;;\n"
            f"        *) echo \"{tag}: info: the site's health check {chain} exited $hc_rc\" >&2 ;;\n"
            "    esac\n"
            "}\n"
            "t0=$(date +%s)\n"
            "trap site_hc EXIT")


def shim_text(kind: str, python: str, config_path: Path, chain: str | None = None,
              chain_timeout_s: int = DEFAULT_CHAIN_TIMEOUT_S) -> str:
    """The executable shim Slurm runs for ``kind`` (prolog | epilog | healthcheck): the template
    ``prolog_epilog/hook.py.in`` with the absolute interpreter and config path filled in. It calls
    :func:`slurmkit.hooks.main.main` directly (no click) to keep the per-job cost low, behind a
    ``/bin/sh`` guard that turns a missing interpreter or a failed ``import slurmkit`` into a
    syslog line and exit 0 (never Slurm's "Prolog error" drain). ``chain``: a site's
    HealthCheckProgram run after slurmkit's check, bounded (:func:`chain_text`,
    ``chain_timeout_s`` seconds at most)."""
    template = (Path(__file__).resolve().parent.parent.parent / "prolog_epilog" / "hook.py.in")
    if not template.exists():  # installed package layout (package data: no code in it)
        from importlib import resources

        template = Path(str(resources.files("slurmkit.prolog_epilog"))) / "hook.py.in"
    first = chain_text(kind, chain, chain_timeout_s) if chain else ""
    return (template.read_text().replace("@PYTHON@", python).replace("@KIND@", kind)
            .replace("@CONFIG@", str(config_path)).replace("@FIRST@", first))


def site_wrapper(script: str) -> str:
    """The ``90-site`` wrapper that runs the site's ``Prolog=`` / ``Epilog=`` script ``script``
    (an absolute path) by its own path: ``exec`` keeps its ``$0``, arguments, environment and
    exit status (a link in its place would change ``$0``, and a script that sources files
    beside itself through ``$(dirname "$0")`` would fail on every node)."""
    q = "'" + script.replace("'", "'\\''") + "'"
    return ("#!/bin/sh\n"
            f"# The site's script, run by its own path ({MARK} wrapper; 'slurmkit hooks uninstall' removes it).\n"
            f"exec {q} \"$@\"\n")


def _marked(line: str, was: str | None) -> str:
    tag = "added" if was is None else "was " + json.dumps(was)
    return f"{line}  # {MARK} {tag}"


def _is_ours(conf: sconf.ConfFile, entry: sconf.Entry) -> bool:
    return entry.comment.strip().startswith(MARK)


def _slot(conf: sconf.ConfFile, key: str):
    for e in conf.entries:
        if not e.pairs and not e.include:
            body = conf.raw(e).strip()
            if body.startswith("#") and body[1:].strip().lower().split("=", 1)[0].strip() == key.lower() \
                    and "=" in body and not body[1:].split("=", 1)[1].strip():
                return e
    return None


class _Editor:
    """Edits over an include tree, keeping the old texts for the diff."""

    def __init__(self, tree):
        self.tree = tree
        self.old = {c.path: c.text() for c in tree}

    def get(self, key):
        return sconf.find_effective(self.tree, key)

    def set(self, key: str, value: str, owner_key_found=None):
        """Set ``key=value``: in place (marked with the old line) or as a new marked line."""
        found = owner_key_found or self.get(key)
        if found:
            conf, entry = found
            if len(entry.pairs) != 1:
                raise InstallError(conf.path, entry.lineno, f"{key} shares its line with other keys; "
                                   f"put it on a line of its own and run install again")
            was = conf.raw(entry)
            if _is_ours(conf, entry):
                was = _original(entry)
            conf.replace(entry, _marked(f"{entry.pairs[0][0]}={value}", was))
            return
        main = self.tree[0]
        slot = _slot(main, key)
        if slot is not None:
            main.replace(slot, _marked(f"{key}={value}", main.raw(slot)))
        else:
            main.insert(main.global_end(), _marked(f"{key}={value}", None))

    def texts(self):
        return {c.path: (self.old[c.path], c.text()) for c in self.tree}


def _original(entry: sconf.Entry) -> str | None:
    """The original line recorded in one of our markers (None when the line was added)."""
    tag = entry.comment.strip()[len(MARK):].strip()
    if tag.startswith("was "):
        return json.loads(tag[4:])
    return None


GLOB_CHARS = "*?["
RUN_PARTS_LAST = "99-slurmkit"  # run-parts runs a directory in ascending C order: ours runs last


def slurmd_order(paths) -> list[str]:
    """The order slurmd runs the files a ``Prolog=`` / ``Epilog=`` glob matches: ``paths`` (the
    matches) sorted as glob(3) sorts them (C locale: byte order), then *reversed*, because
    slurmd's ``_script_list_create`` (src/plugins/prep/script/prep_script_slurmd.c, 22.05 and
    later) ``list_push``es each match onto the front of its list. slurmd runs them one after
    another with the job's environment (no PATH) and stops at the first that fails; that
    script's status is the prolog's."""
    return sorted(paths, key=lambda p: os.fsencode(str(p)), reverse=True)


def _glob_parts(value: str) -> tuple[Path, str] | None:
    """``(directory, name pattern)`` of a glob ``Prolog=`` value; None for a plain path.
    Raises ValueError for a wildcard in the directory part."""
    v = value.strip('"')
    if not any(c in v for c in GLOB_CHARS):
        return None
    d, base = os.path.split(v)
    if any(c in d for c in GLOB_CHARS):
        raise ValueError("a wildcard in the directory part")
    return Path(d), base


def _name_for(pattern: str, stem: str) -> str | None:
    """A shim name made of ``stem`` that the name pattern ``pattern`` matches (``*`` ->
    ``stem``, ``*.sh`` -> ``stem.sh``, ``pre-*`` -> ``pre-stem``); None when the pattern has
    other wildcards."""
    import fnmatch

    if pattern.count("*") != 1 or any(c in pattern for c in "?["):
        return None
    name = pattern.replace("*", stem)
    return name if fnmatch.fnmatchcase(name, pattern) else None


def _runs_directory(script_text: str) -> tuple[str, str, str] | None:
    """Whether a site's prolog script runs a directory's scripts itself: ``(directory, runner,
    name pattern)`` where runner is ``run-parts`` (``run-parts DIR``, DeepOps'
    ``shared/bin/run-parts.sh DIR``) or ``loop`` (``for f in DIR/*``); None when it runs none.
    Lines are read as the shell reads them, comments dropped; ``$VAR`` paths are not resolved."""
    import re

    for line in script_text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("#"):
            continue
        m = re.search(r"run-parts(?:\.sh)?[\"']?(?:\s+--?[\w=-]+)*\s+[\"']?(/[^\s\"';|&)]+)", line)
        if m:
            return m.group(1).rstrip("/"), "run-parts", "*"
        m = re.search(r"\bfor\s+\w+\s+in\s+[\"']?(/[^\s\"';*]+)/[\"']?([^\s\"';/]*\*[^\s\"';/]*)", line)
        if m:
            return m.group(1).rstrip("/"), "loop", m.group(2)
    return None


def _own_dir(conf_dir: Path, kind: str) -> Path:
    """The directory slurmkit's ``Prolog=<dir>/*`` glob uses: ``<conf dir>/<kind>.d`` unless it
    already holds files of the site's (a glob over it would start running them), then
    ``<conf dir>/slurmkit-<kind>.d``."""
    for d in (conf_dir / f"{kind}.d", conf_dir / f"slurmkit-{kind}.d"):
        try:
            if set(os.listdir(d)) <= {SITE_LINK, OUR_SHIM}:
                return d
        except FileNotFoundError:
            return d
    raise InstallError(conf_dir, None, f"{conf_dir}/{kind}.d and slurmkit-{kind}.d both hold the site's files; "
                       "empty one of them or set the site's Prolog/Epilog to a glob over its directory")


def _order_note(key: str, value: str, order: list) -> str:
    steps = "; ".join(f"{i}. {p}" for i, p in enumerate(order, 1))
    return f"{key}={value}: slurmd will run, in this order, stopping at the first that fails: {steps}"


def _plan_hook(plan, ed, key: str, kind: str, conf_dir: Path, shim: str) -> None:
    """Add slurmkit's ``kind`` shim to the site's ``key`` (Prolog / Epilog) layout; see the
    module docstring. Appends to ``plan`` (files, notes) and edits through ``ed``."""
    found = ed.get(key)
    value = found[1].get(key).strip('"') if found else None
    where = (found[0].path, found[1].lineno) if found else (conf_dir, None)
    try:
        glob_parts = _glob_parts(value) if value else None
    except ValueError as exc:
        raise InstallError(*where, f"{key}={value}: {exc}: slurmd expands it with glob(3), but install "
                           f"cannot place slurmkit's {kind} in it; use DIR/* or a single script") from None
    if glob_parts is not None:  # the site's glob is kept: our shim becomes one more match
        gdir, pattern = glob_parts
        import glob as _glob

        matches = [m for m in _glob.glob(str(gdir / pattern)) if os.path.basename(m) != OUR_SHIM]
        name = None
        for stem in ("10-slurmkit", "00-slurmkit"):  # slurmd runs the lowest name last: ours after the site's
            cand = _name_for(pattern, stem)
            if cand and all(os.fsencode(cand) < os.fsencode(os.path.basename(m)) for m in matches):
                name = cand
                break
        name = name or _name_for(pattern, "00-slurmkit")
        matches = [m for m in matches if os.path.basename(m) != name]
        if name is None:
            raise InstallError(*where, f"{key}={value}: install cannot name a file this pattern matches; "
                               f"use DIR/* or DIR/*.sh, or add {shim} there yourself")
        if not gdir.is_dir():
            raise InstallError(*where, f"{key}={value}: {gdir} is not a directory here")
        if found and _is_ours(*found) and os.path.islink(gdir / SITE_LINK):  # an earlier slurmkit's link
            target = os.readlink(gdir / SITE_LINK)
            plan.new_files.append(NewFile(gdir / SITE_LINK, text=site_wrapper(target)))
            plan.notes.append(f"{gdir / SITE_LINK}: the link an earlier install made to {target} becomes a wrapper "
                              "that runs it by its own path (its $0 unchanged)")
        plan.new_files.append(NewFile(gdir / name, text=shim))
        plan.notes.append(_order_note(key, value, slurmd_order(matches + [str(gdir / name)])))
        return
    if value and not os.path.isabs(value):
        raise InstallError(*where, f"{key}={value} is not an absolute path")
    text = None
    if value:
        try:
            with open(value) as fh:
                text = fh.read(1 << 20)
        except UnicodeDecodeError:
            text = ""  # a binary (NHC's compiled helper, a site's C program): runs no directory we can see
        except OSError:
            text = None
    runs = _runs_directory(text) if text else None
    if runs is not None:  # the site's script runs a directory itself: slurmkit goes into it, Prolog= is kept
        d, runner, pattern = runs
        name = _name_for(pattern, RUN_PARTS_LAST)
        if name is None or not os.path.isdir(d):
            raise InstallError(*where, f"{key}={value} runs the scripts of {d}/{pattern} ({runner}); install cannot "
                               f"add slurmkit's {kind} there (not a directory here, or a pattern it cannot match): "
                               f"add {shim} to {d} yourself, or point {key} at a glob")
        entries = sorted({os.path.join(d, e) for e in os.listdir(d)} | {os.path.join(d, name)}, key=os.fsencode)
        plan.new_files.append(NewFile(Path(d) / name, text=shim))
        plan.notes.append(f"{key}={value} runs {d} itself ({runner}, ascending name order): slurmkit's {kind} is added "
                          f"there as {name}, last, and {key} is left as it is (a {key}={d}/* glob with a link "
                          f"to {value} would run the script that runs the directory that holds it: an endless "
                          f"{kind}). Its exit status reaches slurmd only through {value}: it must pass a failing "
                          "part's status on")
        plan.notes.append(_order_note(key, value, [value] + [f"{value} -> {p}" for p in entries]))
        return
    gdir = _own_dir(conf_dir, kind)
    if value:
        if text is None:
            plan.notes.append(f"{value} cannot be read here: it is kept as {gdir / SITE_LINK}; check that it "
                              f"does not run {gdir} itself")
        plan.new_files.append(NewFile(gdir / SITE_LINK, text=site_wrapper(value)))
        plan.notes.append(f"the site's {key} {value} keeps running first, by its own path (its $0 unchanged), "
                          f"from the wrapper {gdir / SITE_LINK}")
    ed.set(key, f"{gdir}/*", found)
    plan.new_files.append(NewFile(gdir / OUR_SHIM, text=shim))
    order = slurmd_order([str(gdir / OUR_SHIM)] + ([str(gdir / SITE_LINK)] if value else []))
    plan.notes.append(_order_note(key, f"{gdir}/*", [p + (f" (exec {value})" if p.endswith(SITE_LINK) else "")
                                                     for p in order]))


STALE_ALERT_S = 900  # contrib/prometheus/slurmkit.rules.yml SlurmkitHooksStale: no health check for 15 min


def hooks_need_s(deadline_s: float, scontrol_timeout_s: float) -> float:
    """Seconds a prolog / epilog may take at worst (s): the NVML deadline, two scontrol calls
    (show the node, drain it) and 2 s for the interpreter to start."""
    return deadline_s + 2 * scontrol_timeout_s + 2


SITE_SCRIPTS = ("Prolog", "Epilog", "PrologSlurmctld", "EpilogSlurmctld")


# Slurm 25.05+ (src/common/read_config.c): PrologTimeout / EpilogTimeout, when set, take the
# place of PrologEpilogTimeout for prologs (Prolog, PrologSlurmctld, spank) / epilogs.
SPLIT_TIMEOUTS = {"PrologTimeout": ("Prolog", "PrologSlurmctld"), "EpilogTimeout": ("Epilog", "EpilogSlurmctld")}


def _timeout_added_note(site_scripts: dict, want: int, split: dict) -> str:
    """The note for a PrologEpilogTimeout install added; ``split``: the site's PrologTimeout /
    EpilogTimeout values (Slurm 25.05+), which keep bounding what they name."""
    kept = {s for k in split for s in SPLIT_TIMEOUTS[k]}
    bounded = [f"{k}={v}" for k, v in site_scripts.items() if v and k not in kept]
    what = {"PrologTimeout": "prologs", "EpilogTimeout": "epilogs"}
    other = "epilogs" if "PrologTimeout" in split else "prologs"
    return (f"PrologEpilogTimeout={want} added (the site had none): it bounds "
            + (f"the {other} only (the site's {', '.join(f'{k}={v}' for k, v in split.items())} keeps bounding "
               f"{' and '.join(what[k] for k in split)}, Slurm 25.05+)" if split else "every prolog and epilog")
            + (f", the site's own too ({', '.join(bounded)}); " if bounded else "; ")
            + "a Prolog or Epilog that runs past it is killed and Slurm drains the node; a PrologSlurmctld past it "
            "has its job requeued (slurm.conf(5)). '--timeout 0' leaves it unset")


def alloc_note(site_prolog: str | None, contain: bool = False) -> str:
    """What adding ``Alloc`` to ``PrologFlags`` changes (slurm.conf(5), PrologFlags): slurmd then
    runs the Prolog on every node of a job when the job is allocated, instead of on each node
    when the job's first step starts there; ``salloc`` runs it too (without Alloc it runs none
    until a step), and the job starts only once every node's prolog is done. ``site_prolog``: the
    site's own ``Prolog=`` value (None when it has none), which now runs at that time too.
    ``contain``: the site's flags have ``Contain``, which already sets ``Alloc`` (nothing changes)."""
    if contain:
        return ("PrologFlags=Alloc added, as written only: the site's Contain already sets it (slurm.conf(5)), so "
                "the prologs run when they ran before, at the job's allocation")
    whose = f"the site's Prolog {site_prolog} as well as slurmkit's" if site_prolog else "slurmkit's"
    return ("PrologFlags=Alloc added: slurmd now runs the Prolog (" + whose + ") on every node of a job when "
            "the job is allocated, not on each node when the job's first step starts there; salloc runs it too, "
            "nodes a job never starts a step on run it, and a job starts only once its nodes' prologs are done "
            "(slurm.conf(5) PrologFlags)")


def healthcheck_need_s(spec: InstallSpec) -> float:
    """Seconds slurmkit's health check may take (s): the NVML deadline, the active check's
    deadline when it may run (``spec.active_timeout_s``: before a resume, or on an idle node) and
    2 s for the interpreter to start. scontrol's calls take milliseconds; a hung one is own
    trouble, bounded by ``scontrol_timeout_s`` and cuts the active check that follows it
    (:meth:`slurmkit.hooks.flows.Run.time_left`)."""
    return spec.deadline_s + (spec.active_timeout_s or 0) + 2


def budget_warnings(spec: InstallSpec, chained: str | None) -> list[str]:
    """Warnings when the parts of the HealthCheckProgram can add up past what slurmd allows it
    (:data:`slurmkit.hooks.flows.HEALTHCHECK_BUDGET_S` of slurmd's 60 s), each saying what the
    hooks then cut: slurmkit's own (:func:`healthcheck_need_s`; the active check is cut to what
    is left: :meth:`slurmkit.hooks.flows.Run.time_left`), and with a chained program
    (``chained``: its path) its bound ``spec.chain_timeout_s`` (it runs after slurmkit's check and
    gets only what is left). Pure."""
    need = healthcheck_need_s(spec)
    parts = f"{spec.deadline_s:g} s NVML deadline, " + (
        f"{spec.active_timeout_s:g} s active check, " if spec.active_timeout_s else "") + "2 s start"
    out = []
    if need > HEALTHCHECK_BUDGET_S:
        cut = (f"the active check is cut to what is left, as little as "
               f"{max(0.0, HEALTHCHECK_BUDGET_S - need + spec.active_timeout_s):g} s of its "
               f"{spec.active_timeout_s:g} s (a diag cut short is tried again at the next run, never a fail); "
               "lower [health] active_timeout_s or deadline_s" if spec.active_timeout_s else "lower deadline_s")
        out.append(f"warning: slurmkit's health check may take {need:g} s ({parts}), more than the "
                   f"{HEALTHCHECK_BUDGET_S} s it has of slurmd's 60 s (slurmd kills HealthCheckProgram then): {cut}")
    if chained and need + spec.chain_timeout_s > HEALTHCHECK_BUDGET_S:
        out.append(f"warning: slurmkit's health check ({need:g} s at most: {parts}) and the site's {chained} "
                   f"({spec.chain_timeout_s} s, --chain-timeout) can add up to {need + spec.chain_timeout_s:g} s, "
                   f"past {HEALTHCHECK_BUDGET_S} s of slurmd's 60 s: slurmkit's check runs first; the site's gets "
                   f"what is left, as little as {max(0.0, HEALTHCHECK_BUDGET_S - need):g} s, and is stopped there")
    return out


def schedule_warnings(get, spec: InstallSpec) -> list[str]:
    """Warnings on the settings that decide whether slurmkit's verdicts reach Slurm, for the
    effective values ``get(key)`` (:func:`slurmkit.slurm.conf.find_effective` over the tree after
    install's edits): a PrologEpilogTimeout shorter than :func:`hooks_need_s` (an NVML hang then
    shows as Slurm's own prolog-timeout drain, not ``slurmkit: nvml-timeout``); a
    HealthCheckNodeState that never checks a drained idle node (never resumed); a
    HealthCheckInterval of 0 (the periodic check off) or past the stale-hook alert
    (:data:`STALE_ALERT_S`) or making a resume slow. Pure: one line per warning, each starting with ``warning:``."""
    out = []
    need = hooks_need_s(spec.deadline_s, spec.scontrol_timeout_s)
    split = [k for k in SPLIT_TIMEOUTS if get(k)]
    for key in ("PrologTimeout", "EpilogTimeout", "PrologEpilogTimeout"):
        found = get(key)
        cur = found[1].get(key) if found else None
        if key == "PrologEpilogTimeout" and len(split) == 2:
            continue  # Slurm 25.05+: both split timeouts set, this one bounds nothing of ours
        if cur and cur.isdigit() and int(cur) < need:
            out.append(f"warning: {key}={cur} ({found[0].path}:{found[1].lineno}) is shorter than the hooks "
                       f"may take ({need:g} s: {spec.deadline_s:g} s NVML deadline, 2 x {spec.scontrol_timeout_s:g} s "
                       "scontrol, 2 s start): an NVML hang shows as Slurm's own prolog timeout drain, not "
                       "'slurmkit: nvml-timeout'; "
                       + ("--replace raises it" if key == "PrologEpilogTimeout" else
                          f"raise it to at least {need:g} (install does not edit {key})"))
    found = get("HealthCheckNodeState")
    states = {s.strip().upper() for s in (found[1].get("HealthCheckNodeState") if found else "ANY").split(",")}
    states = (states - {"CYCLE"}) or {"ANY"}  # CYCLE alone only spreads the runs over the interval
    if not states & {"ANY", "IDLE"}:
        out.append(f"warning: HealthCheckNodeState={found[1].get('HealthCheckNodeState')} ({found[0].path}:"
                   f"{found[1].lineno}) never runs the health check on a drained idle node, so slurmkit never "
                   "resumes one it drained: add IDLE (or use ANY)")
    busy = [s for s in ("ALLOC", "MIXED") if "ANY" not in states and s not in states]
    if busy:
        out.append(f"warning: HealthCheckNodeState={found[1].get('HealthCheckNodeState')} ({found[0].path}:"
                   f"{found[1].lineno}) leaves {' and '.join(busy)} (busy) nodes unchecked: while a node runs jobs "
                   "its GPU metrics go stale (SlurmkitHooksStale fires after 15 min) and a fault is seen only by "
                   "the next job's prolog; use ANY (slurmkit's check does not judge a running job's processes)")
    found = get("HealthCheckInterval")
    cur = found[1].get("HealthCheckInterval") if found else None
    if cur and cur.isdigit() and int(cur) == 0:
        out.append(f"warning: HealthCheckInterval=0 ({found[0].path}:{found[1].lineno}) turns the periodic health "
                   "check off (slurmd runs HealthCheckProgram only when it starts): a node slurmkit drained is "
                   f"never resumed and SlurmkitHooksStale fires on every node; --replace sets {spec.interval_s}")
    if cur and cur.isdigit() and int(cur) > 0:
        iv = int(cur)
        if iv > STALE_ALERT_S:
            out.append(f"warning: HealthCheckInterval={iv} ({found[0].path}:{found[1].lineno}) is longer than the "
                       f"stale-hook alert's {STALE_ALERT_S} s: SlurmkitHooksStale fires on every node; raise its "
                       "threshold in slurmkit.rules.yml or lower the interval")
        if iv * spec.resume_after > 3600:
            out.append(f"warning: HealthCheckInterval={iv} x resume_after={spec.resume_after}: a node slurmkit "
                       f"drained is resumed {iv * spec.resume_after / 3600:g} h after it is healthy again")
    return out


RUN, READ, LIST = stat.S_IXOTH, stat.S_IROTH, stat.S_IROTH | stat.S_IXOTH  # what others need of a path


def others_blocked(path: str, need: int, _links: int = 0) -> str | None:
    """Why a user who is neither the owner nor in the group of a file (the "other" permission
    bits of ``os.stat``'s ``st_mode``; ACLs are not read) cannot use ``path``: every directory on
    the way, symbolic links followed as the kernel follows them, needs ``o+x``; ``path`` itself
    needs ``need`` (:data:`RUN` for a program, :data:`READ` for a file, :data:`LIST` for a
    directory imported from). Returns ``"<path> is mode 0700"``-style text for the first that
    lacks it, ``"<path>: No such file or directory"`` for one that cannot be stat'ed, or None
    when every user can. Reads the file system (``lstat``, ``stat``, ``readlink``); raises
    nothing."""
    parts = [p for p in os.path.abspath(path).split(os.sep) if p]
    cur = os.sep
    try:
        for i, name in enumerate(parts):
            mode = os.stat(cur).st_mode
            if not mode & stat.S_IXOTH:
                return f"{cur} is mode {stat.S_IMODE(mode):04o}"
            nxt = os.path.join(cur, name)
            if stat.S_ISLNK(os.lstat(nxt).st_mode):
                if _links >= 40:  # the kernel's own limit (ELOOP)
                    return f"{nxt}: too many levels of symbolic links"
                target = os.path.normpath(os.path.join(cur, os.readlink(nxt), *parts[i + 1:]))
                return others_blocked(target, need, _links + 1)
            cur = nxt
        mode = os.stat(cur).st_mode
    except OSError as exc:
        return f"{exc.filename or cur}: {exc.strerror or exc}"
    if mode & need != need:
        return f"{cur} is mode {stat.S_IMODE(mode):04o}"
    return None


def hooks_imports() -> list[tuple[str, str, int]]:
    """What the running interpreter (``sys.executable``, the one ``hooks install`` writes into
    the shims) reads when it runs the Xid reader: ``(what, path, need)`` for its standard library
    (``sysconfig`` ``stdlib``), its site-packages (``purelib``), the slurmkit package (this
    module's package directory), the reader ``slurmkit/hooks/jobxids.py`` and pynvml (the
    reader's NVML fallback; left out when not installed)."""
    import importlib.util
    import sysconfig

    pkg = Path(__file__).resolve().parent.parent
    out = [("its standard library", sysconfig.get_paths()["stdlib"], LIST),
           ("its site-packages", sysconfig.get_paths()["purelib"], LIST),
           ("the slurmkit package it imports", str(pkg), LIST),
           ("the Xid reader", str(pkg / "hooks" / "jobxids.py"), READ)]
    spec = importlib.util.find_spec("pynvml")
    if spec is not None and spec.origin:
        out.append(("pynvml", spec.origin, READ))
    return out


#: run by another interpreter: its own hooks_imports(), as JSON
_IMPORTS_OF = "import json; from slurmkit.hooks.install import hooks_imports; print(json.dumps(hooks_imports()))"


def interpreter_imports(python: str) -> list[tuple[str, str, int]]:
    """:func:`hooks_imports` as the interpreter ``python`` (``hooks install --python``) gives it,
    run as ``python -I -c`` (as the shims run it: no user site, no PYTHONPATH). Raises
    :class:`InstallError` naming ``python`` when it cannot be run or cannot import slurmkit's
    hooks (every shim would then fail on every node). Runs a process (60 s at most)."""
    try:
        r = subprocess.run([python, "-I", "-c", _IMPORTS_OF], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(python, None, f"--python: cannot run it ({getattr(exc, 'strerror', None) or exc})") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise InstallError(python, None, f"--python: it cannot import slurmkit's hooks ({last}): install slurmkit "
                                         "into that interpreter, or give one that has it")
    return [(what, path, int(need)) for what, path, need in json.loads(r.stdout)]


def interpreter_warnings(python: str, imports=()) -> list[str]:
    """The warning (a one-line list, empty when all is well) when the hooks' interpreter
    ``python`` or what it imports (``imports``: ``(what, path, need)`` as :func:`hooks_imports`
    gives for the running interpreter) cannot be used by every user (:func:`others_blocked`).
    slurmd runs the prolog, epilog and health check as root, whom this does not stop; the
    mid-run retry's Xid query (``python -I -m slurmkit.hooks.jobxids`` in an ``srun`` step,
    docs/submit.md) runs it as the job's user, and would answer ``unknown`` on every node.
    Reads the file system."""
    why = []
    blocked = others_blocked(python, RUN)
    if blocked:
        why.append(f"the interpreter: {blocked}")
    for what, path, need in imports:
        blocked = others_blocked(path, need)
        if blocked:
            why.append(f"{what}: {blocked}")
    if not why:
        return []
    return [f"warning: the hooks' interpreter {python} cannot be run by every user ({'; '.join(why)}): the "
            "prolog, epilog and health check run as root and are not affected, but the mid-run retry's Xid "
            "query runs it as the job's user and would answer 'unknown' on every node, so only Slurm's own "
            "evidence of a node fault would count; install slurmkit where every user can run and read it (the "
            "system Python, or a venv under /opt made by root with umask 022) and give that interpreter to "
            "install: --python PATH"]


def is_configless(tree: list) -> bool:
    """True when the include tree's ``SlurmctldParameters`` has ``enable_configless``."""
    found = sconf.find_effective(tree, "SlurmctldParameters")
    return bool(found) and "enable_configless" in (found[1].get("SlurmctldParameters") or "").lower()


def conf_cache_of(tree: list) -> str | None:
    """Where slurmd keeps its configless cache on the nodes (the hooks config's ``conf_cache``):
    ``<SlurmdSpoolDir>/conf-cache`` (``SlurmdSpoolDir`` as written, ``%n`` / ``%h`` left for
    the hooks to expand; default ``/var/spool/slurmd``: slurm.conf(5)); None when the cluster
    is not configless (SlurmctldParameters without ``enable_configless``)."""
    if not is_configless(tree):
        return None
    found = sconf.find_effective(tree, "SlurmdSpoolDir")
    spool = (found[1].get("SlurmdSpoolDir") if found else None) or "/var/spool/slurmd"
    return spool.strip('"').rstrip("/") + "/conf-cache"


def _plan_healthcheck(plan, ed, spec: InstallSpec, hc_path: Path, cfg_path: Path) -> None:
    """``HealthCheckProgram``: slurmkit's shim at ``hc_path``; a foreign one refused, replaced
    (``spec.replace``) or chained after slurmkit's check (``spec.chain``: :func:`chain_text`,
    what a reinstall chained before is read back from its marker); the budget warnings
    (:func:`budget_warnings`). Appends to ``plan`` and edits through ``ed``."""
    found = ed.get("HealthCheckProgram")
    current = found[1].get("HealthCheckProgram") if found else None
    chained = None
    if found and _is_ours(*found):  # reinstall: what we chained before is in our marker
        was = _original(found[1])
        old = sconf.parse(was, found[0].path).find("HealthCheckProgram") if was and spec.chain else None
        chained = (old.get("HealthCheckProgram") or None) if old else None   # read as slurmd reads the line
    if current and current.strip('"') != str(hc_path):
        if spec.chain:
            chained = current.strip('"')
            plan.notes.append(f"the site's HealthCheckProgram {chained} keeps running, from {hc_path}, after "
                              f"slurmkit's check (so a hung one cannot hold it up), for at most "
                              f"{spec.chain_timeout_s} s and only what is left of {HEALTHCHECK_BUDGET_S} s; past that "
                              "its process group is killed")
        elif not spec.replace:
            raise InstallError(found[0].path, found[1].lineno, f"HealthCheckProgram={current} belongs to "
                               f"the site; run install with --chain to run it after slurmkit's check, bounded, "
                               f"or --replace to use slurmkit's instead (the old line is kept in a comment "
                               f"and restored by uninstall)")
    if current != str(hc_path):
        ed.set("HealthCheckProgram", str(hc_path), found)
    plan.new_files.append(NewFile(hc_path, text=shim_text("healthcheck", spec.python, cfg_path, chain=chained,
                                                          chain_timeout_s=spec.chain_timeout_s)))
    plan.notes.extend(budget_warnings(spec, chained))


def plan_install(tree: list, spec: InstallSpec) -> Plan:
    """Plan an install into the include tree ``tree`` (:func:`slurmkit.slurm.conf.load_tree`, main
    file first). Pure: returns a :class:`Plan`; raises :class:`InstallError` when a value cannot be
    merged (e.g. a foreign HealthCheckProgram without ``replace``)."""
    main = tree[0]
    conf_dir = main.path.parent.absolute()
    cfg_path = conf_dir / CONFIG
    ed = _Editor(tree)
    plan = Plan()
    found = ed.get("SlurmctldParameters")
    if found and "enable_configless" in found[1].get("SlurmctldParameters").lower():
        if not spec.configless:
            raise InstallError(found[0].path, found[1].lineno,
                               "configless cluster (SlurmctldParameters=enable_configless): slurmd fetches slurm.conf "
                               "from slurmctld, but the prolog.d/ and epilog.d/ scripts, the shims and "
                               f"{CONFIG} must exist on every node at the paths slurm.conf names; run install with "
                               "--configless and copy the files it lists to every node (or install on each node "
                               "with its own --slurm-conf) before 'scontrol reconfigure'")

    site_scripts = {k: found[1].get(k) for k in SITE_SCRIPTS if (found := ed.get(k)) and not _is_ours(*found)}
    for key, kind in (("Prolog", "prolog"), ("Epilog", "epilog")):
        _plan_hook(plan, ed, key, kind, conf_dir, shim_text(kind, spec.python, cfg_path))

    found = ed.get("PrologFlags")
    flags = [f for f in (found[1].get("PrologFlags") if found else "").split(",") if f]
    if "alloc" not in {f.lower() for f in flags}:
        ed.set("PrologFlags", ",".join(flags + ["Alloc"]), found)
        plan.notes.append(alloc_note(site_scripts.get("Prolog"), contain="contain" in {f.lower() for f in flags}))
    if "serial" in {f.lower() for f in flags}:
        plan.notes.append(f"PrologFlags={','.join(flags)} keeps Serial: the node's prologs and epilogs run one at "
                          f"a time, so slurmkit's run (up to {hooks_need_s(spec.deadline_s, spec.scontrol_timeout_s):g} "
                          "s) adds to each job's start")

    found = ed.get("SchedulerParameters")
    params = [p for p in (found[1].get("SchedulerParameters") if found else "").split(",") if p]
    if "nohold_on_prolog_fail" not in {p.lower() for p in params}:
        ed.set("SchedulerParameters", ",".join(params + ["nohold_on_prolog_fail"]), found)

    _plan_healthcheck(plan, ed, spec, conf_dir / HEALTHCHECK_SHIM, cfg_path)

    for key, want in (("HealthCheckInterval", spec.interval_s), ("PrologEpilogTimeout", spec.timeout_s)):
        found = ed.get(key)
        cur = found[1].get(key) if found else None
        if want is None:  # --timeout 0: leave it as the site has it
            continue
        if cur == str(want):
            continue
        if found and key == "PrologEpilogTimeout" and not _is_ours(*found) and cur and cur.isdigit() \
                and int(cur) >= want:
            plan.notes.append(f"kept the site's {key}={cur} ({found[0].path}:{found[1].lineno}): "
                              f"never lowered (slurmkit needs {want})")
            continue
        split = {k: f[1].get(k) for k in SPLIT_TIMEOUTS if (f := ed.get(k))} if key == "PrologEpilogTimeout" else {}
        if not found and len(split) == 2:
            plan.notes.append(f"PrologEpilogTimeout not added: the site's {', '.join(f'{k}={v}' for k, v in split.items())} "
                              "bound every prolog and epilog in its place (Slurm 25.05+)")
            continue
        if not found or _is_ours(*found) or spec.replace:
            ed.set(key, str(want), found)
            if key == "PrologEpilogTimeout" and not found:
                plan.notes.append(_timeout_added_note(site_scripts, want, split))
        else:
            plan.notes.append(f"kept the site's {key}={cur} ({found[0].path}:{found[1].lineno}); "
                              f"--replace sets {want}")
    plan.notes.extend(schedule_warnings(ed.get, spec))

    if spec.config and not cfg_path.exists():
        plan.new_files.append(NewFile(cfg_path, text=spec.config, mode=0o644))
    if is_configless(tree):
        made = [str(f.path) for f in plan.new_files] + ([str(cfg_path)] if cfg_path.exists() else [])
        plan.notes.append("configless: copy these to every node, same paths, before 'scontrol reconfigure': "
                          f"{', '.join(dict.fromkeys(made))}. The hooks read slurm.conf and gres.conf where slurmd "
                          f"keeps them on each node: {conf_cache_of(tree)} (SLURM_CONF in the prolog's environment; "
                          "the hooks config's conf_cache for the health check, which gets none)")
    plan.texts = ed.texts()
    # idempotence: files already present with the same content are not re-created
    plan.new_files = [f for f in plan.new_files if not _same(f)]
    plan.notes.append("run 'scontrol reconfigure' for Slurm to pick up the change")
    return plan


def printed(plan: Plan) -> str:
    """``hooks install --print``: what an install would do, as text for a site whose slurm.conf
    is generated (Puppet, Ansible, cluster-toolkit templates) and must not be edited in place.
    First the slurm.conf lines to put into the generator's source, each ``Key=Value`` as
    install would write it (without its marker comment), under a comment naming the file and the
    line it replaces (``was: <old line>``) or ``new``; then every file install would create, as
    a ``cat > PATH <<'EOF'`` block and its ``chmod`` (a ``ln -s`` for a link), for the site's
    tool to deploy to every node. Pure."""
    out = ["# slurm.conf: put these lines into the source the file is generated from "
           "(the comment above each says what it replaces)"]
    for path, (_, new) in plan.texts.items():
        conf = sconf.parse(new, path)
        for e in conf.entries:
            if not _is_ours(conf, e):
                continue
            was = _original(e)
            body = conf.raw(e).split(f"  # {MARK}", 1)[0]
            out.append(f"# {path}: " + (f"was: {was}" if was is not None else "new"))
            out.append(body)
    if len(out) == 1:
        out.append("# (none: slurm.conf already has them)")
    out.append("")
    out.append("# files to create on every node (the same paths), e.g. by the site's configuration tool")
    for f in plan.new_files:
        if f.link is not None:
            out.append(f"ln -sfn '{f.link}' '{f.path}'")
            continue
        end = "SLURMKIT_EOF"
        out += [f"mkdir -p '{f.path.parent}'", f"cat > '{f.path}' <<'{end}'", f.text.rstrip("\n"), end,
                f"chmod {f.mode:o} '{f.path}'"]
    return "\n".join(out) + "\n"


def _same(f: NewFile) -> bool:
    try:
        if f.link is not None:
            return os.readlink(f.path) == f.link
        return f.path.read_text() == f.text and not f.path.is_symlink()
    except OSError:
        return False


def orphan_notes(tree: list, created) -> list[str]:
    """Warnings for the files an admin added to a directory install's ``Prolog=`` /
    ``Epilog=`` glob runs (``<conf dir>/prolog.d/*``): uninstall gives the key its old value
    back, so slurmd stops running them; they are left where they are. ``created``: the paths
    install created (the manifest's). Reads the directories (glob)."""
    import glob as _glob

    out = []
    for conf in tree:
        for e in conf.entries:
            if e.first_key not in ("prolog", "epilog") or not _is_ours(conf, e):
                continue
            key, value = e.pairs[0][0], e.pairs[0][1].strip('"')
            try:
                if _glob_parts(value) is None:
                    continue
            except ValueError:
                continue
            was = _original(e)
            left = [m for m in sorted(_glob.glob(value), key=os.fsencode) if m not in set(created)]
            if left:
                back = f"sets {key} back to {was.strip()!r}" if was else f"removes {key}"
                out.append(f"warning: not slurmkit's, run by {key}={value}: {', '.join(left)}; uninstall {back}, "
                           f"so slurmd no longer runs {'it' if len(left) == 1 else 'them'} (left in place: run "
                           f"{'it' if len(left) == 1 else 'them'} from the site's own {key} if still wanted)")
    return out


def plan_uninstall(tree: list, manifest: dict | None, now: _dt.datetime | None = None) -> Plan:
    """Plan undoing an install: files whose SHA-256 still equals what install wrote are restored
    from their backup byte for byte; in others every marked line is put back as it was (or removed
    when added). Files install created are removed, but the hooks config an admin edited since
    (its SHA-256 differs from the manifest's) is kept as ``<file>.slurmkit-edited-<UTC>``
    (``now``, default the current time). Pure but for reading the created config."""
    stamp = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    plan = Plan()
    manifest = manifest or {}
    written = manifest.get("written", {})
    plan.notes.extend(orphan_notes(tree, manifest.get("created", [])))
    for conf in tree:
        old = conf.text()
        rec = written.get(str(conf.path))
        if rec and rec.get("backup") and _sha(old) == rec.get("sha256") and Path(rec["backup"]).exists():
            plan.restore[conf.path] = Path(rec["backup"])
            continue
        while True:
            entry = next((e for e in conf.entries if _is_ours(conf, e)), None)
            if entry is None:
                break
            was = _original(entry)
            if was is None:
                conf.delete(entry)
            else:
                conf.replace(entry, was)
        plan.texts[conf.path] = (old, conf.text())
    shas = manifest.get("created_sha256", {})
    for p in manifest.get("created", []):
        if not os.path.lexists(p):
            continue
        if os.path.basename(p) == CONFIG and not os.path.islink(p):
            try:
                edited = _sha(Path(p).read_text()) != shas.get(p)  # no record (older install): kept too
            except (OSError, UnicodeDecodeError):
                edited = True
            if edited:
                plan.keep[Path(p)] = Path(f"{p}.slurmkit-edited-{stamp}")
                plan.notes.append(f"{p} was edited since install: kept as {plan.keep[Path(p)]}")
                continue
        plan.remove_files.append(Path(p))
    if any(o != n for o, n in plan.texts.values()) or plan.restore:
        plan.notes.append("run 'scontrol reconfigure' for Slurm to pick up the change")
    return plan


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest_path(slurm_conf: Path) -> Path:
    return Path(slurm_conf).absolute().parent / MANIFEST


def read_manifest(slurm_conf: Path) -> dict | None:
    """The install manifest beside ``slurm_conf`` (None when there is none)."""
    try:
        return json.loads(manifest_path(slurm_conf).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InstallError(manifest_path(slurm_conf), None, f"unreadable install manifest: {exc}") from None


def apply(plan: Plan, slurm_conf: Path, installing: bool, now: _dt.datetime | None = None) -> list[str]:
    """Carry out ``plan``: back up and atomically rewrite changed files, create / remove files,
    update the manifest. Returns the backup paths written."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    manifest = read_manifest(slurm_conf) or {"written": {}, "created": []}
    backups = []
    for path, (old, new) in plan.texts.items():
        if old == new:
            continue
        backup = path.with_name(f"{path.name}.slurmkit-{stamp}")
        atomic_write(backup, path.read_bytes())
        backups.append(str(backup))
        atomic_write(path, new)
        rec = manifest["written"].get(str(path))
        if installing:
            # keep the oldest backup: it is the site's own file
            first = rec["backup"] if rec and rec.get("backup") else str(backup)
            manifest["written"][str(path)] = {"backup": first, "sha256": _sha(new)}
        else:
            manifest["written"].pop(str(path), None)
    for path, backup in plan.restore.items():
        atomic_write(path, Path(backup).read_bytes())
        manifest["written"].pop(str(path), None)
    manifest.setdefault("created_dirs", [])
    for f in plan.new_files:
        if not f.path.parent.exists():
            f.path.parent.mkdir(parents=True)
            manifest["created_dirs"].append(str(f.path.parent))
        if f.link is not None:
            if os.path.lexists(f.path):
                os.unlink(f.path)
            os.symlink(f.link, f.path)
        else:
            atomic_write(f.path, f.text, f.mode)
            manifest.setdefault("created_sha256", {})[str(f.path)] = _sha(f.text)
        if str(f.path) not in manifest["created"]:
            manifest["created"].append(str(f.path))
    for p, new in plan.keep.items():
        os.rename(p, new)
        if str(p) in manifest["created"]:
            manifest["created"].remove(str(p))
        manifest.get("created_sha256", {}).pop(str(p), None)
    for p in plan.remove_files:
        if os.path.lexists(p):
            os.unlink(p)
        if str(p) in manifest["created"]:
            manifest["created"].remove(str(p))
        manifest.get("created_sha256", {}).pop(str(p), None)
    if not installing:
        for d in list(manifest.get("created_dirs", [])):
            try:
                os.rmdir(d)  # prolog.d / epilog.d that install made, once empty
                manifest["created_dirs"].remove(d)
            except FileNotFoundError:
                manifest["created_dirs"].remove(d)
            except OSError:
                pass
    mpath = manifest_path(slurm_conf)
    if installing:
        atomic_write(mpath, json.dumps(manifest, indent=1) + "\n", 0o644)
    elif not manifest["written"] and not manifest["created"] and not manifest["created_dirs"]:
        mpath.unlink(missing_ok=True)
    else:
        atomic_write(mpath, json.dumps(manifest, indent=1) + "\n", 0o644)
    return backups
