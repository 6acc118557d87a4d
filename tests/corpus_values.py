"""The Slurm-format values of the shared corpus's real captures, read with slurmkit's own readers
(sacct captures: :func:`slurmkit.accounting.read.read_sacct_file`; ``scontrol show -o nodes`` and
``sinfo``: split on blanks / ``|``), grouped by format: TRES strings, durations, memory sizes,
GRES specifications. Sources: ../shared/corpus/README.md (sacct/, sacct2/, slurm/)."""

from __future__ import annotations

import re

from slurmkit.accounting.read import read_field_list, read_sacct_file

#: sacct captures: (file, the file of its field list when it has no header, fields left out of that list)
SACCT = [("sacct/habrok_gpu_cluster_parsable2.psv", None, ()),
         ("sacct/habrok_gpu_cluster_snowman_delim.txt", "sacct/habrok_format_fields.txt", ()),
         ("sacct/cscs_energy_parsable2.psv", None, ()),
         ("sacct/pcluster_issue59_node_fail.psv", "sacct/pcluster_header_fields.txt", ()),
         ("sacct/pcluster_issue61_cancelled_invalid.psv", "sacct/pcluster_header_fields.txt", ()),
         ("sacct/pcluster_issue63_interactive_step.psv", "sacct/pcluster_header_fields.txt", ("Partition",)),
         ("sacct/pcluster_array_job.psv", "sacct/pcluster_header_fields.txt", ("Partition",)),
         ("sacct/pcluster_multi_node.psv", "sacct/pcluster_header_fields.txt", ("Partition",)),
         ("sacct2/trex_sacct_-X_-P_--format_ALL.psv", None, ()),
         ("sacct2/mavis_sacct-long-parsable_trailing-delim_L230-332.psv", None, ()),
         ("sacct2/torchx_sacct-parsable2_CANCELLED-by_L1083-1086.psv", None, ())]

#: sacct fields by format (``*Raw`` counts are plain numbers, not listed).
DURATION_FIELDS = ("Elapsed", "CPUTime", "TotalCPU", "UserCPU", "SystemCPU", "Suspended", "AveCPU", "MinCPU",
                   "Reserved", "Planned", "PlannedCPU")
TIMELIMIT_FIELDS = ("Timelimit", "TimelimitRaw")
MEMORY_FIELDS = {"ReqMem": "M", "MaxRSS": "B", "AveRSS": "B", "MaxVMSize": "B", "AveVMSize": "B"}
GRES_FIELDS = ("AllocGRES", "ReqGRES")


def sacct_columns(corpus) -> dict[str, set[str]]:
    """{sacct field: the distinct non-empty values every capture holds in it}."""
    out: dict[str, set[str]] = {}
    for name, fields_file, drop in SACCT:
        fields = None
        if fields_file:
            fields = [f for f in read_field_list((corpus / fields_file).read_text()) if f not in drop]
        table, _ = read_sacct_file(corpus / name, fields=fields)
        for col in table.column_names:
            out.setdefault(col, set()).update(v for v in table[col].to_pylist() if v)
    return out


def scontrol_nodes(corpus) -> list[str]:
    """The records of slurm/habrok_scontrol_show_nodes.txt (one node a line)."""
    return [ln for ln in (corpus / "slurm" / "habrok_scontrol_show_nodes.txt").read_text().splitlines() if ln.strip()]


def sinfo_rows(corpus) -> list[dict[str, str]]:
    """slurm/sinfo_gres.txt as {column: value} (the header names, blanks stripped; a repeated
    name keeps its first column)."""
    lines = (corpus / "slurm" / "sinfo_gres.txt").read_text().splitlines()
    head = [h.strip() for h in lines[0].split("|")]
    rows = []
    for ln in lines[1:]:
        if ln.strip():
            row: dict[str, str] = {}
            for h, v in zip(head, ln.split("|")):
                row.setdefault(h, v.strip())
            rows.append(row)
    return rows


def tres_strings(corpus) -> set[str]:
    """Every TRES string: sacct's ``*TRES*`` fields, scontrol's CfgTRES= / AllocTRES=."""
    cols = sacct_columns(corpus)
    out = {v for k, vals in cols.items() if "TRES" in k for v in vals}
    for rec in scontrol_nodes(corpus):
        out.update(re.findall(r"\b(?:CfgTRES|AllocTRES)=(\S+)", rec))
    return out


def durations(corpus) -> dict[str, set[str]]:
    """{"s": sacct durations (a bare number in seconds), "min": time limits (a bare number in
    minutes: sacct Timelimit / TimelimitRaw, sinfo TIMELIMIT / DEFAULTTIME)}."""
    cols = sacct_columns(corpus)
    out = {"s": {v for k in DURATION_FIELDS for v in cols.get(k, ())},
           "min": {v for k in TIMELIMIT_FIELDS for v in cols.get(k, ())}}
    out["min"].update(r[k] for r in sinfo_rows(corpus) for k in ("TIMELIMIT", "DEFAULTTIME") if r.get(k))
    return out


def memory_sizes(corpus) -> dict[str, set[str]]:
    """{unit of a bare number: sacct memory values}: ReqMem (MiB) and the usage fields (bytes,
    as ``--noconvert`` prints them)."""
    cols = sacct_columns(corpus)
    out: dict[str, set[str]] = {"M": set(), "B": set()}
    for k, bare in MEMORY_FIELDS.items():
        out[bare].update(cols.get(k, ()))
    return out


def gres_specs(corpus) -> set[str]:
    """Every GRES specification: scontrol's Gres=, sinfo's GRES, sacct's AllocGRES / ReqGRES."""
    cols = sacct_columns(corpus)
    out = {v for k in GRES_FIELDS for v in cols.get(k, ())}
    for rec in scontrol_nodes(corpus):
        out.update(re.findall(r"\bGres=(\S+)", rec))
    out.update(r["GRES"] for r in sinfo_rows(corpus) if r.get("GRES"))
    return out
