"""Property tests: the parser reads the same topology whatever the whitespace, the separator
(tabs or aligned spaces), the column order and the row order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmkit.topology.cores import format_ranges
from slurmkit.topology.smi import parse_topo

TOKENS = ["PIX", "PXB", "PHB", "NODE", "SYS"]


@st.composite
def matrices(draw):
    ngpu = draw(st.integers(1, 6))
    nnic = draw(st.integers(0, 4))
    gpus = [f"GPU{i}" for i in range(ngpu)]
    nics = [f"NIC{i}" for i in range(nnic)]
    labels = gpus + nics
    cell = {}
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if a.startswith("GPU") and b.startswith("GPU"):
                tok = draw(st.sampled_from(TOKENS + ["NV4", "NV12", "NV18"]))
            else:
                tok = draw(st.sampled_from(TOKENS))
            cell[a, b] = cell[b, a] = tok
    cpus = {g: sorted(draw(st.sets(st.integers(0, 255), max_size=12))) for g in gpus}
    numa = {g: draw(st.one_of(st.none(), st.integers(0, 15))) for g in gpus}
    return labels, cell, cpus, numa


def render(labels, cell, cpus, numa, order, tabs, pad, trail=""):
    cols = [labels[i] for i in order]
    aff = ["CPU Affinity", "NUMA Affinity"]
    def val(lab, c):
        return "X" if lab == c else cell[lab, c]
    rows = []
    for lab in cols:
        cells = [val(lab, c) for c in cols]
        extra = []
        if lab.startswith("GPU"):
            extra = [format_ranges(cpus[lab]), "N/A" if numa[lab] is None else str(numa[lab])]
        rows.append((lab, cells, extra))
    if tabs:
        head = "\t" + "\t".join(cols + aff)
        lines = [head] + [lab + "\t" + "\t".join((" X " if c == "X" else c) for c in cells) +
                          ("\t" + "\t".join(extra) if extra else "") for lab, cells, extra in rows]
    else:
        w = 8 + pad
        cw = max([len("CPU Affinity")] + [len(format_ranges(c)) for c in cpus.values()]) + 2 + pad
        head = " " * w + "".join(c.ljust(w) for c in cols) + "CPU Affinity".ljust(cw) + "NUMA Affinity"
        lines = [head.rstrip()]
        for lab, cells, extra in rows:
            s = lab.ljust(w) + "".join(((" X" if c == "X" else c).ljust(w)) for c in cells)
            if extra:
                s += extra[0].ljust(cw) + extra[1]
            lines.append(s.rstrip())
    nics = [l for l in labels if l.startswith("NIC")]
    legend = ["", "NIC Legend:", ""] + [f"  {n}: mlx5_{n[3:]}" for n in nics] if nics else []
    return "\n".join(l + trail for l in lines + legend) + "\n"


@settings(max_examples=60, deadline=None)
@given(m=matrices(), data=st.data(), tabs=st.booleans(), pad=st.integers(0, 6),
       trail=st.sampled_from(["", " ", "   ", "\r", "\t"]))
def test_same_topology_whatever_the_layout(m, data, tabs, pad, trail):
    labels, cell, cpus, numa = m
    order = data.draw(st.permutations(range(len(labels))))
    t = parse_topo(render(labels, cell, cpus, numa, order, tabs, pad, trail))
    assert t.missing == []
    assert sorted(g.name for g in t.gpus) == sorted(l for l in labels if l.startswith("GPU"))
    for g in t.gpus:
        assert g.cpus == cpus[g.name]
        assert g.numa_node == numa[g.name]
        assert g.links == {c: cell[g.name, c] for c in labels if c != g.name}
    assert {n.name: n.device for n in t.nics} == {l: f"mlx5_{l[3:]}" for l in labels if l.startswith("NIC")}
    # nearest NICs do not depend on the column order (as sets)
    base = parse_topo(render(labels, cell, cpus, numa, range(len(labels)), True, 0))
    assert {g.name: set(g.nearest_nics) for g in t.gpus} == {g.name: set(g.nearest_nics) for g in base.gpus}
    assert {n.name: n.role for n in t.nics} == {n.name: n.role for n in base.nics}
