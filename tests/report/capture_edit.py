"""Labelled edits of real sacct captures for tests: what a site's capture looks like when it
was taken with fewer fields (``sacct -o`` without some of them)."""

from pathlib import Path


def without_fields(src: Path, dst: Path, drop: set[str]) -> Path:
    """Write to ``dst`` the capture ``src`` (``|``-delimited, header line first) without the
    fields named in ``drop`` and return ``dst``: a labelled edit of a real capture."""
    lines = src.read_text().splitlines()
    head = lines[0].split("|")
    keep = [i for i, n in enumerate(head) if n not in drop]
    dst.write_text("\n".join("|".join(p[i] for i in keep) for p in (ln.split("|") for ln in lines)) + "\n")
    return dst


def repeated(src: Path, dst: Path, times: int, step: int = 10_000_000) -> Path:
    """Write to ``dst`` the capture ``src`` (``|``-delimited, header line first, a ``JobID``
    column, optionally ``JobIDRaw``) with every row ``times`` times, copy ``k`` with ``k x
    step`` added to the job number that starts each JobID / JobIDRaw (``8322514_33.batch`` ->
    ``18322514_33.batch``), and return ``dst``: a labelled edit of a real capture, as a site
    ``times`` as busy would print it."""
    import re

    lines = src.read_text().splitlines()
    head = lines[0].split("|")
    ids = [i for i, n in enumerate(head) if n in ("JobID", "JobIDRaw")]
    out = [lines[0]]
    for k in range(times):
        for ln in lines[1:]:
            p = ln.split("|")
            for i in ids:
                p[i] = re.sub(r"^\d+", lambda m: str(int(m.group()) + k * step), p[i])
            out.append("|".join(p))
    dst.write_text("\n".join(out) + "\n")
    return dst


def with_earlier_attempt(src: Path, dst: Path, job: str, state: str = "REQUEUED",
                         edits: dict[str, str] | None = None) -> Path:
    """Write to ``dst`` the capture ``src`` (``|``-delimited, header line first) with an earlier
    attempt of job ``job`` printed before its rows, as ``sacct -D`` prints a requeued job: a
    copy of the job's row (``State`` ``state``) and of each of its step rows, each with the
    fields of ``edits`` (``{field: value}``) replaced; returns ``dst``: a labelled edit of a
    real capture."""
    lines = src.read_text().splitlines()
    head = lines[0].split("|")
    col = {n: i for i, n in enumerate(head)}
    mine = [ln for ln in lines[1:] if ln.split("|")[0].split(".")[0] == job]
    earlier = []
    for ln in mine:
        p = ln.split("|")
        if "." not in p[0]:
            p[col["State"]] = state
        for k, v in (edits or {}).items():
            p[col[k]] = v
        earlier.append("|".join(p))
    first = lines.index(mine[0])
    dst.write_text("\n".join(lines[:first] + earlier + lines[first:]) + "\n")
    return dst
