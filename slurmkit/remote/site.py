"""The remote cluster's site profile: ``--site`` given here, else the profile the login node's
``SLURMKIT_SITE`` names.

A shipped profile name (``dgx-h100``) is loaded from this installation; a path is read from the
login node through ssh (``cat``) into a private temporary directory and loaded from there, its
``source`` relabelled ``<host>:<path>`` so that ``--explain`` and errors name where it lives.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from slurmkit.errors import UsageError
from slurmkit.profile import load_profile
from slurmkit.remote.backend import RemoteBackend


@dataclasses.dataclass(frozen=True)
class RemoteSite:
    """The loaded profile (``profile``), what it was named by (``spec``: a name or a path) and
    ``origin``: ``"--site"`` or ``"SLURMKIT_SITE on <host>"``."""

    profile: object
    spec: str
    origin: str


def _is_name(spec: str) -> bool:
    return "/" not in spec and not spec.endswith(".toml")


def load_remote_site(backend: RemoteBackend, site: str | None) -> RemoteSite:
    """The profile for a remote submit. Raises :class:`~slurmkit.errors.UsageError` when
    neither ``site`` nor the login node's ``SLURMKIT_SITE`` names one, a
    :class:`~slurmkit.remote.ssh.RemoteError` when the file cannot be read there, and the
    profile loader's ``ProfileError`` when it is not a valid profile."""
    host = backend.remote.host
    if site:
        return RemoteSite(load_profile(site), site, "--site")
    spec = backend.probe().site
    if not spec:
        raise UsageError("--site", f"no site profile for {host}: pass --site, or set SLURMKIT_SITE "
                         "on the login node")
    origin = f"SLURMKIT_SITE on {host}"
    if _is_name(spec):
        return RemoteSite(load_profile(spec), spec, origin)
    text = backend.remote.shell(f"cat -- {_quote(spec)}", "connect").stdout
    with tempfile.TemporaryDirectory(prefix="slurmkit-remote-site-") as tmp:
        local = os.path.join(tmp, os.path.basename(spec) or "site.toml")
        with open(local, "w", encoding="utf-8") as fh:
            fh.write(text)
        profile = load_profile(local)
    try:
        profile = dataclasses.replace(profile, source=f"{host}:{spec}")
    except (TypeError, ValueError):
        pass
    return RemoteSite(profile, spec, origin)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
