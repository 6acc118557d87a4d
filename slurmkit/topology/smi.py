"""Parser for ``nvidia-smi topo -m`` (and ``topo -mp``) text: a pure function over the text.

Handles every layout seen in the field: tab-separated or space-aligned (tabs expanded by a
copy-paste); NIC columns named by device (``mlx5_0``) or ``NIC0..n`` with a ``NIC Legend:``
block; ``CPU Affinity`` alone or with ``NUMA Affinity`` and ``GPU NUMA ID``; the extra empty
tab field nvidia-smi prints before ``GPU NUMA ID``; NIC rows with trailing empty fields;
`` X `` self cells; empty CPU Affinity cells; ``N/A``; strided CPU lists; ANSI escapes.
Missing rows or legend entries are listed in ``Topology.missing``; text that is not a topology
matrix raises :class:`TopoError` naming the file and line.
"""

from __future__ import annotations

import re

from slurmkit.topology.cores import parse_ranges
from slurmkit.topology.errors import TopoError
from slurmkit.topology.matrix import Topology, TopoGpu, TopoNic, assign_nearest

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# header tokens: multi-word column names ("CPU Affinity", "GPU NUMA ID") or single labels
_HEADER_TOKEN = re.compile(r"\b[A-Za-z]+(?: [A-Za-z]+)+\b|\S+")
_GPU = re.compile(r"^GPU(\d+)$")
#: link tokens nvidia-smi prints (legend of ``topo -m``); SOC is the pre-2017 name of SYS
_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_DEVICE_LABEL = re.compile(r"^(mlx\d+_\w+|ib\w+|hfi\d+_\d+|rdmap\w+|efa\w*|bnxt_re\d+|irdma\w*|qedr\d+|erdma\w*|rxe\w*)$")
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def _clean(line: str) -> str:
    """The line without ANSI escapes and trailing whitespace (trailing empty tab fields carry
    nothing: cells are never empty, and an affinity cell left out reads as empty)."""
    return _ANSI.sub("", line).rstrip()


def _header_tokens(line: str) -> list[tuple[int, str]]:
    """(start column, name) of each header field (tabs expanded)."""
    if "\t" in line:
        out, pos = [], 0
        for f in line.split("\t"):
            if f.strip():
                out.append((pos, f.strip()))
            pos += len(f) + 1
        return out
    return [(m.start(), m.group(0)) for m in _HEADER_TOKEN.finditer(line)]


def _is_label(tok: str) -> bool:
    return bool(_GPU.match(tok) or re.match(r"^NIC\d+$", tok) or _DEVICE_LABEL.match(tok))


def _find_header(lines: list[str]) -> int | None:
    """Index of the first line that names a GPU and whose first two fields are column labels
    (or one label and an affinity column: a one-GPU box)."""
    for i, line in enumerate(lines):
        toks = [t for _, t in _header_tokens(line)]
        if len(toks) > 1 and _is_label(toks[0]) and (_is_label(toks[1]) or toks[1] in AFFINITY_COLUMNS) and any(_GPU.match(t) for t in toks):
            return i
    return None


def parse_topo(text: str, source: str = "") -> Topology:
    """Parse ``nvidia-smi topo -m`` output ``text`` into a :class:`Topology`.

    ``source``: file name used in errors and the result. Raises :class:`TopoError` (file, line)
    when there is no ``GPU0 ...`` header, a row has the wrong number of cells, a cell is not a
    link token nvidia-smi prints (X, NV<n>, PIX, PXB, PHB, NODE, SYS, SOC, N/A), or a CPU list
    cannot be read. Rows or legend entries absent from the text are listed in
    ``missing`` instead.
    """
    if "\x00" in text:
        raise TopoError(source, 1, "binary data, not nvidia-smi topo -m text")
    lines = [_clean(x) for x in text.splitlines()]
    h = _find_header(lines)
    if h is None:
        raise TopoError(source, 1, "no matrix header (a line starting GPU0 GPU1 ...): "
                        "is this `nvidia-smi topo -m` output?")
    header = _header_tokens(lines[h])
    names = [t for _, t in header]
    first_aff = next((k for k, t in enumerate(names) if t in AFFINITY_COLUMNS or " " in t), len(names))
    columns = names[:first_aff]
    aff = header[first_aff:]
    unknown = [t for _, t in aff if t not in AFFINITY_COLUMNS]
    if unknown:
        raise TopoError(source, h + 1, f"unknown column {unknown[0]!r} after the matrix "
                        f"(expected {', '.join(AFFINITY_COLUMNS)})")
    if len(set(columns)) != len(columns):
        raise TopoError(source, h + 1, "a column label is printed twice")
    ncol = len(columns)
    rows: dict[str, tuple[int, list[str], dict[str, str]]] = {}
    end = len(lines)
    for i in range(h + 1, len(lines)):
        raw = lines[i]
        if not raw.strip():
            end = i
            break
        if raw.strip().rstrip(":") in ("Legend", "NIC Legend"):
            end = i
            break
        label, cells, affinity = _split_row(raw, ncol, aff, source, i + 1)
        if label not in columns:
            raise TopoError(source, i + 1, f"row label {label!r} is not a column of the header "
                            f"({' '.join(columns)})")
        if label in rows:
            raise TopoError(source, i + 1, f"row {label} is printed twice")
        rows[label] = (i + 1, cells, affinity)
    legend = _nic_legend(lines[end:])

    topo = Topology(source=source)
    for col in columns:
        if col not in rows:
            topo.missing.append(f"row {col}")
    aff_names = [t for _, t in aff]
    if "CPU Affinity" not in aff_names:
        topo.missing.append("CPU Affinity column")
    nic_labels = [c for c in columns if not _GPU.match(c)]
    if any(re.match(r"^NIC\d+$", c) for c in nic_labels):
        if legend is None:
            topo.missing.append("NIC Legend")
        else:
            topo.missing += [f"NIC Legend entry {c}" for c in nic_labels
                             if re.match(r"^NIC\d+$", c) and c not in legend]
    for col in columns:
        m = _GPU.match(col)
        if not m:
            continue
        g = TopoGpu(name=col, index=int(m.group(1)))
        if col in rows:
            lineno, cells, affinity = rows[col]
            g.links = {c: v for c, v in zip(columns, cells) if c != col}
            if cells[columns.index(col)] != "X":
                raise TopoError(source, lineno, f"{col}'s own cell is {cells[columns.index(col)]!r}, expected X")
            g.cpus = _cpus(affinity.get("CPU Affinity", ""), source, lineno)
            g.numa_node = _int_or_none(affinity.get("NUMA Affinity", ""), source, lineno, "NUMA Affinity")
            g.gpu_numa_id = _int_or_none(affinity.get("GPU NUMA ID", ""), source, lineno, "GPU NUMA ID")
        else:
            # the row is missing: take what the other rows say about this column
            g.links = {r: rows[r][1][columns.index(col)] for r in rows if r != col}
        topo.gpus.append(g)
    for col in nic_labels:
        device = (legend or {}).get(col) or (col if _DEVICE_LABEL.match(col) else None)
        nic = TopoNic(name=col, device=device)
        if col in rows:
            nic.links = {c: v for c, v in zip(columns, rows[col][1]) if c != col}
        topo.nics.append(nic)
    # a GPU row missing: its NIC cells are known from the NIC rows
    for g in topo.gpus:
        if g.name not in rows:
            for nic in topo.nics:
                if g.name in nic.links:
                    g.links[nic.name] = nic.links[g.name]
    assign_nearest(topo)
    return topo


