"""Render the sandbox's configuration files (pure: plain data in, text out).

The sandbox is ``nodes`` slurmd daemons on this host, each with its own loopback address
(127.0.1.<i>) and port, and ``gpus_per_node`` fake GPUs (character devices). Its site profile
(``site.toml``) is rendered here; gres.conf and topology.conf are then generated *from that
profile* by :mod:`slurmkit.profile.slurmconf`, as on a real cluster.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from slurmkit.hostlist import collect_hostlist
from slurmkit.sandbox import releases
from slurmkit.sandbox.errors import SpecError

PARTITION = "gpu"


@dataclass(frozen=True)
class Ports:
    """TCP ports on 127.0.0.1 (and 127.0.1.<i> for the slurmd of node i).

    From one base (default 6817, Slurm's own): slurmctld = base, slurmdbd = base + 2,
    MariaDB = base + 4, slurmd of node i (1-based) = base + 10 + i.
    """

    base: int = 6817

    @property
    def slurmctld(self) -> int:
        return self.base

    @property
    def slurmdbd(self) -> int:
        return self.base + 2

    @property
    def mariadb(self) -> int:
        return self.base + 4

    def slurmd(self, i: int) -> int:
        return self.base + 10 + i

    def all(self, nodes: int) -> dict[str, int]:
        """Every port the sandbox listens on: ``{daemon name: port}``."""
        ports = {"slurmctld": self.slurmctld, "slurmdbd": self.slurmdbd, "mariadb": self.mariadb}
        ports.update({f"slurmd-n{i}": self.slurmd(i) for i in range(1, nodes + 1)})
        return ports


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox is: node and GPU counts, GPU type, ports and the host CPUs it may use.

    ``host_cpus``: OS CPU ids that exist here (``os.sched_getaffinity(0)``); GPUs are spread
    over them in order (on a 2-CPU host with 4 GPUs: GPU0-1 -> CPU 0, GPU2-3 -> CPU 1), so a
    job that binds a rank to its GPU's cores binds to a CPU that really exists.

    ``sched_interval_s``: when set, slurm.conf's ``SchedulerParameters`` gains
    ``sched_interval=<s>,bf_interval=<s>`` (Slurm's defaults: 60 s and 30 s), so a pending job
    starts within seconds of the nodes it waits for coming free. The test suite sets it (1 s);
    ``sandbox up`` and the demo keep Slurm's defaults (docs/testing.md says why).

    ``first_job_id``: when set, slurm.conf's ``FirstJobId`` (Slurm's default: 1). The test suite
    gives each of its sandboxes its own range, so that jobs of two sandboxes running at once on
    this host never get the same id, nor the same rendezvous port derived from it (the templates'
    ``MASTER_PORT``: torch's store listens on every address of the host).

    ``slurm``: the Slurm major release (:mod:`slurmkit.sandbox.releases`): ``"22.05"`` runs
    this machine's packages, a newer one runs from a Debian root filesystem
    (:mod:`slurmkit.sandbox.rootfs`).
    """

    nodes: int = 4
    gpus_per_node: int = 4
    gpu_type: str = "h100"
    port_base: int = 6817
    cluster: str = "sandbox"
    host_cpus: tuple[int, ...] = (0, 1)
    memory_mib: int = 16000
    db_password: str = field(default_factory=lambda: secrets.token_hex(8))
    sched_interval_s: int | None = None
    slurm: str = releases.DEFAULT
    first_job_id: int | None = None

    @property
    def ports(self) -> Ports:
        return Ports(self.port_base)

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def node_addr(self, i: int) -> str:
        """Loopback address of node i (1-based): 127.0.1.<i>."""
        return f"127.0.1.{i}"

    @property
    def nodeset(self) -> str:
        return collect_hostlist(f"n{i}" for i in range(1, self.nodes + 1))

    def validate(self) -> None:
        """Raise :class:`~slurmkit.sandbox.errors.SpecError` (a ValueError) for counts the
        sandbox cannot lay out."""
        if not 1 <= self.nodes <= 64:
            raise SpecError(f"--nodes must be between 1 and 64, not {self.nodes}")
        if not 1 <= self.gpus_per_node <= 16:
            raise SpecError(f"--gpus-per-node must be between 1 and 16, not {self.gpus_per_node}")
        if not self.gpu_type.replace("_", "").replace("-", "").isalnum():
            raise SpecError(f"--gpu-type must be a plain name such as h100, not {self.gpu_type!r}")
        if not self.host_cpus:
            raise SpecError("no usable CPU on this host")
        releases.release(self.slurm)


def device_minors(gpus: int) -> list[int]:
    """Minor numbers of DIR/dev/nvidia0..N-1: a rotation by two (4 GPUs: 2, 3, 0, 1 reversed
    pairwise -> 2, 0, 3, 1), so that a device's name, its minor number and its position in
    gres.conf's File= list all differ, as they may on real hardware."""
    if gpus == 1:
        return [0]
    if gpus == 2:
        return [1, 0]
    order = [(k + 2) % gpus for k in range(gpus)]
    # swap neighbours after rotating so that minor order is not name order shifted by a constant
    for k in range(1, gpus - 1, 2):
        order[k], order[k + 1] = order[k + 1], order[k]
    return order


def _layout(spec: SandboxSpec) -> dict:
    """The node type's hardware model: GPU -> CPUs / NUMA node / nearest NIC, and NIC list.

    The CPU layout covers OS CPU ids 0..max(host_cpus) (two sockets, linear numbering), so that
    a host whose usable CPUs are, say, {2, 3} still gets a valid map; GPUs are spread in order
    over the CPUs this process may really use, and each GPU's NUMA node is its CPUs' socket.
    """
    cpus = sorted(spec.host_cpus)
    gpus = spec.gpus_per_node
    total = cpus[-1] + 1
    sockets = 2 if total >= 2 else 1
    per_socket = -(-total // sockets)
    gpu_rows = []
    for g in range(gpus):
        if len(cpus) >= gpus:
            share = len(cpus) // gpus
            mine = cpus[g * share:(g + 1) * share]
        else:
            mine = [cpus[g * len(cpus) // gpus]]
        gpu_rows.append({"index": g, "numa_node": mine[0] // per_socket, "cpus": mine, "nic": f"mlx5_{g}"})
    nics = [{"device": f"mlx5_{g}", "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute",
             "numa_node": gpu_rows[g]["numa_node"]} for g in range(gpus)]
    nics.append({"device": f"mlx5_{gpus}", "link_layer": "Ethernet", "rate_gbps": 100, "role": "other",
                 "numa_node": sockets - 1})
    for row in gpu_rows:
        links = []
        for other in gpu_rows:
            if other is not row:
                links.append((f"GPU{other['index']}", "NV18" if other["numa_node"] == row["numa_node"] else "SYS"))
        for n, nic in enumerate(nics):
            if nic["device"] == row["nic"]:
                tok = "PIX"
            else:
                tok = "NODE" if nic["numa_node"] == row["numa_node"] else "SYS"
            links.append((f"NIC{n}", tok))
        row["links"] = links
    slurm_cpus = max(2 * gpus, sockets * per_socket, 2)
    slurm_cpus += slurm_cpus % 2
    slurm_node = {"cpus": slurm_cpus, "sockets": 2, "cores_per_socket": slurm_cpus // 2, "threads_per_core": 1}
    return {"gpus": gpu_rows, "nics": nics, "sockets": sockets, "cores_per_socket": per_socket,
            "slurm_node": slurm_node}


def _leaves(spec: SandboxSpec) -> list[dict]:
    """Two leaf switches (first half / second half of the nodes) under one spine."""
    n = spec.nodes
    if n == 1:
        return [{"name": "leaf1", "nodes": "n1"}]
    h = n // 2

    def rng(a, b):
        return collect_hostlist(f"n{i}" for i in range(a, b + 1))

    return [{"name": "leaf1", "nodes": rng(1, h)}, {"name": "leaf2", "nodes": rng(h + 1, n)}]


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("slurmkit.sandbox", "templates"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


def context(spec: SandboxSpec, root: Path, ctl_hostname: str) -> dict:
    """Every value the templates use, for a sandbox living under ``root``."""
    var = root / "var"
    layout = _layout(spec)
    return {
        "cluster": spec.cluster, "ctl_hostname": ctl_hostname, "var": var, "run": var / "run",
        "ports": spec.ports, "gpu_type": spec.gpu_type, "gpus_per_node": spec.gpus_per_node,
        "memory_mib": spec.memory_mib, "sched_interval_s": spec.sched_interval_s, "first_job_id": spec.first_job_id, "partition": PARTITION, "db_password": spec.db_password,
        "nodes": [{"name": f"n{i}", "addr": spec.node_addr(i), "port": spec.ports.slurmd(i)}
                  for i in range(1, spec.nodes + 1)],
        "nodeset": spec.nodeset, "node_type": f"sandbox-{spec.gpu_type}x{spec.gpus_per_node}",
        "device_dir": root / "dev", "leaves": _leaves(spec), **layout,
    }


def render(name: str, ctx: dict) -> str:
    """Render one template (``slurm.conf``, ``slurmdbd.conf``, ``cgroup.conf``, ``site.toml``)."""
    return _env().get_template(f"{name}.j2").render(**ctx)
