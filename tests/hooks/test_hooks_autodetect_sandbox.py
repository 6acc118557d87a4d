"""An ``AutoDetect=nvml`` node under a real slurmd running the chain ``slurmkit hooks install``
set up (the sandbox, Debian's Slurm 22.05).

The sandbox's gres.conf (generated: ``AutoDetect=off`` and one ``Type=h100 File=`` line per GPU)
gets ``NodeName=n3 AutoDetect=nvml`` (an edit, labelled here): slurmd on n3 logs that it was
built with NVML but cannot load it (Debian ships no gpu_nvml.so) and registers the GPUs of the
explicit lines, as tests/topology/test_site_kinds_sandbox.py's AutoDetect node does. The hooks
read the same gres.conf: an AutoDetect node, so the job's Slurm GPU index k is the GPU with the
k-th NVML index (gpu_nvml.c's NVLink self position: hooks/gres.py), not the File= line's
device minor (the sandbox makes index, minor and NVML order differ). A healthy replayed
snapshot (recorded from the fake NVML) runs a job and drains nothing; the same snapshot with 4
volatile uncorrectable ECC errors on NVML GPU 1 (an edit, labelled) makes the next job's prolog
drain n3 with slurmkit's reason.

What the sandbox cannot show: a gres.conf that says only ``AutoDetect=nvml`` for n3, where the
hooks take the count from slurm.conf's ``Gres=gpu:h100:4`` (tests/hooks/test_hooks_gres_autodetect.py),
is registered by this slurmd as ``gres/gpu count reported lower than configured (0 < 4)``
(INVALID_REG: no NVML to find the GPUs), so no job can run there; the test asserts that too.
"""

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from nodeenv import record_snapshot, set_value
from sandbox_nodes import backups, drop_new_backups, hooks_cli, install_args, job, reconfigure, restart_slurmd, sbatch, show_node

from slurmkit.atomicfile import atomic_write
from slurmkit.health.result import fit_reason
from slurmkit.hooks import drain, gres
from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

NODE = "n3"


def _node_ready(conf):
    s = show_node(conf, NODE)["state"]
    return not s.endswith("*") and not any(w in s for w in ("NOT_RESPONDING", "INVALID", "DRAIN"))


