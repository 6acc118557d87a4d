"""The Slurm releases the sandbox runs, and where each comes from (pure: a table and lookups).

Debian packages three Slurm major releases that sites run or are moving to: 22.05 (Debian 12
"bookworm", this machine's own packages), 24.11 (Debian 13 "trixie") and the newest (Debian
unstable "sid": 26.05 when this table was written). The two newer ones run from a root
filesystem built from Debian's archive (:mod:`slurmkit.sandbox.rootfs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.sandbox.errors import SpecError


@dataclass(frozen=True)
class SlurmRelease:
    """One Slurm major release the sandbox offers.

    ``name``: the major release as Slurm numbers it (``"24.11"``); ``suite``: the Debian suite
    whose ``slurm-wlm`` packages hold it, or None for this machine's own packages;
    ``debian``: the suite's name in words (for messages and ``sandbox status``).
    """

    name: str
    suite: str | None
    debian: str

    @property
    def host(self) -> bool:
        """True for the release this machine's packages hold (no root filesystem)."""
        return self.suite is None


DEFAULT = "22.05"
RELEASES = {
    "22.05": SlurmRelease("22.05", None, "Debian 12 (bookworm), this machine's packages"),
    "24.11": SlurmRelease("24.11", "trixie", "Debian 13 (trixie)"),
    "26.05": SlurmRelease("26.05", "sid", "Debian unstable (sid)"),
}
#: Other names a user may give ``--slurm``.
ALIASES = {"newest": "26.05", "latest": "26.05", "default": DEFAULT}


def offered() -> str:
    """The versions ``--slurm`` takes, for messages: ``22.05 (default), 24.11, 26.05 (newest)``."""
    names = []
    for name in RELEASES:
        tags = [alias for alias, target in ALIASES.items() if target == name and alias not in ("default", "latest")]
        if name == DEFAULT:
            tags.insert(0, "default")
        names.append(f"{name} ({', '.join(tags)})" if tags else name)
    return ", ".join(names)


def release(name: str | None) -> SlurmRelease:
    """The release named ``name`` (``"24.11"``, ``"newest"``; None: the default).

    Raises :class:`~slurmkit.sandbox.errors.SpecError` listing the versions offered for any
    other name (``"23.11"``: no Debian suite packages it).
    """
    key = ALIASES.get(name or DEFAULT, name or DEFAULT)
    if key not in RELEASES and major(key) in RELEASES:
        key = major(key)   # 24.11.5, as scontrol version prints it
    try:
        return RELEASES[key]
    except KeyError:
        raise SpecError(f"--slurm {name}: the sandbox offers Slurm {offered()}, the releases Debian packages; "
                        "for a site on another release, try the nearest (docs/slurm-versions.md)") from None


def major(version: str) -> str:
    """``"24.11.5"`` (``slurmctld -V``, or a Debian version ``24.11.5-1``) -> ``"24.11"``."""
    parts = version.split("-", 1)[0].split(".")
    return ".".join(parts[:2])
