"""Every node kind through a real slurmctld and slurmd: the slurm.conf and gres.conf that
`slurmkit site slurm-conf` / `site gres-conf` write for tests/topology/kinds/kinds.toml (a
mixed-GPU node, untyped GPUs, MIG, shards, MPS, a CPU-only node, an AutoDetect node) run a
second small cluster beside the sandbox (its munge; its own slurmctld and one slurmd per node,
device files faked as the sandbox fakes them). Each node registers with the gres the profile
says and no INVALID_REG, `slurmd -G` reports the same types and counts, and `sbatch --test-only`
accepts what `submit` sends for each partition.

What the sandbox cannot show: Debian's Slurm 22.05 has no gpu_nvml.so, so the AutoDetect=nvml
node's GPUs come from its `Type=` override lines (slurmd logs that it could not load NVML and
falls back to gpu/generic: the test asserts both lines), never from NVML; and the cluster runs with
`SlurmdParameters=config_overrides` (the host has 2 CPUs, not 80), so CPU layouts are not
judged by slurmd here (gres counts are: "count reported lower than configured" is not gated by
config_overrides in gres.c, and the `badvis` control node below shows it).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from slurmkit.profile import load_profile
from slurmkit.profile.confcheck import CASE_ONLY, NEWER, crosscheck, reported_gpus
from slurmkit.sandbox.cluster import NVIDIA_MAJOR, port_free
from slurmkit.slurm.commands import run, slurm_env
from slurmkit.slurm.conf import load_tree
from slurmkit.submit import render, site, templates
from slurmkit.waiting import wait_until
from slurmkit.profile.slurmconf import render_gres_conf, render_slurm_conf

pytestmark = [pytest.mark.slurm, pytest.mark.versions]

KINDS = Path(__file__).resolve().parent / "kinds" / "kinds.toml"
#: The control: ocotillo's visualizacion1 (slurm.conf line 107) with the gres.conf a one-model
#: profile could write (its gtx970 line only): Slurm must refuse it as the issue reports.
BAD_NODE = "badvis"
#: A hand-written node whose gres.conf interleaves types (b, a, b on nvidia0, 1, 2), as a site's
#: own file may: where does Slurm put the ``a`` GPU in its GPU order?
MIX_NODE = "mix3"
#: A site whose slurm.conf types its GPU in lower case and gres.conf in upper case (the shard guide of
#: tests/topology/sites/shard_a100_gres.conf writes ``Type=A100``): does Slurm match the two?
CASE_NODE = "case1"
#: A DGX-1 (dgx1's slurm.conf line) with the gres.conf Cores= of the real dgx1x4 site (corpus
#: sites/dgx1x4_gres.conf: CPUs=0-9, 10-19, ... 30-39, then again for GPU4-7): half a socket per GPU,
#: which site check says Slurm 24.11 and later refuse (confcheck.PART_SOCKET).
HALF_NODE = "half1"
HALF_CORES = ("0-9", "10-19", "20-29", "30-39") * 2
#: mig1's two MIG instances (its gres.conf lines: MultipleFiles= of the GPU and the instance's GI / CI
#: capability files), with slurm.conf advertising more instances than exist: 6 (each MultipleFiles file
#: counted) and 7 (one more). Which does Slurm register, and with what count?
MIG_OVER = {"migover": 6, "migdrain": 7}
CAPS = (21, 22, 30, 31)


def _free_ports(count: int) -> int:
    for base in range(9700, 9990, 20):
        if all(port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no free ports for the kinds cluster")


class Kinds:
    """The second cluster: ``dir``, ``conf`` (slurm.conf), ``nodes`` {name: address}."""

    def __init__(self, root: Path, munge_socket: Path):
        self.dir, self.conf = root, root / "etc" / "slurm.conf"
        self.profile = load_profile(KINDS)
        self.dev = root / "dev"
        self.nodes = {n: f"127.0.3.{i}" for i, n in enumerate(list(self.profile.nodes()) + [BAD_NODE, MIX_NODE, CASE_NODE, HALF_NODE,
                                                                       *MIG_OVER], 1)}
        self.base = _free_ports(len(self.nodes) + 1)
        for d in ("etc", "spool", "log", "run", "dev/nvidia-caps"):
            (root / d).mkdir(parents=True, exist_ok=True)
        for i in range(8):
            os.mknod(self.dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, i))
        for c in CAPS:  # the MIG instances' GI / CI capability files (kinds.toml mig_caps)
            os.mknod(self.dev / "nvidia-caps" / f"nvidia-cap{c}", 0o444 | stat.S_IFCHR, os.makedev(237, c))
        host = socket.gethostname().split(".")[0]
        generated = render_slurm_conf(self.profile)
        node_lines = []
        for line in generated.splitlines():
            m = re.match(r"NodeName=(\S+) ", line)
            if m:  # one node per node type here: the site adds its address
                n = m.group(1)
                line += f" NodeAddr={self.nodes[n]} Port={self.base + 1 + list(self.nodes).index(n)}"
            node_lines.append(line)
        node_lines.insert(-len(self.profile.partitions),
                          f"NodeName={BAD_NODE} CPUs=8 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=1 "
                          f"RealMemory=80385 Gres=gpu:gtx970:1,gpu:gtx1060:1 NodeAddr={self.nodes[BAD_NODE]} "
                          f"Port={self.base + 1 + list(self.nodes).index(BAD_NODE)}")
        node_lines.insert(-len(self.profile.partitions),
                          f"NodeName={MIX_NODE} CPUs=4 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 "
                          f"RealMemory=8000 Gres=gpu:b:2,gpu:a:1 NodeAddr={self.nodes[MIX_NODE]} "
                          f"Port={self.base + 1 + list(self.nodes).index(MIX_NODE)}")
        node_lines.insert(-len(self.profile.partitions),
                          f"NodeName={CASE_NODE} CPUs=4 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 "
                          f"RealMemory=8000 Gres=gpu:a100:1 NodeAddr={self.nodes[CASE_NODE]} "
                          f"Port={self.base + 1 + list(self.nodes).index(CASE_NODE)}")
        node_lines.append(f"PartitionName=control Nodes={BAD_NODE},{MIX_NODE} State=UP")
        dgx = next(l for l in node_lines if l.startswith("NodeName=dgx1 "))
        node_lines.insert(-len(self.profile.partitions) - 1, re.sub(
            r"NodeAddr=\S+ Port=\S+", f"NodeAddr={self.nodes[HALF_NODE]} "
            f"Port={self.base + 1 + list(self.nodes).index(HALF_NODE)}", dgx.replace("NodeName=dgx1 ", f"NodeName={HALF_NODE} ")))
        node_lines.append(f"PartitionName=case Nodes={CASE_NODE},{HALF_NODE} State=UP")
        mig = next(l for l in node_lines if l.startswith("NodeName=mig1 "))
        for name, count in MIG_OVER.items():
            node_lines.insert(-len(self.profile.partitions) - 2, re.sub(
                r"NodeAddr=\S+ Port=\S+", f"NodeAddr={self.nodes[name]} Port={self.base + 1 + list(self.nodes).index(name)}",
                mig.replace("NodeName=mig1 ", f"NodeName={name} ").replace("gpu:nvidia_a100_3g.20gb:2",
                                                                           f"gpu:nvidia_a100_3g.20gb:{count}")))
        node_lines.append(f"PartitionName=migover Nodes={','.join(MIG_OVER)} State=UP")
        self.conf.write_text("\n".join([
            "ClusterName=kinds", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={self.base}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}", f"StateSaveLocation={root}/spool/ctld",
            f"SlurmdSpoolDir={root}/spool/d-%n", f"SlurmctldPidFile={root}/run/slurmctld.pid",
            f"SlurmdPidFile={root}/run/slurmd-%n.pid", f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd-%n.log", "SlurmdDebug=debug", "MailProg=/bin/true",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory", "SlurmdParameters=config_overrides",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            "ReturnToService=2", "MessageTimeout=10", *node_lines]) + "\n")
        gres = render_gres_conf(self.profile, device_dir=str(self.dev), warn=lambda m: None)
        gres += f"NodeName={BAD_NODE} Name=gpu Type=gtx970 File={self.dev}/nvidia0\n"
        gres += "".join(f"NodeName={MIX_NODE} Name=gpu Type={t} File={self.dev}/nvidia{i}\n"
                        for i, t in enumerate("bab"))
        gres += f"NodeName={CASE_NODE} Name=gpu Type=A100 File={self.dev}/nvidia0\n"
        gres += "".join(f"NodeName={HALF_NODE} Name=gpu File={self.dev}/nvidia{i} Cores={c}\n"
                        for i, c in enumerate(HALF_CORES))
        for name in MIG_OVER:
            gres += "".join(line.replace("NodeName=mig1 ", f"NodeName={name} ") + "\n"
                            for line in gres.splitlines() if line.startswith("NodeName=mig1 "))
        (root / "etc" / "gres.conf").write_text(gres)

    def env(self) -> dict:
        return slurm_env(slurm_conf=str(self.conf))

    def hardware(self, node: str) -> dict:
        """The environment that makes ``node``'s slurmd see the hardware slurm.conf gives it
        (hwloc's ``HWLOC_SYNTHETIC``: ``package:2 core:20 pu:1``), as on the real machine, rather
        than this host's 2 CPUs: what slurmctld then checks (gres.conf ``Cores=`` against the
        node's sockets) is what it checks on the site's hardware."""
        line = next(l for l in self.conf.read_text().splitlines() if l.startswith(f"NodeName={node} "))
        f = dict(re.findall(r"(\w+)=(\S+)", line))
        if "CoresPerSocket" not in f:
            return {}
        return {"HWLOC_SYNTHETIC": f"package:{f.get('SocketsPerBoard', f.get('Sockets', '1'))} "
                                   f"core:{f['CoresPerSocket']} pu:{f.get('ThreadsPerCore', '1')}"}

    def start(self) -> None:
        subprocess.run(["slurmctld", "-i"], env=self.env(), check=True, timeout=60)
        for n in self.nodes:
            subprocess.run(["slurmd", "-N", n], env={**self.env(), **self.hardware(n)}, check=True, timeout=60)

        def registered():
            states = self.states()
            return len(states) == len(self.nodes) and not any(s.endswith("*") or "unknown" in s
                                                              for s in states.values())

        wait_until(registered, 60, 1, "the kinds cluster's nodes to register", hint=lambda: f"sinfo: {self.states()}")

    def states(self) -> dict:
        res = run(["sinfo", "-h", "-N", "-o", "%N %T"], slurm_conf=str(self.conf), check=False, timeout=10)
        return dict(line.split(None, 1) for line in res.stdout.splitlines() if line.strip())

    def stop(self) -> None:
        for pidfile in (self.dir / "run").glob("*.pid"):
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError, OSError):
                pass

    def show_node_reason(self, node: str) -> str:
        """The node's ``Reason=`` as ``scontrol show node`` prints it (to the end of the line)."""
        out = run(["scontrol", "show", "node", node], slurm_conf=str(self.conf), timeout=30).stdout
        return next((line.split("Reason=", 1)[1] for line in out.splitlines() if "Reason=" in line), "")

    def show_node(self, node: str) -> dict:
        out = run(["scontrol", "-o", "show", "node", node], slurm_conf=str(self.conf), timeout=30).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))