def _text(path: Path) -> str:
    """``path``'s text, "" while it does not exist (a textfile not written yet)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_autodetect_node_checked_under_slurmd(sandbox, fake_nvml):
    conf = Path(sandbox.slurm_conf)
    gres_conf = conf.parent / "gres.conf"
    original = gres_conf.read_text()
    assert "\nAutoDetect=off\n" in original and f"NodeName={NODE} " not in original
    work = Path(tempfile.mkdtemp(prefix="hooks-autodetect-test-", dir=sandbox.dir))
    snaps = {n: work / f"{n}.json" for n in sandbox.node_names}
    for n, p in snaps.items():
        record_snapshot(fake_nvml, p, node=n)
    healthy = snaps[NODE].read_text()
    jobs = []
    kept = backups(conf)
    try:
        atomic_write(gres_conf, original.replace("\nAutoDetect=off\n", f"\nAutoDetect=off\nNodeName={NODE} AutoDetect=nvml\n"))
        restart_slurmd(sandbox, NODE)
        wait_until(lambda: _node_ready(conf), 60, what=f"{NODE} idle with its GPUs")
        log = (Path(sandbox.dir) / "var" / "log" / f"slurmd-{NODE}.log").read_text()
        assert "We were configured with nvml functionality, but that lib wasn't found on the system." in log
        assert run(["scontrol", "show", "node", NODE], slurm_conf=str(conf), timeout=30).stdout.count("Gres=gpu:h100:4")
        lines = gres.load_gres_conf(gres_conf)
        assert gres.autodetect(lines, NODE) == "nvml" and gres.autodetect(lines, "n1") == "off"
        # (the longest HealthCheckInterval, 18 h: slurmctld runs the health check at once when its last run
        # is older than the interval, so with 300 s on a sandbox up for minutes it could read
        # the failing snapshot below before the job's prolog does; the prolog is what is tested)
        res = hooks_cli(conf, *install_args(work, snaps, "--mode", "enforce", "--interval", "65535"))
        assert res.returncode == 0, res.stderr
        reconfigure(sandbox)
        # a healthy node: a job runs, its prolog expects the node's 4 GPUs and maps the job's
        # GPU by NVML's order
        j = sbatch(conf, "-w", NODE, "--gres=gpu:1", "-t", "2", "--wrap", "sleep 60")
        jobs.append(j)
        rec_path = work / "state" / NODE / f"job-{j}.json"
        rec = wait_until(lambda: rec_path.exists() and json.loads(rec_path.read_text()), 60, what="the job's prolog record")
        [g] = rec["gpus"]
        assert g["nvml_index"] == g["index"], g  # AutoDetect=nvml: Slurm's index k = the k-th NVML GPU
        minor_of_line = gres.device_minor(f"{sandbox.device_dir}/nvidia{g['index']}")
        assert g["minor"] != minor_of_line  # not the File= line's device (the sandbox makes them differ)
        # the job record is written before the prolog's textfiles: wait for the prolog's own line
        prolog_ok = f'slurmkit_hook_exit_code{{node="{NODE}",hook="prolog"}} 0'
        wait_until(lambda: prolog_ok in _text(work / "textfile" / f"slurmkit_{NODE}_prolog.prom"), 60,
                   what="the prolog's textfile")
        gpus_prom = _text(work / "textfile" / f"slurmkit_{NODE}_gpus.prom")
        assert f'slurmkit_gpus_expected{{node="{NODE}"}} 4' in gpus_prom, gpus_prom
        run(["scancel", j], slurm_conf=str(conf), timeout=30)
        wait_until(lambda: not rec_path.exists(), 60, what="the job's epilog")
        # the epilog drops the job's record before its checks end; its textfile is written last:
        # the failing snapshot below must be read by the next job's prolog, not by this epilog (a
        # run once wrote it between the two, the epilog drained n3 and no prolog ran)
        epilog_ok = f'slurmkit_hook_exit_code{{node="{NODE}",hook="epilog"}} 0'
        wait_until(lambda: epilog_ok in _text(work / "textfile" / f"slurmkit_{NODE}_epilog.prom"), 60,
                   what="the epilog's textfile")
        wait_until(lambda: "COMPLETING" not in show_node(conf, NODE)["state"], 30, what=f"{NODE} done with the epilog")
        got = show_node(conf, NODE)
        assert got["reason"] is None and "DRAIN" not in got["state"], got
        # a failing GPU (edit of the recorded snapshot: 4 volatile DBEs on NVML GPU 1): the next
        # job's prolog drains the node with slurmkit's reason
        failing = set_value(json.loads(healthy), 1, "ecc_volatile_uncorrectable", 4)
        atomic_write(snaps[NODE], json.dumps(failing))
        bad = next(x for x in failing["gpus"] if x["index"] == 1)
        j = sbatch(conf, "-w", NODE, "--gres=gpu:1", "-t", "2", "--requeue", "--wrap", "true")
        jobs.append(j)
        # AutoDetect=nvml: Slurm's GPU k is NVML's k-th, so NVML GPU 1 is gres index 1
        want = fit_reason(f"slurmkit: ecc_volatile_uncorrectable GPU1 (gres index 1, {bad['pci_bus_id']}): "
                          "4 uncorrectable ECC errors since boot")
        got = wait_until(lambda: drain.is_ours(show_node(conf, NODE)["reason"]) and show_node(conf, NODE), 60,
                         what=f"{NODE} drained by slurmkit")
        assert got["reason"] == want and "DRAIN" in got["state"], got
        # the drain comes before the prolog writes its textfile, and slurmctld requeues the job
        # after the prolog's exit: wait for each
        prolog_bad = f'slurmkit_hook_exit_code{{node="{NODE}",hook="prolog"}} 1'
        wait_until(lambda: prolog_bad in _text(work / "textfile" / f"slurmkit_{NODE}_prolog.prom"), 60,
                   what="the failed prolog's textfile")
        wait_until(lambda: int(job(conf, j)["Restarts"]) >= 1, 60, what=f"job {j} requeued off the failing node")
        run(["scancel", j], slurm_conf=str(conf), timeout=30)
        assert hooks_cli(conf, "uninstall").returncode == 0
        reconfigure(sandbox)
        run(["scontrol", "update", f"nodename={NODE}", "state=resume"], slurm_conf=str(conf), timeout=30)
        wait_until(lambda: _node_ready(conf), 60, what=f"{NODE} resumed")
        # gres.conf with nothing but AutoDetect=nvml for n3 (the hooks would take slurm.conf's
        # Gres= count): this slurmd, without NVML, finds no GPU and the node is refused
        only = "".join(line + "\n" for line in original.splitlines()
                       if not line.startswith("NodeName=n[1-4] Name=gpu"))
        only += "".join(line.replace("NodeName=n[1-4]", "NodeName=n[1-2,4]") + "\n" for line in original.splitlines()
                        if line.startswith("NodeName=n[1-4] Name=gpu"))
        atomic_write(gres_conf, only.replace("\nAutoDetect=off\n", f"\nAutoDetect=off\nNodeName={NODE} AutoDetect=nvml\n"))
        restart_slurmd(sandbox, NODE)
        got = wait_until(lambda: "INVALID" in show_node(conf, NODE)["state"] and show_node(conf, NODE), 60,
                         what=f"{NODE} refused by slurmctld")
        assert got["reason"] == "gres/gpu count reported lower than configured (0 < 4)", got
        files = gres.node_gpu_files(gres.load_gres_conf(gres_conf), NODE, str(gres_conf),
                                    slurm_gres=lambda: gres.slurm_conf_gres(conf, NODE))
        assert files == [None] * 4  # what the hooks would expect there: slurm.conf's 4, by NVML
    finally:
        if jobs:
            run(["scancel", *jobs], slurm_conf=str(conf), timeout=30, check=False)
        hooks_cli(conf, "uninstall")  # after a failure above (else a no-op)
        atomic_write(gres_conf, original)
        reconfigure(sandbox)
        restart_slurmd(sandbox, NODE)
        run(["scontrol", "update", f"nodename={NODE}", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
        wait_until(lambda: _node_ready(conf), 60, what=f"{NODE} back to its generated gres.conf")
        drop_new_backups(conf, kept)
        shutil.rmtree(work, ignore_errors=True)
