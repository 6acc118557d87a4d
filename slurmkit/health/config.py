"""Health-check configuration: the shipped defaults in ``checks.toml`` merged with a site
profile's typed ``[health]`` section (:class:`slurmkit.profile.health.Health`; its keys, their
defaults and their validation live there and in the profile loader, nothing is re-checked here).

Pure: :func:`load_config` takes the section; :func:`defaults` (:func:`slurmkit.profile.health.check_defaults`,
below this package: the profile validates its ``[health]`` keys against the same file) reads the
package data file once.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurmkit.profile.health import Health, check_defaults as defaults
from slurmkit.records import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from typing import Any

def check_ids() -> list[str]:
    """Every check id, in the data file's order."""
    return list(defaults()["checks"])


@record(frozen=True)
class HealthConfig:
    """Thresholds, switches and expected values for :func:`slurmkit.health.checks.run_checks`.

    ``mode``, ``deadline_s`` (s), ``per_call_deadline_s`` (s), ``baseline_xids`` (``log`` |
    ``drain``): the profile's ``[health]`` values (defaults: :class:`~slurmkit.profile.health.Health`)."""

    thresholds: dict[str, Any]
    enabled: dict[str, bool]
    expect: dict[str, Any] = field(default_factory=dict)
    mode: str = Health.mode
    deadline_s: float = Health.deadline_s
    per_call_deadline_s: float = Health.per_call_deadline_s
    baseline_xids: str = Health.baseline_xids
    xid_names: dict[int, str] = field(default_factory=dict)
    clock_event_bits: dict[str, int] = field(default_factory=dict)

    def t(self, name: str):
        """A threshold by name (KeyError for a typo in code, never silently None)."""
        return self.thresholds[name]


#: The HCA spec for a node without a node type: every port under ``/sys/class/infiniband``
#: (whatever its name) must be ACTIVE / LinkUp, warn-level (:func:`judged_hcas`'s ``tier``).
EVERY_HCA = {"device": "*", "link_layer": None, "rate_gbps": None, "role": "unlisted", "pci": None, "tier": "warn"}


def judged_hcas(nics, other_roles: bool = False) -> list[dict]:
    """The NICs the ``ib_*`` checks judge, in tiers: of ``nics`` (the node type's NICs, as
    :class:`~slurmkit.profile.model.Nic` or ``{"device", "link_layer", "rate_gbps", "role",
    "pci"}`` dicts), those with link layer InfiniBand, RoCE or Ethernet (EFA is not judged), each
    with its ``tier``: ``fail`` for role ``compute`` (a port down drains), ``warn`` for every other
    role (storage, management: a port down warns, never drains) unless ``other_roles`` (``[health]
    ib_judge_other_nics``: they fail like compute ports). Returns ``[{"device", "link_layer",
    "rate_gbps" (Gbit/s), "role", "pci" (PCI address or None), "tier" ("fail" | "warn")}]``."""
    out = []
    for n in nics or ():
        d = n if isinstance(n, dict) else {"device": n.device, "link_layer": n.link_layer,
                                           "rate_gbps": n.rate_gbps, "role": n.role, "pci": n.pci}
        if d.get("link_layer") in ("InfiniBand", "RoCE", "Ethernet"):
            h = {k: d.get(k) for k in ("device", "link_layer", "rate_gbps", "role", "pci")}
            h["role"] = h["role"] or "compute"
            h["tier"] = "fail" if other_roles or h["role"] == "compute" else "warn"
            out.append(h)
    return out