@pytest.fixture(scope="module")
def kinds(sandbox, tmp_path_factory):
    k = Kinds(tmp_path_factory.mktemp("kinds"), sandbox.run_dir / "munge.sock")
    try:
        k.start()
        yield k
    finally:
        k.stop()


def _gres_of_G(kinds, node: str) -> tuple[dict, str]:
    """``slurmd -G`` for ``node``: {(name, type): count} summed over its records, and its output."""
    res = subprocess.run(["slurmd", "-G", "-N", node], env={**kinds.env(), **kinds.hardware(node)}, capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    counts: dict = {}
    for m in re.finditer(r"Gres Name=(\S+) Type=(\S+) Count=(\d+)", out):
        key = (m.group(1), None if m.group(2) == "(null)" else m.group(2))
        counts[key] = counts.get(key, 0) + int(m.group(3))
    return counts, out


@pytest.mark.parametrize("node, gres", [
    ("visualizacion1", "gpu:gtx970:1,gpu:gtx1060:1"),      # mixed models
    ("dgx1", "gpu:8"),                                      # untyped
    ("mig1", "gpu:nvidia_a100_3g.20gb:2"),                  # MIG, Slurm's NVML type names
    ("shard1", "gpu:rtx3090:2,shard:rtx3090:8"),  # slurmctld types the shards by their GPU
    ("mps1", "gpu:rtx3090:2,mps:rtx3090:200"),
    ("s01n31", "(null)"),                                   # CPU-only
    ("auto1", "gpu:h100:8"),                                # AutoDetect=nvml (+ Type overrides)
])
def test_each_kind_registers_with_the_profiles_gres(kinds, node, gres):
    f = kinds.show_node(node)
    assert re.sub(r"\(S:[^)]*\)", "", f["Gres"]) == gres
    assert "INVALID" not in f["State"] and "DRAIN" not in f["State"], (f["State"], f.get("Reason"))
    assert kinds.states()[node] == "idle"


def test_slurmd_reports_the_types_and_counts_slurm_conf_configures(kinds):
    counts, out = _gres_of_G(kinds, "visualizacion1")
    assert counts[("gpu", "gtx970")] == 1 and counts[("gpu", "gtx1060")] == 1
    counts, _ = _gres_of_G(kinds, "dgx1")
    assert counts == {("gpu", None): 8}
    counts, _ = _gres_of_G(kinds, "shard1")
    assert counts[("gpu", "rtx3090")] == 2 and counts[("shard", "rtx3090")] == 8
    counts, _ = _gres_of_G(kinds, "mps1")
    assert counts[("gpu", "rtx3090")] == 2 and counts[("mps", "rtx3090")] == 200
    counts, out = _gres_of_G(kinds, "mig1")
    # 22.05's -G prints a MultipleFiles record once per file; the node registers 2 (above)
    assert set(k for k in counts if k[0] == "gpu") == {("gpu", "nvidia_a100_3g.20gb")}
    assert f"{kinds.dev}/nvidia-caps/nvidia-cap21" in out and f"{kinds.dev}/nvidia-caps/nvidia-cap31" in out


def test_autodetect_node_without_nvml_runs_on_the_type_lines(kinds, slurm_release):
    log = (kinds.dir / "log" / "slurmd-auto1.log").read_text()
    # Debian's Slurm has no gpu_nvml.so: slurmd says so (in its release's words) and falls back to
    # gpu/generic, which takes the GPUs from the Type=h100 File= lines slurmkit writes beside AutoDetect=nvml
    said = {"22.05": "We were configured with nvml functionality, but that lib wasn't found on the system.",
            "24.11": "We were configured with nvml functionality, but that lib wasn't found on the system.",
            "26.05": "We were configured to autodetect nvml functionality, but we weren't able to find that lib "
                     "when Slurm was configured."}
    assert said[slurm_release.name] in log
    assert "gpu/generic: init: init: GPU Generic plugin loaded" in log
    # Flags=nvidia_gpu_env reached slurmd: only the NVIDIA environment (default: every kind)
    assert "Type:h100 Count:1 Cores(8):(null)  Links:(null) Flags:HAS_FILE,HAS_TYPE,ENV_NVML File:" in log


def test_sharing_flag_reaches_slurmd(kinds):
    log = (kinds.dir / "log" / "slurmd-shard1.log").read_text()
    assert f"GRES[shard] Type:(null) Count:4 Cores(4):(null)  Links:(null) Flags:HAS_FILE,SHARED,ONE_SHARING " \
           f"File:{kinds.dev}/nvidia0" in log
    assert kinds.show_node("auto1")["Gres"].startswith("gpu:h100:8")


@pytest.mark.parametrize("node", list(MIG_OVER))
def test_site_check_predicts_what_slurm_does_with_over_advertised_mig_instances(kinds, slurm_release, node, tmp_path):
    """slurm.conf advertises more of mig1's MIG instances than exist: site check's prediction for the
    running release (confcheck.reported_gpus) is what slurmctld then does with the node."""
    count = MIG_OVER[node]
    nt = kinds.profile.node_types["a100-mig"]
    reported = sum(reported_gpus(nt, slurm_release.name).values())
    f = kinds.show_node(node)
    if count <= reported:
        assert "INVALID" not in f["State"] and "DRAIN" not in f["State"], (f["State"], kinds.show_node_reason(node))
        assert f["Gres"].startswith(f"gpu:nvidia_a100_3g.20gb:{count}")
        said = f"slurmd reports {reported}, so the node registers with {count}"
    else:
        assert "INVALID_REG" in f["State"], f["State"]
        said = f"'gres/gpu count reported lower than configured ({reported} < {count})'"
        assert f"gres/gpu count reported lower than configured ({reported} < {count})" in kinds.show_node_reason(node)
    # site check on mig1 with this node's Gres= says the same for this release
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(NodeName=mig1 .*)gpu:nvidia_a100_3g.20gb:2", rf"\g<1>gpu:nvidia_a100_3g.20gb:{count}",
                           kinds.conf.read_text()))
    found = [d for d in crosscheck(kinds.profile, load_tree(conf)) if d.nodes == "mig1"]
    assert len(found) == 1 and "has more gpu than the profile's" in found[0].what
    text = found[0].slurm
    part = text.split(f"; {NEWER}")[0] if slurm_release.name == "22.05" else text.split(f"; {NEWER}")[1]
    assert said in part, text


