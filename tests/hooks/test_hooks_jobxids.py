"""The batch shell's Xid query (``python -m slurmkit.hooks.jobxids``): the Xids the hooks
attribute to a running job on its node, judged as the health check judges them (only hardware
ones are node evidence), read without moving any hook's kernel-log cursor.

Kernel-log lines (their message, as ``/dev/kmsg`` holds it, without dmesg's time prefix):
../shared/corpus/gpu-logs/gpud_dmesg-time-format-iso_xid48-63-94.log (leptonai/gpud test data:
Xid 48 -> 63 -> 94 on one GPU) and akash-support-209_* (Xid 79 and its twin "fallen off the
bus" line); the application Xid 13 and the NVLink Xid 74 lines are NVIDIA/NVSentinel's
(health-monitors/syslog-health-monitor xid parser test, Apache-2.0), verbatim. The ``/dev/kmsg``
record headers (``3,<seq>,<usec>,-;``) are added here.

NVML states (the fallback where the job's user cannot read the kernel log) are recorded through
the real pynvml from the fake libnvidia-ml (tests/fake_nvml: a GPU whose handle answers
GPU_IS_LOST, as a GPU fallen off the bus does; volatile DBE counts set in a recorded snapshot,
:func:`nodeenv.set_value`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.health.config import load_config
from slurmkit.health.kmsg import read_kmsg
from slurmkit.hooks import config as hconfig
from slurmkit.hooks import jobxids, nodestate

BUS = "0000:19:00.0"  # the gpud log's GPU
OTHER = "0000:a1:00.0"  # akash's GPU: another job's
XID13 = ("NVRM: Xid (PCI:0000:19:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
         "(GPC 1, TPC 3, SM 0): Out Of Range Address")  # NVSentinel's, on the job's GPU (bus id edited)
XID74 = ("NVRM: Xid (PCI:0000:19:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on "
         "link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")  # NVSentinel's, on the job's GPU (bus id edited)


def _gpud_lines(corpus) -> list[str]:
    text = (corpus / "gpu-logs" / "gpud_dmesg-time-format-iso_xid48-63-94.log").read_text()
    return [line[line.index("NVRM:"):] for line in text.splitlines() if "NVRM: Xid" in line]


def _akash_lines(corpus) -> list[str]:
    text = next((corpus / "gpu-logs").glob("akash-support-209_*")).read_text()
    return [line[line.index("NVRM:"):] for line in text.splitlines() if "NVRM:" in line and "fallen" in line]


def _kmsg(path, messages, first_seq=1):
    """``/dev/kmsg`` records (``prio,seq,usec,flags;message``) of ``messages``, numbered from
    ``first_seq``, appended to ``path``; returns the last sequence number."""
    seq = first_seq - 1
    with open(path, "a") as fh:
        for seq, msg in enumerate(messages, first_seq):
            fh.write(f"3,{seq},{seq * 1000},-;{msg}\n")
    return seq


def _record(kmsg_seq, boot=None):
    """A prolog record of a job holding the GPU at BUS (NVML index 3, Slurm's GPU 0)."""
    return nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, 3, 3, "GPU-x", BUS)],
                              kmsg_seq=kmsg_seq, boot_id=boot or nodestate.boot_id())


