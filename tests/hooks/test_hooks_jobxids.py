"""The batch shell's Xid query (``python -m slurmkit.hooks.jobxids``): the Xids the hooks
attribute to a running job on its node, judged as the health check judges them (only hardware
ones are node evidence), read without moving any hook's kernel-log cursor.

Kernel-log lines (their message, as ``/dev/kmsg`` holds it, without dmesg's time prefix):
../shared/corpus/gpu-logs/gpud_dmesg-time-format-iso_xid48-63-94.log (leptonai/gpud test data:
Xid 48 -> 63 -> 94 on one GPU) and akash-support-209_* (Xid 79 and its twin "fallen off the
bus" line); the application Xid 13 and the NVLink Xid 74 lines are NVIDIA/NVSentinel's
(health-monitors/syslog-health-monitor xid parser test, Apache-2.0), verbatim. The ``/dev/kmsg``
record headers (``3,<seq>,<usec>,-;``) are added here.
"""

from __future__ import annotations

import subprocess
import sys

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
    """The gpud sequence on the job's GPU after its prolog read the log: Xid 48 and the nine
    Xid 94 lines are hardware (checks.toml [xid] fail), Xid 63 is warn-level: said, not counted.
    The same Xid 79 on another job's GPU, and a 79 on this GPU before the prolog, are not this
    job's."""
    dev = tmp_path / "kmsg"
    before = _kmsg(dev, ["usb 1-1: new device", _akash_lines(corpus)[0].replace("0000:a1:00", "0000:19:00")])
    _kmsg(dev, ["nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context"] + _gpud_lines(corpus)
          + _akash_lines(corpus), first_seq=before + 1)
    xids = read_kmsg(None, dev)
    evidence, seen = jobxids.judged("77", _record(before), xids, nodestate.boot_id(), load_config())
    assert evidence == [f"GPU3 {BUS}: Xid 48 (double bit ECC error) x1",
                        f"GPU3 {BUS}: Xid 94 (contained ECC error) x9"]
    assert seen == [f"GPU3 {BUS}: Xid 63 (ECC page retirement / row remap recording event) x1"]
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
    assert evidence == [f"GPU3 {BUS}: Xid 74 (NVLink error) x1"]


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
                                            f"{tmp_path / 'kmsg'}: No such file or directory"])
    _kmsg(tmp_path / "kmsg", _akash_lines(corpus))  # another job's GPU: nothing of this job's
    assert _main(capsys, "77", cfg) == (0, ["n2 none"])
    _kmsg(tmp_path / "kmsg", [XID13, _gpud_lines(corpus)[0]], first_seq=3)
    assert _main(capsys, "77", cfg) == (0, [
        f"n2 xid GPU3 {BUS}: Xid 48 (double bit ECC error) x1",
        f"n2 seen GPU3 {BUS}: Xid 13 (graphics engine exception) x1: application error, ignored"])
    # the record stays for the job's epilog, no cursor file is written
    assert sorted(p.name for p in (state / "n2").iterdir()) == ["job-77.json"]


def test_what_the_query_cannot_read_is_unknown_never_evidence(hooks, tmp_path, capsys):
    cfg, state = hooks
    code, out = _main(capsys, "78", cfg)
    assert code == 0 and out == [f"n2 unknown no prolog record {state / 'n2' / 'job-78.json'} "
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
    assert (r.returncode, r.stdout, r.stderr) == (0, f"n2 xid GPU3 {BUS}: Xid 74 (NVLink error) x1\n", "")
