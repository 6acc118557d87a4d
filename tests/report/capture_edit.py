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
