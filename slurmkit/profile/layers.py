"""Profile layering: built-in presets -> site file (and what it ``extends``) -> user overrides.

Later layers are merged key by key into earlier ones (tables recursively; arrays, including
arrays of tables such as ``gpus``, are replaced whole). Overrides are TOML files, dicts, or
``dotted.key=value`` strings whose value is TOML (``nccl.version="2.23.4"``,
``submit.cpus_per_gpu=8``) or, when not valid TOML, a bare string.
"""

from __future__ import annotations

import copy
import tomllib

from slurmkit.profile.errors import ProfileError

#: The built-in preset every profile starts from: empty, because every default lives in the
#: model's dataclasses (:mod:`slurmkit.profile.model`, :mod:`slurmkit.profile.health`) and the
#: validator fills what a profile leaves out from there. Kept as the first layer's name.
PRESET: dict = {}


def merge(base: dict, top: dict) -> dict:
    """``top`` merged into a copy of ``base``: tables recursively, everything else replaced."""
    out = copy.deepcopy(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_override(item: str) -> dict:
    """``a.b.c=value`` -> ``{"a": {"b": {"c": value}}}`` (value parsed as TOML, else a string).
    ProfileError when there is no ``=`` or the key is empty."""
    if "=" not in item:
        raise ProfileError("", None, "override must look like dotted.key=value", item)
    key, raw = item.split("=", 1)
    key = key.strip()
    parts = [p.strip() for p in key.split(".")]
    if not key or not all(parts):
        raise ProfileError("", None, "override key is empty", key or item)
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    out: dict = {}
    cur = out
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out
