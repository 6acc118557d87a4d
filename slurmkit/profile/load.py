"""Find and read a site profile: shipped name or path -> TOML -> layers -> :class:`Profile`."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from slurmkit.profile.errors import ProfileError
from slurmkit.profile.layers import PRESET, merge, parse_override
from slurmkit.profile.lines import key_line
from slurmkit.profile.model import Profile
from slurmkit.profile.validate import build


def site_dir() -> Path:
    """The directory of the shipped profiles (``site/`` in the source tree, ``slurmkit/site``
    installed; found as package data, ``slurmkit.site`` holds no code)."""
    from importlib import resources

    return Path(str(resources.files("slurmkit.site")))


def shipped_names() -> list[str]:
    """Names of the shipped profiles (``site/*.toml`` stems), sorted."""
    return sorted(p.stem for p in site_dir().glob("*.toml"))


def resolve(path_or_name) -> Path:
    """A profile file path: an existing path as is; a bare name (no ``/``, no ``.toml``) ->
    the shipped ``site/<name>.toml``. ProfileError when neither exists."""
    p = Path(path_or_name)
    if p.exists() or os.sep in str(path_or_name) or str(path_or_name).endswith(".toml"):
        return p
    shipped = site_dir() / f"{path_or_name}.toml"
    if shipped.exists():
        return shipped
    raise ProfileError(str(path_or_name), None, "no such profile file, and not a shipped profile "
                       f"(shipped: {', '.join(shipped_names())})")


def read_toml(path: Path) -> tuple[dict, str]:
    """(data, text) of TOML file ``path``; ProfileError with the line on syntax errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(str(path), None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        import re

        m = re.search(r"\(at line (\d+)", str(exc))
        line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
        if line is None and "(at end of document)" in str(exc):
            line = max(1, len(text.splitlines()))   # cut short: the last line is where it stops
        msg = str(exc).split(" (at line")[0].split(" (at end of document")[0]
        raise ProfileError(str(path), line, f"TOML syntax error: {msg}") from None


def _site_layers(path: Path, seen: tuple[str, ...] = ()) -> list[tuple[str, dict, str]]:
    """[(file, data, text)] for ``path`` and, first, the chain of profiles it ``extends``."""
    data, text = read_toml(path)
    base = data.pop("extends", None)
    if base is None:
        return [(str(path), data, text)]
    if not isinstance(base, str):
        raise ProfileError(str(path), key_line(text, "extends"),
                           f"expected a profile name or path, got {base!r}", "extends")
    if str(path.resolve()) in seen:
        raise ProfileError(str(path), None, "profiles extend each other in a loop", "extends")
    base_path = resolve(base) if not base.startswith(".") else (path.parent / base)
    return _site_layers(base_path, seen + (str(path.resolve()),)) + [(str(path), data, text)]


def load_profile(path_or_name, overrides=()) -> Profile:
    """Load, layer and validate a site profile.

    ``path_or_name``: a TOML file path or a shipped profile name (``"dgx-a100"``, ``"sandbox"``).
    ``overrides``: applied in order after the site file; each a TOML file path (Path or str
    ending in ``.toml``), a dict, or a ``dotted.key=value`` string. Layers: :data:`PRESET` ->
    the profiles the site file ``extends`` -> the site file -> overrides. Raises
    :class:`ProfileError` (file, dotted key, line, message) on any problem.
    """
    path = resolve(path_or_name)
    layers = _site_layers(path)
    data = PRESET
    names = ["preset"]
    for file, layer, _text in layers:
        data = merge(data, layer)
        names.append(file)
    site_file, _, site_text = layers[-1]
    err_file, err_text = site_file, site_text
    for ov in overrides:
        if isinstance(ov, dict):
            layer, name, text = ov, "<override>", ""
        elif isinstance(ov, Path) or (isinstance(ov, str) and ov.endswith(".toml") and "=" not in ov):
            layer, text = read_toml(Path(ov))
            name = str(ov)
        elif isinstance(ov, str):
            layer, name, text = parse_override(ov), f"<override {ov}>", ""
        else:
            raise ProfileError("", None, f"override {ov!r}: expected a TOML path, a dict or key=value")
        data = merge(data, layer)
        names.append(name)
    try:
        return build(data, err_file, err_text, tuple(names))
    except ProfileError as exc:
        if exc.line is None and exc.key and len(layers) > 1:
            # the key may be written in a profile this one extends
            for file, _layer, text in reversed(layers[:-1]):
                line = key_line(text, exc.key)
                if line:
                    raise ProfileError(file, line, exc.message, exc.key) from None
        raise


def load_profile_data(data: dict, source: str = "") -> Profile:
    """Validate an in-memory profile dict (as tomllib returns it) on top of the preset."""
    return build(merge(PRESET, data), source, "", ("preset", source or "<data>"))