def _split_row(raw: str, ncol: int, aff, source: str, lineno: int):
    """(label, matrix cells, {affinity column: text}) of one data row."""
    if "\t" in raw:
        fields = raw.split("\t")
        label = fields[0].strip()
        cells = [f.strip() for f in fields[1:1 + ncol]]
        rest = fields[1 + ncol:]
        # nvidia-smi prints an extra empty field before GPU NUMA ID; NIC rows may end in empties
        while len(rest) > len(aff) and "" in [r.strip() for r in rest]:
            idx = max(k for k, r in enumerate(rest) if not r.strip())
            rest.pop(idx)
        if len(rest) > len(aff):
            raise TopoError(source, lineno, f"{len(rest) - len(aff)} more field(s) than the header has")
        affinity = {name: rest[k].strip() for k, (_, name) in enumerate(aff) if k < len(rest)}
    else:
        toks = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", raw)]
        if not toks:
            raise TopoError(source, lineno, "empty row")
        label = toks[0][1]
        cells = [t for _, t in toks[1:1 + ncol]]
        rest = toks[1 + ncol:]
        names = [name for _, name in aff]
        # Space-aligned text is tab-expanded nvidia-smi output: the fields follow the header in
        # order, but an empty cell leaves no token. The CPU Affinity value starts where its
        # header starts; when the first value starts elsewhere that cell was empty.
        if rest and names and names[0] == "CPU Affinity" and abs(rest[0][0] - aff[0][0]) > 2 \
                and len(rest) < len(names):
            names = names[1:]
        if len(rest) > len(names):
            raise TopoError(source, lineno, f"{len(rest) - len(names)} more field(s) than the header has"
                            if names else f"unexpected field {rest[0][1]!r} after the matrix")
        affinity = {name: tok for name, (_, tok) in zip(names, rest)}
    if len(cells) < ncol:
        raise TopoError(source, lineno, f"row {label} has {len(cells)} matrix cells, the header has {ncol} columns")
    for c in cells:
        if not _CELL.match(c):
            raise TopoError(source, lineno, f"row {label}: {c!r} is not a topology token "
                            "(X, NV#, PIX, PXB, PHB, NODE, SYS, SOC, N/A)")
    return label, cells, affinity


def _cpus(text: str, source: str, lineno: int) -> list[int]:
    text = text.strip()
    if text in ("", "N/A"):
        return []
    try:
        return parse_ranges(text)
    except ValueError:
        raise TopoError(source, lineno, f"CPU Affinity {text!r} is not a CPU list such as 0-15,64-79") from None


def _int_or_none(text: str, source: str, lineno: int, column: str) -> int | None:
    text = text.strip()
    if text in ("", "N/A"):
        return None
    if text.isdigit():
        return int(text)
    try:
        vals = parse_ranges(text)
    except ValueError:
        vals = []
    if len(vals) > 1:
        return None  # several NUMA nodes: no single one
    raise TopoError(source, lineno, f"{column} {text!r} is not a NUMA node number")


def _nic_legend(lines: list[str]) -> dict[str, str] | None:
    """``NIC0 -> mlx5_0`` from a ``NIC Legend:`` block; None when there is none."""
    start = next((i for i, x in enumerate(lines) if x.strip() == "NIC Legend:"), None)
    if start is None:
        return None
    out = {}
    for x in lines[start + 1:]:
        m = _LEGEND_ENTRY.match(x)
        if m:
            out[m.group(1)] = m.group(2)
        elif x.strip() and out:
            break
    return out


def read_topo_file(path) -> Topology:
    """:func:`parse_topo` of the file at ``path``; TopoError (file, line 1) when it cannot be
    read as text."""
    from pathlib import Path

    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TopoError(str(p), None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TopoError(str(p), line, f"not UTF-8 text ({exc.reason})") from None
    return parse_topo(text, str(p))