def test_only_the_jobs_hardware_xids_since_its_prolog_are_evidence(tmp_path, corpus):
    """The gpud sequence on the job's GPU after its prolog read the log: Xid 48 needs a GPU reset
    (NVIDIA's Xid catalog) and is evidence; Xid 63 (the catalog: ignore) and the nine Xid 94 lines
    (contained, the driver's ``RST: No, D-RST: No``; the catalog: restart the application) are
    said, not counted.
    The same Xid 79 on another job's GPU, and a 79 on this GPU before the prolog, are not this
    job's."""
    dev = tmp_path / "kmsg"
    before = _kmsg(dev, ["usb 1-1: new device", _akash_lines(corpus)[0].replace("0000:a1:00", "0000:19:00")])
    _kmsg(dev, ["nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context"] + _gpud_lines(corpus)
          + _akash_lines(corpus), first_seq=before + 1)
    xids = read_kmsg(None, dev)
    evidence, seen = jobxids.judged("77", _record(before), xids, nodestate.boot_id(), load_config())
    assert evidence == [f"GPU3 {BUS}: Xid 48 (double bit ECC error) x1: reset the GPU"]
    assert seen == [f"GPU3 {BUS}: Xid 63 (ECC page retirement / row remap recording event) x1: no action needed, "
                    "not a drain (NVIDIA Xid catalog: IGNORE)",
                    f"GPU3 {BUS}: Xid 94 (contained error) x8: application error, ignored",
                    f"GPU3 {BUS}: Xid 94 (contained error) x1: application error, ignored (the driver: RST: No, D-RST: No)"]
    # a prolog record of another boot (a ghost) holds nothing; read_kmsg kept no cursor
    assert jobxids.judged("77", _record(before, boot="another-boot"), xids, nodestate.boot_id(), load_config()) \
        == ([], [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kmsg"]


def test_an_application_xid_is_said_never_counted_and_a_fatal_nvlink_xid_is(tmp_path):
    dev = tmp_path / "kmsg"
    _kmsg(dev, [XID13])
    evidence, seen = jobxids.judged("77", _record(0), read_kmsg(None, dev), nodestate.boot_id(), load_config())
    assert evidence == []
    assert seen == [f"GPU3 {BUS}: Xid 13 (graphics engine exception) x1: application error, ignored"]
    _kmsg(dev, [XID74], first_seq=2)
    evidence, _ = jobxids.judged("77", _record(0), read_kmsg(None, dev), nodestate.boot_id(), load_config())
    assert evidence == [f"GPU3 {BUS}: Xid 74 (NVLink error) x1: reset the GPU"]


def test_a_gsp_timeout_naming_the_jobs_gpu_as_gpu_n_is_evidence(tmp_path):
    """The driver's GSP heartbeat line names the GPU only as GPU<n> (NVIDIA/open-gpu-kernel-modules
    #1230, verbatim but for GPU6 -> GPU3: the job's GPU is NVML index 3 here, an edit): it is the
    job's GPU, so evidence; the same line naming another GPU is not the job's."""
    dev = tmp_path / "kmsg"
    line = ("NVRM: GPU3 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 "
            "heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200")
    _kmsg(dev, [line, line.replace("GPU3", "GPU5")])
    xids = read_kmsg(None, dev)
    evidence, seen = jobxids.judged("77", _record(0), xids, nodestate.boot_id(), load_config())
    assert (evidence, seen) == ([f"GPU3 {BUS}: Xid 119 (GSP RPC timeout) x1: reset the GPU"], [])
    assert [x.pci_bus_id for x in xids] == [None, None]  # the caller's lines are left as they were


@pytest.fixture
def hooks(tmp_path):
    """A hooks config reading node n2's kernel log from ``tmp_path/kmsg``; its state dir."""
    state = tmp_path / "state"
    cfg = tmp_path / hconfig.FILE_NAME
    cfg.write_text(hconfig.render(tmp_path / "slurm.conf", state_dir=state, kmsg={"n2": tmp_path / "kmsg"}))
    return cfg, state


def _main(capsys, *argv) -> tuple[int, list[str]]:
    code = jobxids.main([str(a) for a in argv], env={"SLURMD_NODENAME": "n2"})
    return code, capsys.readouterr().out.splitlines()


def test_the_query_answers_one_line_per_finding_prefixed_with_the_node(hooks, tmp_path, corpus, capsys):
    cfg, state = hooks
    nodestate.save_job(state, "n2", "77", _record(0))
    assert _main(capsys, "77", cfg) == (0, ["n2 unknown cannot read the kernel log "
                                            f"{tmp_path / 'kmsg'}: No such file or directory; "
                                            "NVML: nvmlInit: LIBRARY_NOT_FOUND"])
    _kmsg(tmp_path / "kmsg", _akash_lines(corpus))  # another job's GPU: nothing of this job's
    assert _main(capsys, "77", cfg) == (0, ["n2 none"])
    _kmsg(tmp_path / "kmsg", [XID13, _gpud_lines(corpus)[0]], first_seq=3)
    assert _main(capsys, "77", cfg) == (0, [
        f"n2 xid GPU3 {BUS}: Xid 48 (double bit ECC error) x1: reset the GPU",
        f"n2 seen GPU3 {BUS}: Xid 13 (graphics engine exception) x1: application error, ignored"])
    # the record stays for the job's epilog, no cursor file is written
    assert sorted(p.name for p in (state / "n2").iterdir()) == ["job-77.json"]


def test_what_the_query_cannot_read_is_unknown_never_evidence(hooks, tmp_path, capsys):
    cfg, state = hooks
    code, out = _main(capsys, "78", cfg)
    assert code == 0 and out == [f"n2 unknown no prolog record {tmp_path / 'jobs' / 'n2' / 'job-78.json'} "
                                 "(the hooks did not record this job's start here)"]
    (state / "n2").mkdir(parents=True)
    (state / "n2" / "job-79.json").write_text("[1, 2]")
    assert _main(capsys, "79", cfg) == (0, [f"n2 unknown {state / 'n2' / 'job-79.json'}: not a prolog record "
                                            "(not a prolog job record)"])
    code, out = _main(capsys, "77", tmp_path / "no-such.toml")
    assert code == 0 and len(out) == 1 and out[0].startswith("n2 unknown the hooks config: ")
    assert "no-such.toml" in out[0]
    cfg.write_text(cfg.read_text().replace("[nodes.n2]", "[checks]\nxid = false\n[nodes.n2]"))
    assert _main(capsys, "77", cfg) == (0, ["n2 unknown the hooks' xid check is switched off "
                                            f"([checks] xid = false in {cfg})"])
    assert jobxids.main(["77"], env={}) == 2


def test_the_batch_shells_command_line_works_isolated(hooks, tmp_path):
    """As ``_run.sh.j2`` runs it: ``python -I -m slurmkit.hooks.jobxids JOB CONFIG``."""
    cfg, state = hooks
    nodestate.save_job(state, "n2", "77", _record(0))
    _kmsg(tmp_path / "kmsg", [XID74])
    r = subprocess.run([sys.executable, "-I", "-m", "slurmkit.hooks.jobxids", "77", str(cfg)],
                       env={"SLURMD_NODENAME": "n2"}, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"n2 xid GPU3 {BUS}: Xid 74 (NVLink error) x1: reset the GPU\n", "")


def _job_on(bus, nvml_index):
    return nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, nvml_index, 2, "GPU-x", bus)], kmsg_seq=0,
                              boot_id=nodestate.boot_id())