def test_control_one_model_gres_conf_on_a_mixed_node_is_invalid_reg(kinds):
    f = kinds.show_node(BAD_NODE)
    assert "INVALID_REG" in f["State"] or "DRAIN" in f["State"], f["State"]
    out = run(["scontrol", "show", "node", BAD_NODE], slurm_conf=str(kinds.conf), timeout=30).stdout
    assert "gres/gpu count reported lower than configured (1 < 2)" in out


def _test_only(kinds, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sbatch", "--test-only"], input=script, env=kinds.env(), capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("partition, gpu_type, template, gres, want", [
    ("vis", "gtx1060", "srun", None, "--gpus-per-node=gtx1060:1"),
    ("vis", "gtx970", "srun", None, "--gpus-per-node=gtx970:1"),
    ("gpus", None, "srun", None, "--gpus-per-node=8"),
    # MIG: one process per instance (the NCCL launchers are refused there)
    ("mig", None, "single-gpu", None, "--gpus-per-node=nvidia_a100_3g.20gb:1"),
    ("shard", None, "srun", None, "--gpus-per-node=rtx3090:2"),
    ("mps", None, "srun", None, "--gpus-per-node=rtx3090:2"),
    # part of a GPU: submit --gres, checked against the node type's shards / mps
    ("shard", None, "single-gpu", "shard:2", "--gres=shard:2"),
    ("shard", None, "single-gpu", "shard:4", "--gres=shard:4"),
    ("mps", None, "single-gpu", "mps:50", "--gres=mps:50"),
    ("auto", None, "srun", None, "--gpus-per-node=h100:8"),
])
def test_sbatch_test_only_accepts_what_submit_sends(kinds, partition, gpu_type, template, gres, want):
    facts = site.site_facts(kinds.profile, partition, gpu_type=gpu_type)
    req = render.SubmitRequest(template=template, command=("hostname",), nodes=1, time="10:00", gres=gres)
    text = render.render(render.plan(req, facts, templates.get(template)))
    assert f"#SBATCH {want}\n" in text
    res = _test_only(kinds, text)
    assert res.returncode == 0 and "to start at" in res.stderr, res.stderr
    assert re.search(r"on nodes? " + kinds.profile.partition(partition).node_names[0], res.stderr), res.stderr


