"""Where ranks run: CPUs per GPU inside a node, leaf switches across nodes.

Pure functions over :class:`~slurmkit.submit.site.SiteFacts` and text Slurm printed.
"""

from __future__ import annotations


from slurmkit.submit.site import SiteError, SiteFacts


def cpu_list(cpus) -> str:
    """OS CPU ids as a taskset/cpuset list: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    ids = sorted(set(int(c) for c in cpus))
    runs, start = [], None
    for i, c in enumerate(ids):
        if start is None:
            start = c
        if i + 1 == len(ids) or ids[i + 1] != c + 1:
            runs.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(runs)


def gpu_cpu_map(facts: SiteFacts, gpus_per_node: int) -> list[str]:
    """Per Slurm GPU index 0..gpus_per_node-1 (Slurm's gres order: ``facts.gpus``, by device
    minor when the profile records minors, else nvidia-smi order), the cpuset list of that GPU's
    NUMA-local CPUs (``node_types.<t>.gpus[].cpus``, nvidia-smi's CPU Affinity). The bind
    wrapper takes entry ``SLURM_STEP_GPUS[LOCAL_RANK]``."""
    if gpus_per_node > len(facts.gpus):
        raise SiteError(facts.source, None, f"{gpus_per_node} GPUs per node requested but node type "
                        f"{facts.node_type} lists {len(facts.gpus)} GPUs")
    out = []
    for gpu in facts.gpus[:gpus_per_node]:
        if not gpu.cpus:
            raise SiteError(facts.source, None, f"node_types.{facts.node_type}.gpus[{gpu.index}].cpus is empty")
        out.append(cpu_list(gpu.cpus))
    return out


def leaves_needed(facts: SiteFacts, nodes: int) -> int | None:
    """The fewest leaf switches that can hold ``nodes`` nodes of the partition (largest leaves
    first), or None when the profile describes no leaves or they cannot hold the job."""
    part = set(facts.partition_nodes)
    sizes = sorted((len([n for n in members if n in part]) for _, members in facts.leaves), reverse=True)
    sizes = [s for s in sizes if s]
    total = 0
    for count, size in enumerate(sizes, 1):
        total += size
        if total >= nodes:
            return count
    return None


def switches_option(facts: SiteFacts, nodes: int, wait: str | None = None) -> str | None:
    """The ``--switches`` value: ``"<leaves>@<wait>"`` (``wait`` default ``submit.switch_wait``),
    or None for one node or a profile without leaves. One leaf when the job fits under one."""
    if nodes <= 1:
        return None
    count = leaves_needed(facts, nodes)
    if count is None:
        return None
    wait = wait or facts.submit.switch_wait
    return f"{count}@{wait}"


def parse_sinfo_nodes(text: str) -> list[str]:
    """Node names from ``sinfo -h -N -o %N`` output (one per line; duplicates dropped).
    With ``-o '%N|%T'`` lines, only nodes whose every state is exactly ``idle`` (sinfo's long
    state: ``drained``, ``draining``, ``down``, ``reserved``, ``maint``, ``idle+cloud``... are
    not free to pick; a node listed in several partitions must be idle in each)."""
    seen, bad = [], set()
    for line in text.splitlines():
        name, sep, state = line.strip().partition("|")
        name = name.strip()
        if not name:
            continue
        if sep and state.strip().lower() != "idle":
            bad.add(name)
        if name not in seen:
            seen.append(name)
    return [n for n in seen if n not in bad]


def pick_nodelist(facts: SiteFacts, nodes: int, idle: list[str], exclude=()) -> tuple[str, list[str]] | None:
    """``(leaf name, node names)`` for ``nodes`` idle nodes under one leaf, or None; nodes in
    ``exclude`` (the user's ``--exclude``, expanded) are never picked.

    Of the leaves with enough idle partition nodes, the one with the fewest idle nodes wins
    (best fit keeps bigger free blocks for bigger jobs); nodes are taken in leaf order.
    """
    idle_set = (set(idle) & set(facts.partition_nodes)) - set(exclude)
    fits = []
    for name, members in facts.leaves:
        free = [n for n in members if n in idle_set]
        if len(free) >= nodes:
            fits.append((len(free), name, free[:nodes]))
    if not fits:
        return None
    _, name, chosen = min(fits, key=lambda f: f[0])
    return name, chosen