def _state(fake, tmp_path, name, **knobs):
    from nodeenv import record_snapshot
    from slurmkit.health.runner import read_state

    record_snapshot(fake, tmp_path / f"{name}.json", **knobs)
    return read_state(tmp_path / f"{name}.json")


def test_nvml_judges_the_jobs_gpus_only(fake_nvml, tmp_path):
    """The fake NVML's GPU1 (0000:3b:00.0) fell off the bus: its handle answers GPU_IS_LOST, so
    NVML gives no bus id for it; the prolog recorded the job's GPU as NVML GPU1 -> the health
    check's gpu_lost fails on it. A job on GPU2 has no evidence. In a job's cgroup NVML lists only
    the job's GPU (one GPU, NVML index 0): the lost one is still the job's. A volatile DBE count on
    the job's GPU fails ecc_volatile_uncorrectable; on another GPU it is not the job's."""
    from nodeenv import set_value
    from slurmkit.health.state import NodeState

    hc = load_config()
    lost = _state(fake_nvml, tmp_path, "lost", mode="gpu_is_lost", lost=1)
    assert jobxids.nvml_judged(_job_on("0000:3b:00.0", 1), lost, hc) == (
        ["GPU1 0000:3b:00.0: gpu_lost: GPU fell off the bus (GPU_IS_LOST)"], [])
    assert jobxids.nvml_judged(_job_on("0000:4c:00.0", 2), lost, hc) == ([], [])
    alone = _state(fake_nvml, tmp_path, "alone", mode="gpu_is_lost", lost=0, gpus=1)
    assert jobxids.nvml_judged(_job_on("0000:3b:00.0", 1), alone, hc) == (
        ["GPU1 0000:3b:00.0: gpu_lost: GPU fell off the bus (GPU_IS_LOST)"], [])
    from nodeenv import record_snapshot

    snap = record_snapshot(fake_nvml, tmp_path / "healthy.json")
    dbe = NodeState.from_json(set_value(snap, 2, "ecc_volatile_uncorrectable", 4), source="test")
    evidence, seen = jobxids.nvml_judged(_job_on("0000:4c:00.0", 2), dbe, hc)
    assert seen == [] and len(evidence) == 1 and evidence[0].startswith("GPU2 0000:4c:00.0: ecc_volatile_uncorrectable: ")
    assert "4" in evidence[0]
    assert jobxids.nvml_judged(_job_on("0000:3b:00.0", 1), dbe, hc) == ([], [])