NOT_AVAILABLE = "Requested node configuration is not available"


@pytest.mark.parametrize("partition, options, says", [
    ("shard", "--gres=shard:5", NOT_AVAILABLE),       # 4 per GPU under Flags=one_sharing (shard:4 passes above)
    ("mps", "--gres=mps:101", NOT_AVAILABLE),         # 100 per GPU, MPS's one_sharing default
    ("shard", "--gres=shard:1 --gpus-per-node=rtx3090:1",
     "Invalid generic resource (gres) specification"),  # a GPU and its shared gres together
    ("mps", "--gres=shard:1", NOT_AVAILABLE),         # a partition without shards
])
def test_sbatch_test_only_refuses_what_submit_refuses(kinds, partition, options, says):
    """What ``submit --gres`` refuses (tests/submit/test_submit_shared_gpus.py), Slurm refuses too."""
    res = _test_only(kinds, f"#!/bin/sh\n#SBATCH -p {partition} -t 10:00 {options}\nhostname\n")
    assert res.returncode != 0 and says in res.stderr, res.stderr


def test_sbatch_test_only_refuses_a_typed_request_on_untyped_gpus(kinds):
    """The issue's failure, as the control: a typed request where slurm.conf has Gres=gpu:8."""
    res = _test_only(kinds, "#!/bin/sh\n#SBATCH -p gpus\n#SBATCH --gpus-per-node=v100:8\nhostname\n")
    assert res.returncode != 0 and "Requested node configuration is not available" in res.stderr


