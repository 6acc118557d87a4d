"""The job's ``-o`` / ``-e`` files: their directories must exist when the job starts (Slurm
creates the file, never its directory, and a job that cannot open it fails with no output
anywhere), so slurmkit creates them at submit, as submitit creates its folder. So with the job's
working directory (``--chdir``): a job whose directory does not exist dies with no output.
"""

from __future__ import annotations

import os
import posixpath

from slurmkit.errors import UsageError


def output_dirs(paths: dict[str, str | None], workdir: str) -> list[str]:
    """The directories of the output paths (``{"--output": path or None, ...}``), absolute,
    relative ones taken from ``workdir`` (the job's ``--chdir``, else the submit directory,
    where Slurm takes them from). Pure. Raises :class:`UsageError` naming the option and path
    when a directory holds a Slurm filename pattern (``%j``...): it differs per job and cannot
    be created before the job starts."""
    out = []
    for option, path in paths.items():
        if not path:
            continue
        d = posixpath.dirname(str(path))
        if not d:
            continue
        if "%" in d:
            raise UsageError(f"{option} {path}", "the directory part holds a Slurm pattern (%...): Slurm does not "
                             "create directories, so put the pattern in the file name (logs/%x-%j.out)")
        d = d if posixpath.isabs(d) else posixpath.normpath(posixpath.join(workdir, d))
        if d not in out:
            out.append(d)
    return out


def make_output_dirs(paths: dict[str, str | None], workdir: str) -> list[str]:
    """Create the missing directories of :func:`output_dirs` here (the submitting machine, where
    a local sbatch's job writes); the ones created. Raises :class:`UsageError` naming the
    option, path and the OS error when one cannot be created, or the file in the way when a
    part of the directory is a regular file (``-o afile/x-%j.out``: "afile is a file, not a
    directory")."""
    made = []
    for d in output_dirs(paths, workdir):
        if os.path.isdir(d):
            continue
        up = d
        while up and not os.path.lexists(up):
            up = os.path.dirname(up.rstrip("/")) if up != "/" else ""
        if up and not os.path.isdir(up):
            option, path = next((o, p) for o, p in paths.items() if p and _under(d, p, workdir))
            raise UsageError(f"{option} {path}", f"{up} is a file, not a directory")
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"output directory {d}", f"cannot create it: {exc.strerror}") from None
        made.append(d)
    return made


def _under(d: str, path: str, workdir: str) -> bool:
    """Whether ``d`` is the directory :func:`output_dirs` took from ``path``."""
    p = posixpath.dirname(str(path))
    return (p if posixpath.isabs(p) else posixpath.normpath(posixpath.join(workdir, p))) == d


def make_workdir(chdir: str | None, cwd: str) -> str | None:
    """Create the job's working directory ``chdir`` (relative to ``cwd``, as sbatch takes it)
    here when it is missing (Slurm does not: the job would fail at its start with no output);
    the directory created, else None. Raises :class:`UsageError` naming ``--chdir`` when a file
    is in the way or it cannot be created (the OS error)."""
    if not chdir:
        return None
    d = os.path.normpath(os.path.join(cwd, chdir))
    if os.path.isdir(d):
        return None
    up = d
    while up and not os.path.lexists(up):
        up = os.path.dirname(up.rstrip("/")) if up != "/" else ""
    if up and not os.path.isdir(up):
        raise UsageError(f"--chdir {chdir}", f"{up} is a file, not a directory")
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--chdir {chdir}", f"cannot create it: {exc.strerror}") from None
    return d