NOBODY = 65534


def test_an_unprivileged_jobs_query_reads_what_the_prolog_published_and_nvml(open_dir, fake_nvml, node_python):
    """The real prolog (root, live fake NVML, the node's kernel log a root-only 0600 file as
    /dev/kmsg is under kernel.dmesg_restrict=1) runs a job of uid/gid 65534; its state directory
    stays 0700. The reader, run as the job's user (a shell as 65534 that runs the node's hooks
    interpreter, every user's, as slurmstepd's step does), reads the published window and,
    the kernel log denied, the NVML state of the job's GPU: GPU lost -> evidence; healthy ->
    none, saying why. Root still reads the Xid from the kernel log; another user reads nothing;
    the epilog removes what was published."""
    from fake_nvml import FakeNvml
    from nodeenv import Node

    lib = open_dir / "nvml"
    lib.mkdir(mode=0o755)
    shutil.copy(fake_nvml.lib, lib / "libnvidia-ml.so.1")
    fake = FakeNvml(lib)
    node = Node(open_dir / "node")
    kmsg = open_dir / "kmsg"
    kmsg.write_text("6,1,1000,-;usb 1-1: new device\n")
    kmsg.chmod(0o600)
    node.write_config(mode="observe", kmsg={"n1": kmsg})
    user = {"SLURM_JOB_GID": str(NOBODY)}
    r = node.run(node.prolog, job_id="101", gpus="0", user=("nobody", NOBODY), env=fake.env("healthy", base=user))
    assert r.returncode == 0, r.stderr
    (gpu,) = json.loads((node.state_dir / "n1" / "job-101.json").read_text())["gpus"]
    nv, bus = gpu["nvml_index"], gpu["pci_bus_id"]
    published = node.root / "jobs" / "n1" / "job-101.json"  # "jobs" beside the state directory
    st = published.stat()
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, NOBODY)
    for d in (node.root / "jobs", node.root / "jobs" / "n1"):
        assert (d.stat().st_mode & 0o7777, d.stat().st_uid) == (0o711, 0)
    assert node.state_dir.stat().st_mode & 0o7777 == (node.state_dir / "n1").stat().st_mode & 0o7777 == 0o700
    window = json.loads(published.read_text())  # the window only: no energy, no others' processes, no policy
    assert window["gpus"] == [{**{k: gpu[k] for k in ("index", "nvml_index", "minor", "uuid", "pci_bus_id")},
                               "start_energy_mj": None, "acct_seen": []}]
    assert window["policy"] is None and window["user"] is None and window["kmsg_seq"] == 1
    with open(kmsg, "a") as fh:  # the job's GPU falls off the bus
        fh.write(f"3,2,2000,-;NVRM: Xid (PCI:{bus[:-2]}): 79, pid='<unknown>', name=<unknown>, "
                 "GPU has fallen off the bus.\n")

    def query(uid, mode, **knobs):
        # through a shell, as slurmstepd's step: setpriv's own exec still finds a program where the user
        # cannot search (a path under root's 0700 /root runs; the same user's shell gets exit 126)
        who = [] if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        r = subprocess.run([*who, "sh", "-c", 'exec "$@"', "sh", str(node_python), "-I", "-m", "slurmkit.hooks.jobxids",
                            "101", str(node.cfg_path)],
                           env=fake.env(mode, base={"SLURMD_NODENAME": "n1"}, **knobs), capture_output=True,
                           text=True, timeout=60)
        assert (r.returncode, r.stderr) == (0, "")
        return r.stdout.splitlines()

    assert query(NOBODY, "gpu_is_lost", lost=nv) == [f"n1 gpu GPU{nv} {bus}: gpu_lost: GPU fell off the bus (GPU_IS_LOST)"]
    assert query(NOBODY, "healthy") == [f"n1 none (the job's GPUs by NVML: cannot read the kernel log {kmsg}: "
                                        "Permission denied)"]
    assert query(0, "healthy") == [f"n1 xid GPU{nv} {bus}: Xid 79 (GPU fell off the bus) x1: reboot the node"]
    assert query(1000, "gpu_is_lost", lost=nv) == [f"n1 unknown cannot read the job's prolog record {published}: "
                                                   "Permission denied"]
    r = node.run(node.epilog, job_id="101", gpus="0", user=("nobody", NOBODY), env=fake.env("healthy", base=user))
    assert r.returncode == 0, r.stderr
    assert not published.exists() and not (node.state_dir / "n1" / "job-101.json").exists()
    assert os.listdir(node.root / "jobs" / "n1") == []