def load_config(health: Health | None = None, *, gpu_count: int | None = None,
                checks: Mapping[str, bool] | None = None, nics=None,
                nvswitch: bool | None = None, nvlinks: int | None = None,
                node_type: str | None = None, no_node_type: str | None = None,
                pcie: Mapping | None = None) -> HealthConfig:
    """The checks' configuration: ``checks.toml`` with the profile's ``[health]`` section over it.

    ``health``: the validated section (``load_profile(...).health``; None: every default).
    ``gpu_count`` (the node type's / gres.conf's GPU count) fills ``expected_gpu_count`` when the
    section does not set it; ``nvlinks`` (active NVLinks per GPU from the node type's matrix:
    :func:`slurmkit.profile.health.expected_nvlinks`) fills ``expect["nvlink_active_links"]``
    likewise (the ``nvlink_down`` check). ``checks``: check id -> on/off switches applied last (the hooks
    config's ``[checks]``; ids checked by their reader). Raises nothing: the section and the
    switches were validated where they were read. ``nics``: the node type's NICs (profile
    ``NodeType.nics``); the InfiniBand / RoCE / Ethernet ones :func:`judged_hcas` keeps become
    ``expect["hcas"]`` (None: no HCA is judged, unless ``no_node_type``: then every port under
    ``/sys/class/infiniband`` must be ACTIVE / LinkUp, warn-level, :data:`EVERY_HCA`). ``nvswitch`` (the node type has NVSwitches:
    :func:`slurmkit.profile.health.has_nvswitch`) fills ``expect["fabric_manager"]`` when the
    section does not set it; ``nvlinks`` (active NVLinks per GPU from the node type's matrix:
    :func:`slurmkit.profile.health.expected_nvlinks`) fills ``expect["nvlink_active_links"]``
    likewise (the ``nvlink_down`` check). ``node_type``: the name of the node's node type
    (``expect["node_type"]``); ``no_node_type``: the node's name when the profile has no node type
    for it (``expect["no_node_type"]``: the ``node_type`` check warns that the checks beyond NVML
    are skipped). ``pcie``: the node type's PCIe expectations
    (:meth:`slurmkit.profile.model.NodeType.pcie_expect`: ``{"width", "gen", "gpus": {index:
    lanes}}``, indexes as ints or JSON strings) -> ``expect["pcie_width"]``, ``["pcie_gen"]`` and
    ``["pcie_width_gpus"]`` ({NVML index: lanes}) for the ``pcie_width`` / ``pcie_gen`` checks;
    None or unset entries: not judged against the profile.
    """
    base = defaults()
    health = health if health is not None else Health()
    thresholds = {**base["thresholds"], **health.thresholds}
    enabled = {cid: True for cid in base["checks"]}
    enabled.update(health.checks)
    enabled.update(checks or {})
    expect = health.expect
    if "expected_gpu_count" not in expect and gpu_count is not None:
        expect["expected_gpu_count"] = int(gpu_count)
    if "nvlink_active_links" not in expect and nvlinks is not None:
        expect["nvlink_active_links"] = int(nvlinks)
    if "fabric_manager" not in expect and nvswitch is not None:
        expect["fabric_manager"] = bool(nvswitch)
    if nics is not None:
        expect["hcas"] = judged_hcas(nics, health.ib_judge_other_nics)
    elif no_node_type is not None:  # no node type: every port the kernel lists, warn-level
        expect["hcas"] = [dict(EVERY_HCA)]
    if node_type is not None:
        expect["node_type"] = node_type
    if no_node_type is not None:
        expect["no_node_type"] = no_node_type
    if pcie:
        for key, name in (("width", "pcie_width"), ("gen", "pcie_gen")):
            if pcie.get(key) is not None:
                expect[name] = int(pcie[key])
        if pcie.get("gpus"):
            expect["pcie_width_gpus"] = {int(i): int(w) for i, w in pcie["gpus"].items()}
    xid = base["xid"]
    return HealthConfig(
        thresholds=thresholds, enabled=enabled, expect=expect, mode=health.mode,
        deadline_s=float(health.deadline_s), per_call_deadline_s=float(health.per_call_deadline_s),
        baseline_xids=health.baseline_xids,
        xid_names={int(k): v for k, v in xid.get("names", {}).items()},
        clock_event_bits=dict(base["clock_event_bits"]),
    )
