"""Helpers for the hook tests: a node directory laid out like a real one (slurm.conf, gres.conf,
GPU device files with minor numbers that differ from their names, hooks installed by the real
installer) and GPU snapshots recorded through the real pynvml from the fake libnvidia-ml.

Imported by the hook tests and ``bench/prolog_latency.py`` (no pytest needed: the fixtures
``node`` and ``healthy`` built from it are in tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path


from slurmkit.hooks import config as hconfig
from slurmkit.hooks import install as inst
from slurmkit.slurm import conf as sconf

NVIDIA_MAJOR = 195


def record_snapshot(fake, path: Path, node: str = "n1", **knobs) -> dict:
    """Record the fake NVML's state through the real live path (worker process, pynvml) into
    ``path``; returns the snapshot JSON. ``knobs``: FakeNvml.env keyword arguments."""
    env = fake.env(knobs.pop("mode", "healthy"), **knobs)
    code = ("import json,sys; from slurmkit.health.runner import read_state; "
            "s = read_state('live', node=sys.argv[2]); open(sys.argv[1], 'w').write(json.dumps(s.to_json()))")
    subprocess.run([sys.executable, "-c", code, str(path), node], env=env, check=True, timeout=60)
    return json.loads(path.read_text())


def set_value(snapshot: dict, nvml_index: int, key: str, value) -> dict:
    """A copy of ``snapshot`` with one GPU value replaced (as a successful NVML reading)."""
    snap = json.loads(json.dumps(snapshot))
    gpu = next(g for g in snap["gpus"] if g["index"] == nvml_index)
    old = gpu["values"].get(key, {})
    gpu["values"][key] = {"value": value, "source": old.get("source", "test"), "rc": "SUCCESS"}
    return snap


def where(node: "Node", gpu: dict) -> str:
    """How a drain reason names snapshot GPU ``gpu`` on ``node``: ``GPU<NVML index> (gres index
    <Slurm's index>, <bus id>)``, Slurm's index being the place of the device file with the
    GPU's minor number in the node's gres.conf list (nvidia0..N)."""
    return f"GPU{gpu['index']} (gres index {node.minors.index(gpu['minor_number'])}, {gpu['pci_bus_id']})"


def nvml_gpu_of(node: "Node", snapshot: dict, slurm_index: int) -> dict:
    """The snapshot's GPU behind Slurm's GPU ``slurm_index`` on ``node``: matched by the device
    minor of the node's ``nvidia<slurm_index>`` file."""
    minor = os.minor(os.stat(node.dev / f"nvidia{slurm_index}").st_rdev)
    return next(g for g in snapshot["gpus"] if g["minor_number"] == minor)


class Node:
    """A fake node's /etc/slurm under ``root``: ``slurm_conf``, ``gres_conf``, ``dev`` (GPU device
    files nvidia0..3 with minors 2,0,3,1 like the sandbox), hooks installed with ``cfg_path``."""

    def __init__(self, root: Path, slurm_conf_text: str = "ClusterName=t\nNodeName=n[1-2] CPUs=2 Gres=gpu:h100:4\n",
                 gpus: int = 4):
        if os.geteuid() != 0:
            import pytest

            pytest.skip("making GPU device files (mknod) needs root")
        from slurmkit.sandbox.config import device_minors

        self.root = root
        self.etc = root / "etc"
        self.dev = root / "dev"
        self.etc.mkdir(parents=True)
        self.dev.mkdir()
        self.minors = device_minors(gpus)
        for k, minor in enumerate(self.minors):
            os.mknod(self.dev / f"nvidia{k}", 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))
        self.slurm_conf = self.etc / "slurm.conf"
        self.slurm_conf.write_text(slurm_conf_text)
        self.gres_conf = self.etc / "gres.conf"
        self.gres_conf.write_text(f"# generated for the test\nNodeName=n[1-2] Name=gpu Type=h100 "
                                  f"File={self.dev}/nvidia[0-{gpus - 1}]\n")
        self.state_dir = root / "state"
        self.spool_dir = root / "spool"
        self.textfile_dir = root / "textfile"
        self.empty_bin = root / "nobin"
        self.empty_bin.mkdir()
        self.cfg_path = self.etc / hconfig.FILE_NAME
        self.write_config()
        spec = inst.InstallSpec(python=sys.executable, config=self.cfg_path.read_text())
        inst.apply(inst.plan_install(sconf.load_tree(self.slurm_conf), spec), self.slurm_conf, installing=True)
        self.prolog = self.etc / "prolog.d" / inst.OUR_SHIM
        self.epilog = self.etc / "epilog.d" / inst.OUR_SHIM
        self.healthcheck = self.etc / inst.HEALTHCHECK_SHIM

    def write_config(self, snapshots: dict | None = None, mode: str = "enforce", bin_dir: str | None = None,
                     extra: str = "", sysfs: dict | None = None, dcgm_diag: dict | None = None,
                     kmsg: dict | None = None) -> None:
        """(Re)write the hooks config; by default scontrol is looked for in an empty directory, so
        any Slurm RPC would show up as own trouble. ``sysfs`` / ``dcgm_diag`` / ``kmsg``: {node: path}."""
        text = hconfig.render(self.slurm_conf, gres_conf=self.gres_conf, mode=mode, state_dir=self.state_dir,
                              spool_dir=self.spool_dir, textfile_dir=self.textfile_dir, snapshots=snapshots,
                              slurm_bin_dir=bin_dir or str(self.empty_bin), sysfs=sysfs, dcgm_diag=dcgm_diag,
                              kmsg=kmsg)
        self.cfg_path.write_text(extra + text)  # top-level keys go before the [nodes.*] tables

    def run(self, shim: Path, node: str = "n1", job_id: str | None = "101", gpus: str | None = "0,2",
            env: dict | None = None, user: tuple = ("alice", 1000), timeout: float = 60, prefix=()):
        """Run a shim the way slurmd does (no PATH); returns CompletedProcess."""
        e = {"SLURMD_NODENAME": node, "SLURM_CONF": str(self.slurm_conf)}
        if job_id:
            e.update(SLURM_JOB_ID=job_id, SLURM_JOB_USER=user[0], SLURM_JOB_UID=str(user[1]))
        if gpus is not None:
            e["SLURM_JOB_GPUS"] = gpus
        e.update(env or {})
        return subprocess.run([*prefix, str(shim)], env=e, capture_output=True, text=True, timeout=timeout)

    def textfile(self, node: str, hook: str) -> dict:
        """Parse our textfile with prometheus_client's parser: {(name, labels tuple): value}."""
        from prometheus_client.parser import text_string_to_metric_families

        text = (self.textfile_dir / f"slurmkit_{node}_{hook}.prom").read_text()
        out = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def metric(self, node: str, hook: str, name: str, **labels) -> float:
        """The sample of ``name`` with ``labels`` in the hook's file. ``slurmkit_health_check_status``:
        ``device`` / ``port`` default to "", and a result with no series reads 0 (the hooks write
        only results that did not pass) when the run counted its passes."""
        want = {"node": node, "hook": hook, **labels} if name != "slurmkit_node_drained_by_slurmkit" \
            else {"node": node}
        if name == "slurmkit_health_check_status":
            want = {"device": "", "port": "", **want}
        got = self.textfile(node, hook)
        key = (name, tuple(sorted(want.items())))
        if key not in got and name == "slurmkit_health_check_status" and any(
                k[0] == "slurmkit_health_checks_passed" for k in got):
            return 0
        return got[key]