def test_what_is_published_goes_with_a_ghost_record_and_is_owned_by_the_job(tmp_path):
    """A ghost prolog record (its epilog never ran) dropped by the next prolog on its GPU or by
    the health check past its end takes its published window with it. Without SLURM_JOB_GID the
    window is the job's uid's, read-only; without either, root's alone (run as root, as the
    prolog is: chown)."""
    state, jobs = tmp_path / "state", tmp_path / "jobs"
    rec = nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, 3, 3, "GPU-x", BUS)], end_by_s=2000.0)
    for job, uid, gid in (("77", None, 1234), ("79", 1234, None), ("80", None, None)):
        nodestate.save_job(state, "n2", job, rec)
        path = Path(nodestate.publish_job(jobs, "n2", job, rec, uid=uid, gid=gid))
        st = path.stat()
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == {"77": (0o640, 0, 1234), "79": (0o400, 1234, 0),
                                                              "80": (0o600, 0, 0)}[job]
    assert nodestate.drop_jobs_on_gpus(state, "n2", "78", [0], jobs_dir=jobs) == ["77", "79", "80"]
    assert os.listdir(jobs / "n2") == []
    nodestate.save_job(state, "n2", "81", rec)
    nodestate.publish_job(jobs, "n2", "81", rec, uid=None, gid=1234)
    assert nodestate.drop_stale_jobs(state, "n2", now=2000.0 + nodestate.STALE_GRACE_S + 1, jobs_dir=jobs) == ["81"]
    assert os.listdir(jobs / "n2") == [] and os.listdir(state / "n2") == []