@pytest.mark.parametrize("node, gpu_type", [("visualizacion1", "gtx1060"), ("vis2", "gtx1060"), ("vis2", "gtx970")])
def test_a_job_on_a_mixed_node_gets_the_type_it_asked_for(kinds, node, gpu_type):
    """A real step: Slurm gives the GPU of the asked type, at the Slurm GPU index (SLURM_STEP_GPUS)
    where :meth:`NodeType.gres_units` puts it, and submit's CPU map has that GPU's CPUs there."""
    p = kinds.profile
    nt = p.node_type_of(node)
    res = subprocess.run(["srun", "-p", p.partitions[next(k for k, v in p.partitions.items() if node in v.node_names)].name,
                          "-w", node, f"--gpus-per-node={gpu_type}:1", "-t", "1", "sh", "-c", "echo $SLURM_STEP_GPUS"],
                         env=kinds.env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    slurm_index = int(res.stdout.strip())
    units = nt.gres_units()
    assert units[slurm_index][1] == gpu_type, (units, slurm_index)
    facts = site.site_facts(p, next(k for k, v in p.partitions.items() if node in v.node_names), gpu_type=gpu_type)
    from slurmkit.submit.placement import gpu_cpu_map, cpu_list

    assert gpu_cpu_map(facts, len(facts.gpus))[slurm_index] == cpu_list(nt.gpu(units[slurm_index][0]).cpus)


def test_slurm_gpu_order_on_interleaved_gres_conf_lines(kinds):
    """gres.conf lines b, a, b (nvidia0, 1, 2): Slurm 22.05 orders a node's GPUs by type (the
    first type first), not by line: the b GPUs are indexes 0 and 1, the a GPU (nvidia1, second
    line) index 2. slurmkit's own gres.conf lists GPUs grouped by type so line order and Slurm's
    order agree (NodeType.gres_units); a reader of a site's own file must group by type too."""
    out = subprocess.run(["srun", "-p", "control", "-w", MIX_NODE, "--gpus-per-node=a:1", "-t", "1", "sh", "-c",
                          "echo $SLURM_STEP_GPUS"], env=kinds.env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    b = subprocess.run(["srun", "-p", "control", "-w", MIX_NODE, "--gpus-per-node=b:2", "-t", "1", "sh", "-c",
                        "echo $SLURM_STEP_GPUS"], env=kinds.env(), capture_output=True, text=True, timeout=60)
    assert (out.stdout.strip(), b.stdout.strip()) == ("2", "0,1")


def test_gpu_type_case_between_slurm_conf_and_gres_conf(kinds, slurm_release):
    """slurm.conf Gres=gpu:a100:1 beside gres.conf Type=A100 (what site check names as a case-only type
    difference, confcheck.CASE_ONLY): Slurm 24.11 and later set the node INVALID_REG ("gres/gpu type
    (A100) reported but not configured"); 22.05 registers it with gres.conf's spelling, and requests are
    case-sensitive: a100 (slurm.conf's spelling) is refused, A100 accepted."""
    f = kinds.show_node(CASE_NODE)
    if slurm_release.name != "22.05":
        assert "INVALID_REG" in f["State"], f
        assert "gres/gpu type (A100) reported but not configured" in kinds.show_node_reason(CASE_NODE)
        assert "gres/gpu type (<gres.conf's spelling>) reported but not configured" in CASE_ONLY
        return
    assert f["Gres"] == "gpu:A100:1" and "INVALID" not in f["State"] and "DRAIN" not in f["State"], f
    lower = _test_only(kinds, "#!/bin/sh\n#SBATCH -p case --gpus-per-node=a100:1\ntrue\n")
    upper = _test_only(kinds, "#!/bin/sh\n#SBATCH -p case --gpus-per-node=A100:1\ntrue\n")
    assert lower.returncode == 1 and "Requested node configuration is not available" in lower.stderr, lower.stderr
    assert upper.returncode == 0 and f"on nodes {CASE_NODE}" in upper.stderr, upper.stderr


def test_half_a_socket_per_gpu_as_site_check_says(kinds, slurm_release):
    """site check's prediction for a GPU whose Cores= cover part of a socket (the real dgx1x4 site's
    gres.conf), against the release's slurmctld: 22.05 registers the node; 24.11 and later set it
    INVALID_REG with the very message site check quotes."""
    from slurmkit.profile.confcheck import crosscheck
    from slurmkit.slurm.conf import parse

    gres = parse("".join(f"NodeName=dgx1 Name=gpu File=/dev/nvidia{i} Cores={c}\n" for i, c in enumerate(HALF_CORES)),
                 "gres.conf")
    [said] = [d for d in crosscheck(kinds.profile, None, [gres]) if d.line == 1 and "part of socket" in d.what]
    quoted = said.slurm.split("'")[1].replace("<node>", HALF_NODE)
    state = kinds.show_node(HALF_NODE)["State"]
    if slurm_release.name == "22.05":
        assert "INVALID" not in state and kinds.states()[HALF_NODE] == "idle", state
        assert "Slurm 22.05 accepts it" in said.slurm
    else:
        assert "INVALID_REG" in state, state
        assert kinds.show_node_reason(HALF_NODE).startswith(quoted), (quoted, kinds.show_node_reason(HALF_NODE))
