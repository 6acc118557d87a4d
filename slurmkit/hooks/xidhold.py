"""What keeps a node drained for a hardware XID, and what ends it.

A hardware XID (one whose NVIDIA Xid catalog action is a reset, a reboot or a report: 48, 79, 95, 119, ...; :mod:`slurmkit.health.xidcatalog`) says the GPU needs at least
a reset; clean health checks afterwards are no evidence of one. So each GPU with such an XID gets
a *hold* in ``health.json`` (:class:`slurmkit.hooks.nodestate.NodeHealth` ``xid_holds``):
``{pci bus id ("" when the line names no GPU): {"since_s": epoch s, "since_seq": int | None,
"reason": drain reason}}``, ``since`` being its latest such line (kernel time and ``/dev/kmsg``
sequence number; the hook run's time when the line has none). While any hold is left, the node
stays drained whatever the clean runs say. A hold ends when:

- the node rebooted (its boot id differs from the drain's): every hold ends;
- that GPU was reset after the line (:mod:`slurmkit.hooks.gpureset`, ``slurmkit hooks
  gpu-reset``): its hold ends, the others stay; a hold without a GPU ends only by a reboot.

Then the node comes back as any slurmkit drain does (``resume_after`` clean runs and the active
check). Pure functions over plain data; standard library only.
"""

from __future__ import annotations

import re

XID_REASON = "slurmkit: xid "
_REASON_BUS = re.compile(r"^slurmkit: xid GPU\d+ (?:\(gres index \d+, )?([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\)?:")


def add(holds: dict, results, xids, now: float) -> dict:
    """``holds`` with one more for each hardware-XID fail in ``results`` (CheckResults of the
    ``xid`` check; ``xids``: the run's :class:`~slurmkit.health.state.Xid` lines): keyed by the
    result's PCI bus id, ``since`` the latest of its lines (``time_s`` / ``seq``; ``now`` when
    the lines have no time), ``reason`` the result's drain reason. A newer XID on a GPU already
    held moves its ``since`` on (a reset before it no longer counts)."""
    out = {k: dict(v) for k, v in (holds or {}).items()}
    for r in results:
        if r.check != "xid" or r.status != "fail":
            continue
        bus = r.pci_bus_id or ""
        lines = [x for x in xids if x.xid == r.value and (x.pci_bus_id or "") == bus]
        times = [x.time_s for x in lines if x.time_s is not None]
        seqs = [x.seq for x in lines if x.seq is not None]
        since_s, since_seq = (max(times) if times else now), (max(seqs) if seqs else None)
        old = out.get(bus) or {}
        since_s = max(since_s, float(old.get("since_s") or 0.0))
        since_seq = max((v for v in (since_seq, old.get("since_seq")) if v is not None), default=None)
        out[bus] = {"since_s": since_s, "since_seq": since_seq, "reason": r.reason()}
    return out


def from_reason(reason: str | None) -> dict:
    """The hold a ``slurmkit: xid GPU<i> <bus>: ...`` (or ``GPU<i> (gres index <g>, <bus>): ...``) drain reason implies when ``health.json``
    has none (written by an older slurmkit): on that GPU, since an unknown time (any reset
    recorded since ends it); a reason without a bus id holds node-wide; {} for another reason."""
    if not reason or not reason.startswith(XID_REASON):
        return {}
    m = _REASON_BUS.match(reason)
    return {m.group(1) if m else "": {"since_s": 0.0, "since_seq": None, "reason": reason}}


def cleared_by(hold: dict, reset: dict | None) -> bool:
    """Whether ``reset`` (a :func:`slurmkit.hooks.gpureset.load` entry) came after the XID that
    ``hold`` keeps: by ``/dev/kmsg`` sequence number when both have one, else by time."""
    if reset is None:
        return False
    if hold.get("since_seq") is not None and reset.get("kmsg_seq") is not None:
        return reset["kmsg_seq"] >= hold["since_seq"]
    return float(reset.get("at_s", 0.0)) >= float(hold.get("since_s", 0.0))


def release(holds: dict, resets: dict) -> tuple[dict, dict]:
    """``(remaining, released)``: the holds whose GPU was reset after their XID (``resets``:
    this boot's records by bus id) are released; a node-wide hold ("") never is."""
    remaining, released = {}, {}
    for bus, hold in (holds or {}).items():
        (released if bus and cleared_by(hold, resets.get(bus)) else remaining)[bus] = hold
    return remaining, released
