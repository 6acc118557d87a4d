"""PCI addresses (bus ids) in the one form slurmkit keeps: sysfs's ``0000:9b:00.0``.

A base module (standard library only): the health state, the kernel-log reader, the
nvidia-smi importers and the site profile's NIC ``pci`` keys all normalise through it.
"""

from __future__ import annotations

import re

# compiled on first use (re caches it): a hook replaying or reading ids already in sysfs form
# never pays for the compile
_BUS_RE = r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$"
_LOWER_HEX = frozenset("0123456789abcdef")


def normalise_bus_id(raw: str) -> str:
    """``00000000:9B:00.0`` / ``0000:9b:00`` / ``9b:00.0`` -> ``0000:9b:00.0`` (sysfs form).

    NVML and nvidia-smi print an 8-digit domain and upper case; the kernel log prints
    ``PCI:0000:9b:00`` without the function. Raises ``ValueError`` for anything else.
    """
    text = raw.strip()
    if (len(text) == 12 and text[4] == ":" and text[7] == ":" and text[10] == "." and text[11] in "01234567"
            and _LOWER_HEX.issuperset(text[:4] + text[5:7] + text[8:10])):
        return text  # already the sysfs form
    if text.upper().startswith("PCI:"):
        text = text[4:]
    m = re.match(_BUS_RE, text)
    if not m:
        raise ValueError(f"not a PCI bus id: {raw!r}")
    domain, bus, dev, fn = m.groups()
    domain = int(domain or "0", 16)
    return f"{domain:04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn or '0')}"
