"""Helpers for hook tests that need a drain to be seen without a Slurm cluster, and a real fault.

``install_recorder(dir, log)``: an executable ``scontrol`` in ``dir`` that appends
``SLURM_CONF=<its SLURM_CONF> <its arguments>`` to ``log`` and answers ``show node`` for an idle
node with no reason (``NodeName=<n> Arch=x86_64 State=IDLE Partitions=gpu``: the fields
:func:`slurmkit.hooks.drain.parse_show_node` reads, as ``scontrol show node -o`` prints them).

``dbe_snapshot(corpus, snapshot, nvml_index)``: a copy of a snapshot whose GPU carries the
double-bit (uncorrectable) ECC error of a real ``nvidia-smi -q`` capture
(../shared/corpus/gpu-logs/q_excerpt_ECC_SRAM-uncorrectable_L139-149.txt: volatile SRAM
Uncorrectable 1, aggregate 5), and the volatile count.
"""

import re

from nodeenv import set_value

ECC_CAPTURE = "gpu-logs/q_excerpt_ECC_SRAM-uncorrectable_L139-149.txt"

SCONTROL = """#!/bin/sh
echo "SLURM_CONF=$SLURM_CONF $*" >> {log}
case "$1" in
  show) echo "NodeName=$4 Arch=x86_64 State=IDLE Partitions=gpu" ;;
esac
exit 0
"""


def install_recorder(bin_dir, log):
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "scontrol").write_text(SCONTROL.format(log=log))
    (bin_dir / "scontrol").chmod(0o755)
    return bin_dir / "scontrol"


def dbe_snapshot(corpus, snap: dict, nvml_index: int) -> tuple[dict, int]:
    text = (corpus / ECC_CAPTURE).read_text()
    volatile, aggregate = (int(v) for v in re.findall(r"SRAM Uncorrectable\s+:\s+(\d+)", text))
    bad = set_value(snap, nvml_index, "ecc_volatile_uncorrectable", volatile)
    return set_value(bad, nvml_index, "ecc_aggregate_uncorrectable", aggregate), volatile
