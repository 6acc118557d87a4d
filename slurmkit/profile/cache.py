"""The hooks' fast path to a profile's ``[health]`` section: :func:`load_health`.

A hook runs on every job; loading, layering and validating the whole profile (and importing the
model and validator) costs more than the checks themselves. So the section that
:func:`~slurmkit.profile.load.load_profile` built is kept as JSON in the hooks' state directory,
keyed by the path, modification time (ns) and size of every file the profile was layered from
(the site file and the profiles it ``extends``). While none of them changes, a hook reads that
JSON and imports nothing but :mod:`slurmkit.profile.health`; any change reloads the profile
through ``load_profile``, the one reader, with its full validation.
"""

from __future__ import annotations

import json
import os

from slurmkit.profile.health import Health

CACHE_NAME = "profile-health.json"


def _stamp(path: str) -> list:
    st = os.stat(path)
    return [path, st.st_mtime_ns, st.st_size]


def load_health(profile, cache_dir=None) -> Health:
    """The ``[health]`` section of site profile ``profile`` (a path or shipped name).

    ``cache_dir``: where the section is cached (``<cache_dir>/profile-health.json``; None: no
    cache, always ``load_profile``). A cache that is missing, unreadable, stale or of another
    profile is rebuilt; failing to write it is not an error (the next run loads again).
    Raises :class:`~slurmkit.profile.errors.ProfileError` (file, line, key) for a bad profile.
    """
    cache = os.path.join(os.fspath(cache_dir), CACHE_NAME) if cache_dir is not None else None
    if cache is not None:
        try:
            with open(cache, encoding="utf-8") as fh:
                data = json.load(fh)
            if data["profile"] == os.fspath(profile) and data["layers"] \
                    and all(_stamp(f) == [f, ns, size] for f, ns, size in data["layers"]):
                return Health.from_json(data["health"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    from slurmkit.profile.load import load_profile

    prof = load_profile(profile)
    if cache is not None:
        try:
            layers = [_stamp(f) for f in prof.layers if f != "preset"]
            from slurmkit.atomicfile import atomic_write

            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            atomic_write(cache, json.dumps({"profile": os.fspath(profile), "layers": layers,
                                            "health": prof.health.to_json()}) + "\n", 0o600)
        except (OSError, TypeError, ValueError):
            pass
    return prof.health
