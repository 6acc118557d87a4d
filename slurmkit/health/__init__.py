"""GPU health: the node's GPU state model, its sources and the checks run by the hooks.

Modules (import what you need; nothing heavy is imported here, the prolog loads this package
on every job):

* :mod:`slurmkit.health.state`   NodeState / GpuState / Reading / Xid records, snapshot JSON
* :mod:`slurmkit.health.source`  GpuSource interface, SnapshotSource (JSON / nvidia-smi XML /
  text replay), Action, SourceError, NvmlTimeout
* :mod:`slurmkit.health.nvml_source`  LiveNvmlSource (the only pynvml user) + sysfs
* :mod:`slurmkit.health.nvsmi`   ``nvidia-smi -q -x`` / ``-q`` importers
* :mod:`slurmkit.health.kmsg`    NVRM Xid reader (/dev/kmsg with a saved cursor, or a log file)
* :mod:`slurmkit.health.runner`  read_state(): NVML in a worker process under deadlines
* :mod:`slurmkit.health.config`  thresholds / switches / expected values (checks.toml + profile)
* :mod:`slurmkit.health.result`  CheckResult / CheckStatus (PASS, WARN, FAIL, ERROR), drain reasons
* :mod:`slurmkit.health.checks`  one function per check, the table of every check (CHECKS),
  run_checks(), evaluate()
* :mod:`slurmkit.health.fabric`  InfiniBand / RoCE ports from sysfs (ib_port, ib_rate, ib_counters)
* :mod:`slurmkit.health.nvlink`  NVLink error counters (nvlink_errors)
* :mod:`slurmkit.health.pcie`    PCIe AER (sysfs) and replay (NVML) counters (pcie_errors)
* :mod:`slurmkit.health.services`  fabric manager and GPUDirect RDMA module checks
* :mod:`slurmkit.health.baseline`  counters kept between runs (for the "rose since" checks)
* :mod:`slurmkit.health.active`  the active check: ``dcgmi diag`` (run or replayed)
* :mod:`slurmkit.health.dcgm`    DCGM's outputs (``dcgmi diag`` JSON and tables, ``dcgmi health``,
  ``dcgmi nvlink``): one reader each
"""
