"""GPU order on real hosts: device minor numbers recorded per GPU, gres.conf ``File=`` from
them with that GPU's ``Cores=`` and ``Links=``, and the bind wrapper's per-GPU CPU list in
Slurm's gres order (minor != nvidia-smi index is common, e.g. on AMD EPYC hosts)."""

import copy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from slurmkit.profile import ProfileError, load_profile_data
from slurmkit.submit import placement, site
from slurmkit.profile.slurmconf import render_gres_conf

DGX = Path(__file__).resolve().parents[2] / "site" / "dgx-a100.toml"


def _fields(line):
    return dict(kv.split("=", 1) for kv in line.split())


@pytest.fixture(scope="module")
def raw():
    with open(DGX, "rb") as fh:
        return tomllib.load(fh)


def with_minors(raw, minors):
    prof = copy.deepcopy(raw)
    nt = prof["node_types"][next(iter(prof["node_types"]))]
    for g, m in zip(nt["gpus"], minors):
        g["minor"] = m
    return prof, nt


# nvidia-smi (PCI) order 0..7; device minors as an EPYC host may number them
MINORS = [4, 5, 6, 7, 0, 1, 2, 3]


def test_gres_conf_files_are_the_minor_numbers_with_that_gpus_cores_and_links(raw):
    prof, nt = with_minors(raw, MINORS)
    p = load_profile_data(prof, str(DGX))
    lines = [_fields(x) for x in render_gres_conf(p).splitlines() if x.startswith("NodeName=")]
    plain = [_fields(x) for x in render_gres_conf(load_profile_data(raw, str(DGX))).splitlines()
             if x.startswith("NodeName=")]
    # gres order = minor order: line k is the GPU whose minor is k
    by_minor = sorted(range(8), key=lambda i: MINORS[i])
    assert [f["File"] for f in lines] == [f"/dev/nvidia{k}" for k in range(8)]
    for k, i in enumerate(by_minor):
        # the same Cores= as that GPU (nvidia-smi index i) had in the profile without minors
        assert lines[k]["Cores"] == plain[i]["Cores"]
        links = [int(x) for x in lines[k]["Links"].split(",")]
        assert links[k] == -1
        assert links == [-1 if j == i else p.node_types[nt_name(p)].gpu(i).nvlinks_to(j) for j in by_minor]


def nt_name(p):
    return next(iter(p.node_types))


def test_bind_cpu_list_is_in_gres_order(raw):
    prof, nt = with_minors(raw, MINORS)
    facts = site.site_facts(load_profile_data(prof, str(DGX)))
    cpus = placement.gpu_cpu_map(facts, facts.gpu_count)
    by_minor = sorted(range(8), key=lambda i: MINORS[i])
    assert cpus == [placement.cpu_list(nt["gpus"][i]["cpus"]) for i in by_minor]
    # Slurm's GPU 0 is nvidia-smi's GPU4 (minor 0): its NUMA-local CPUs, not GPU0's
    assert cpus[0] != placement.cpu_list(nt["gpus"][0]["cpus"])
    assert [g.minor for g in facts.gpus] == list(range(8))
    # without minors: nvidia-smi order, as before
    plain = site.site_facts(load_profile_data(raw, str(DGX)))
    assert placement.gpu_cpu_map(plain, 8) == [placement.cpu_list(g["cpus"]) for g in nt["gpus"]]


@pytest.mark.parametrize("minors, needle", [([0, 0, 1, 2, 3, 4, 5, 6], "same minor number"),
                                            ([0, 1], "for some GPUs only")])
def test_minors_must_be_unique_and_complete(raw, minors, needle):
    prof, _ = with_minors(raw, minors)
    with pytest.raises(ProfileError, match=needle):
        load_profile_data(prof, str(DGX))


def test_topo_import_takes_minor_numbers_from_nvidia_smi_q(corpus, tmp_path):
    capture = corpus / "nvidia-smi-q" / "8xH100_hw_slowdown_power_brake.txt"
    matrix = corpus / "topo" / "8xH20_hgx_2nic.txt"
    out = tmp_path / "nt.toml"
    r = subprocess.run([sys.executable, "-m", "slurmkit", "topo", "import", str(matrix), "--name", "hgx",
                        "--smi-q", str(capture), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    gpus = tomllib.loads(out.read_text())["node_types"]["hgx"]["gpus"]
    want = [int(line.split(":")[1]) for line in capture.read_text().splitlines() if "Minor Number" in line]
    assert [g["minor"] for g in gpus] == want
    # a capture of another node (other GPU count) is refused with the reason
    bad = subprocess.run([sys.executable, "-m", "slurmkit", "topo", "import", str(matrix), "--name", "hgx",
                          "--smi-q", str(corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "1 GPUs, but the matrix has 8" in bad.stderr
