"""NVLink error counters: ``nvmlDeviceGetNvLinkErrorCounter`` per active link (DL replay,
DL recovery, DL CRC flit, DL CRC data), kept in the GPU value ``nvlink_errors``
(``{link: {"replay", "recovery", "crc_flit", "crc_data"}}``; read by
:class:`~slurmkit.health.nvml_source.LiveNvmlSource`, recorded and replayed in snapshots).

``nvlink_errors`` check: a counter that rose since the previous run (``state.baseline["gpu"]``,
by GPU UUID) warns; a rise of ``nvlink_error_rise_fail`` or more (``recovery``:
``nvlink_recovery_rise_fail``, a link that retrains) fails. No previous run: nothing is judged.
Links down against the expected count are the ``nvlink_down`` check. Standard library only.
"""

from __future__ import annotations

from slurmkit.health.result import FAIL, PASS, WARN, result, usable_gpus

#: counter name -> pynvml constant name (``nvmlNvLinkErrorCounter_t``).
NVLINK_COUNTERS = {"replay": "NVML_NVLINK_ERROR_DL_REPLAY", "recovery": "NVML_NVLINK_ERROR_DL_RECOVERY",
                   "crc_flit": "NVML_NVLINK_ERROR_DL_CRC_FLIT", "crc_data": "NVML_NVLINK_ERROR_DL_CRC_DATA"}


def gpu_counters(g) -> dict[str, int]:
    """The rising-only counters of one GPU, flat: ``{"nvlink:<link>:<name>": n,
    "pcie_replay": n, "aer_correctable": n, "aer_nonfatal": n, "aer_fatal": n}``."""
    out = {}
    for link, cs in (g.get("nvlink_errors") or {}).items():
        for name, n in cs.items():
            if isinstance(n, int):
                out[f"nvlink:{link}:{name}"] = n
    for key, short in (("pcie_replay_counter", "pcie_replay"), ("pcie_aer_correctable", "aer_correctable"),
                       ("pcie_aer_nonfatal", "aer_nonfatal"), ("pcie_aer_fatal", "aer_fatal")):
        v = g.get(key)
        if isinstance(v, int):
            out[short] = v
    return out


def rises(state, g) -> dict[str, int] | None:
    """``{counter: rise}`` of GPU ``g`` since the previous run (a counter below its previous value
    was reset and counts from 0); None when there is no previous run for this GPU."""
    prev = ((getattr(state, "baseline", None) or {}).get("gpu") or {}).get(g.uuid or f"index{g.index}")
    if prev is None:
        return None
    out = {}
    for k, now in gpu_counters(g).items():
        before = prev.get(k)
        if before is None:
            continue
        r = now - before if now >= before else now
        if r > 0:
            out[k] = r
    return out


def check_nvlink_errors(state, cfg, **_) -> list:
    """NVLink error counters rising between runs (see the module docstring)."""
    out = []
    for g in usable_gpus(state):
        if g.get("nvlink_errors") is None:
            continue
        r = rises(state, g)
        if r is None:
            continue
        failed, warned = [], []
        for k, n in sorted(r.items()):
            if not k.startswith("nvlink:"):
                continue
            _, link, name = k.split(":")
            limit = cfg.t("nvlink_recovery_rise_fail" if name == "recovery" else "nvlink_error_rise_fail")
            (failed if n >= limit else warned).append(f"link {link} {name} +{n}")
        words = failed + warned  # the deciding rise first: the drain reason leads with it
        worst = FAIL if failed else (WARN if warned else PASS)
        out.append(result("nvlink_errors", worst, g, ", ".join(words) or "no new errors",
                      {"nvlink_error_rise_fail": cfg.t("nvlink_error_rise_fail"),
                       "nvlink_recovery_rise_fail": cfg.t("nvlink_recovery_rise_fail")},
                      "NVLink errors rising since the last check" if words else ""))
    return out
