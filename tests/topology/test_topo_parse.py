"""`nvidia-smi topo -m` parser: every corpus file, every format variant, bad input -> file:line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from slurmkit.topology.cores import parse_ranges
from slurmkit.topology.errors import TopoError
from slurmkit.topology.smi import parse_topo, read_topo_file

pytestmark = []


def _rows(path):
    """The GPU rows of a corpus file, split by hand (tabs, else whitespace), for cross-checks."""
    out = {}
    for line in path.read_text().splitlines():
        if re.match(r"^GPU\d+\s", line):
            f = [x.strip() for x in (line.split("\t") if "\t" in line else line.split())]
            out[f[0]] = f
    return out


@pytest.mark.corpus
def test_every_corpus_file_parses(corpus):
    files = sorted((corpus / "topo").iterdir())
    assert files
    for f in files:
        t = read_topo_file(f)
        rows = _rows(f)
        assert [g.name for g in t.gpus] == sorted(rows, key=lambda n: int(n[3:]))
        for g in t.gpus:
            # CPU Affinity: the first cell after the matrix that looks like a CPU list
            ncols = len(t.gpus) + len(t.nics)
            cell = rows[g.name][1 + ncols]
            assert g.cpus == parse_ranges(cell)
            assert all(v in ("X",) or re.match(r"^(NV\d+|PIX|PXB|PHB|NODE|SYS)$", v) for v in g.links.values())
            assert g.name not in g.links


@pytest.mark.corpus
def test_dgx_a100(corpus):
    t = read_topo_file(corpus / "topo" / "dgx_a100_12nic.txt")
    assert t.missing == []
    assert len(t.gpus) == 8 and len(t.nics) == 12
    g3, g5 = t.gpu("GPU3"), t.gpu(5)
    assert g3.nearest_nics == ["mlx5_2", "mlx5_3"]
    assert g5.numa_node == 7 and len(g5.cpus) == 32 and g5.cpus[0] == 112 and g5.cpus[-1] == 255
    assert t.gpu(0).cpus == list(range(48, 64)) + list(range(176, 192))
    assert t.gpu(0).links["GPU7"] == "NV12" and t.gpu(0).links["mlx5_0"] == "PXB"
    assert {n.device for n in t.nics if n.role == "other"} == {"mlx5_4", "mlx5_5", "mlx5_10", "mlx5_11"}
    assert t.nic("mlx5_0").device == "mlx5_0"  # column label is already a device
    assert t.gpu(0).gpu_numa_id is None


@pytest.mark.corpus
def test_rtx6000ada_legend_and_space_aligned(corpus):
    t = read_topo_file(corpus / "topo" / "4xRTX6000Ada_4nic.txt")
    assert t.missing == []
    assert [n.device for n in t.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert t.gpu(3).nearest_nics == ["mlx5_2", "mlx5_3"]  # NODE, the best distance GPU3 has
    assert t.gpu(3).numa_node == 1 and t.gpu(3).cpus == list(range(32, 64))
    assert all(n.role == "compute" for n in t.nics)


@pytest.mark.corpus
def test_h20_without_nic_legend(corpus):
    t = read_topo_file(corpus / "topo" / "8xH20_hgx_2nic.txt")
    assert t.missing == ["NIC Legend"]
    assert [n.device for n in t.nics] == [None, None]
    assert t.gpu(5).numa_node == 1 and len(t.gpu(5).cpus) == 192
    assert t.gpu(6).nearest_nics == ["NIC0", "NIC1"]  # PHB, by label (no device known)
    assert t.gpu(3).nearest_nics == ["NIC0", "NIC1"]  # SYS to both: still the nearest
    assert t.gpu(0).links["GPU1"] == "NV18"


@pytest.mark.corpus
def test_rtx4090_tabs_extra_empty_field(corpus):
    t = read_topo_file(corpus / "topo" / "8xRTX4090_pcie_1nic.txt")
    assert t.missing == []
    assert t.nics[0].device == "mlx5_bond_0" and t.nics[0].role == "compute"
    assert t.gpu(3).nearest_nics == ["mlx5_bond_0"]
    assert t.gpu(5).nearest_nics == ["mlx5_bond_0"]  # SYS, the only NIC there is
    assert t.gpu(5).numa_node == 1 and t.gpu(5).cpus == list(range(36, 72)) + list(range(108, 144))
    assert t.gpu(5).gpu_numa_id is None
    assert t.gpu(0).links["GPU4"] == "SYS"


@pytest.mark.corpus
def test_workstations(corpus):
    nv = read_topo_file(corpus / "topo" / "2gpu_nvlink_workstation.txt")
    assert nv.gpu(0).links == {"GPU1": "NV2"} and nv.gpu(1).numa_node is None and nv.nics == []
    assert nv.gpu(1).cpus == list(range(24))
    phb = read_topo_file(corpus / "topo" / "2gpu_phb_workstation.txt")
    assert phb.gpu(1).links == {"GPU0": "PHB"} and len(phb.gpu(1).cpus) == 12
    rtx = read_topo_file(corpus / "topo" / "2xRTX5090_workstation.txt")
    assert rtx.gpu(1).numa_node == 0 and rtx.gpu(1).gpu_numa_id is None and len(rtx.gpu(1).cpus) == 64


# --- format variants written here (the corpus lacks them) ------------------------------------

MLX4_ONLY_CPU = """\
\tGPU0\tGPU1\tmlx4_0\tCPU Affinity
GPU0\t X \tPHB\tPHB\t0-5,12-17
GPU1\tPHB\t X \tPHB\t0-5,12-17
mlx4_0\tPHB\tPHB\t X \t
"""


def test_mlx4_columns_only_cpu_affinity():
    t = parse_topo(MLX4_ONLY_CPU)
    assert t.nics[0].device == "mlx4_0" and t.gpu(1).cpus == [0, 1, 2, 3, 4, 5, 12, 13, 14, 15, 16, 17]
    assert t.gpu(0).numa_node is None and t.gpu(0).nearest_nics == ["mlx4_0"]
    assert t.missing == []


GPU_NUMA_ID = """\
\x1b[4m\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV6\tSYS\t\t2\t\t12
GPU1\tNV6\t X \tPIX\t6,14,22,30\t4\t\t13
NIC0\tSYS\tPIX\t X \t\t\t\t

NIC Legend:

  NIC0: mlx5_3
"""


def test_ansi_header_empty_cpu_cell_strided_cpus_gpu_numa_id():
    t = parse_topo(GPU_NUMA_ID)
    assert t.gpu(0).cpus == [] and t.gpu(0).numa_node == 2 and t.gpu(0).gpu_numa_id == 12
    assert t.gpu(1).cpus == [6, 14, 22, 30] and t.gpu(1).numa_node == 4 and t.gpu(1).gpu_numa_id == 13
    assert t.gpu(1).nearest_nics == ["mlx5_3"] and t.gpu(0).nearest_nics == ["mlx5_3"]
    assert t.nics[0].role == "compute"


SPACE_EMPTY_CPU = """\
        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity
GPU0     X      SYS     PXB     SYS                     N/A
GPU1    SYS      X      SYS     SYS     8-15            1
NIC0    PXB     SYS      X      SYS
NIC1    SYS     SYS     SYS      X

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""


def test_space_aligned_empty_cpu_cell_and_storage_nic():
    t = parse_topo(SPACE_EMPTY_CPU)
    assert t.gpu(0).cpus == [] and t.gpu(0).numa_node is None
    assert t.gpu(1).cpus == list(range(8, 16)) and t.gpu(1).numa_node == 1
    assert t.nic("mlx5_1").role == "other"  # SYS to every GPU
    assert t.gpu(1).nearest_nics == ["mlx5_0"]  # SYS, but the storage NIC is not a candidate


IN_JOB = """\
\tGPU0\tGPU1\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tPIX\tSYS\tSYS\tSYS\t52-55\t3\t\tN/A
GPU1\tNV18\t X \tSYS\tPIX\tSYS\tSYS\t56-59\t3\t\tN/A
NIC0\tPIX\tSYS\t X \tSYS\tSYS\tSYS
NIC1\tSYS\tPIX\tSYS\t X \tSYS\tSYS
NIC2\tSYS\tSYS\tSYS\tSYS\t X \tNODE
NIC3\tSYS\tSYS\tSYS\tSYS\tNODE\t X

NIC Legend:

  NIC0: mlx5_4
  NIC1: mlx5_5
  NIC2: mlx5_6
"""


def test_inside_a_job_all_nics_listed_and_legend_entry_missing():
    t = parse_topo(IN_JOB)
    assert [g.name for g in t.gpus] == ["GPU0", "GPU1"]
    assert t.gpu(0).nearest_nics == ["mlx5_4"] and t.gpu(1).nearest_nics == ["mlx5_5"]
    assert t.missing == ["NIC Legend entry NIC3"]
    assert t.nic("NIC3").device is None and t.nic("NIC3").role == "other"
    assert t.gpu(1).cpus == [56, 57, 58, 59]


TOPO_MP = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-11\t0
GPU1\tPIX\t X \tSYS\tSYS\t0-11\t0
GPU2\tSYS\tSYS\t X \tPIX\t12-23\t1
"""


def test_topo_mp_with_a_row_missing():
    t = parse_topo(TOPO_MP)
    assert t.missing == ["row GPU3"]
    assert t.gpu(3).links == {"GPU0": "SYS", "GPU1": "SYS", "GPU2": "PIX"} and t.gpu(3).cpus == []
    assert t.gpu(2).numa_node == 1


def test_nic_rows_trailing_empty_fields():
    base = MLX4_ONLY_CPU.replace("mlx4_0\tPHB\tPHB\t X \t\n", "")
    for extra in ("", "\t\t", "\t\t\t\t"):
        t = parse_topo(base + f"mlx4_0\tPHB\tPHB\t X {extra}\n")
        assert t.nics[0].links == {"GPU0": "PHB", "GPU1": "PHB"}


@pytest.mark.parametrize("text,line,msg", [
    ("hello\nworld\n", 1, "no matrix header"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tNV2\n", 3, "1 matrix cells"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tNV2\t X \tzero\n", 3, "not a CPU list"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tnv?\t0-3\n", 2, "not a topology token"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tZZZ\t X \t0-3\n", 3, "'ZZZ' is not a topology token"),
    ("  GPU0 GPU1 CPU Affinity\nGPU0  X   PIXX 0-3\n", 2, "'PIXX' is not a topology token"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU7\tNV2\t X \t0-3\n", 3, "not a column"),
    ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV2\t0-3\tnode0\n", 2, "not a NUMA node"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\t4\t5\n", 2, "more field"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tPIX\tNV2\t0-3\n", 2, "expected X"),
])
def test_bad_input_names_line(text, line, msg):
    with pytest.raises(TopoError) as ei:
        parse_topo(text, "cap.txt")
    assert ei.value.line == line and msg in ei.value.message
    assert str(ei.value).startswith(f"cap.txt:{line}: ")


def test_unreadable_files(tmp_path):
    b = tmp_path / "bin.txt"
    b.write_bytes(b"\tGPU0\n\xff\xfe\n")
    with pytest.raises(TopoError) as ei:
        read_topo_file(b)
    assert ei.value.line == 2 and ei.value.file == str(b)
    with pytest.raises(TopoError, match="cannot read"):
        read_topo_file(tmp_path / "absent.txt")


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-c", "from slurmkit.cli import main; main()", *args], capture_output=True, text=True,
                          input=stdin, timeout=60)


def test_cli_parse_json_and_errors(tmp_path):
    f = tmp_path / "job.txt"
    f.write_text(IN_JOB)
    r = _cli("topo", "parse", str(f), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["gpus"][0] == {"name": "GPU0", "index": 0, "cpus": [52, 53, 54, 55], "numa_node": 3,
                               "gpu_numa_id": None, "nearest_nics": ["mlx5_4"],
                               "links": {"GPU1": "NV18", "NIC0": "PIX", "NIC1": "SYS", "NIC2": "SYS", "NIC3": "SYS"}}
    assert data["nics"][3]["device"] is None and data["nics"][3]["role"] == "other"
    assert data["missing"] == ["NIC Legend entry NIC3"]
    assert "missing NIC Legend entry NIC3" in r.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tNV2\n")
    r = _cli("topo", "parse", str(bad))
    assert r.returncode == 2 and f"{bad}:3:" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--json", "topo", "parse", "-", stdin=IN_JOB)
    assert r.returncode == 0 and json.loads(r.stdout)["gpus"][1]["nearest_nics"] == ["mlx5_5"]


def test_every_nvidia_smi_link_token_is_read_raw():
    # SOC: the name older drivers print for SYS; N/A: a link nvidia-smi cannot tell
    for tok in ("NV1", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "N/A"):
        t = parse_topo(f"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \t{tok}\t0-3\nGPU1\t{tok}\t X \t4-7\n")
        assert t.gpu(0).links == {"GPU1": tok} and t.gpu(1).links == {"GPU0": tok}


def test_cli_unknown_token_is_an_error_and_a_truncated_matrix_a_warning(tmp_path):
    garbled = tmp_path / "garbled.txt"
    garbled.write_text(TOPO_MP.replace("GPU2\tSYS\tSYS\t X \tPIX", "GPU2\tSYS\tZZZ\t X \tPIX"))
    r = _cli("topo", "parse", str(garbled))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert f"{garbled}:4:" in r.stderr and "'ZZZ'" in r.stderr
    truncated = tmp_path / "truncated.txt"
    truncated.write_text(TOPO_MP)          # row GPU3 absent
    r = _cli("topo", "parse", str(truncated))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("GPU") and "GPU2   12-23" in r.stdout
    assert f"slurmkit: warning: {truncated}: missing row GPU3" in r.stderr.splitlines()
