"""The kernel log as the NVIDIA driver writes it: multi-line NVRM messages (dmesg, syslog,
journalctl -k, /dev/kmsg), events without an Xid number, the severity the driver states, the
root cause it names, each event counted once.

Sources (verbatim unless said): NVIDIA/NVSentinel#155 (dmesg, the three-line "fallen off the
bus" with no Xid); NVIDIA/NVSentinel and leptonai/gpud test data (Xid 149 ``NETIR_LINK_EVT
Fatal``); a public bug report's ``journalctl -k`` (Lenovo P51, PCI ID 10de:13b6) and a public
troubleshooting note's ``/var/log/syslog`` (H100 0000:5d:00.0, 10de:2330) of the same message;
../shared/corpus/gpu-logs/akash-support-209_* (Xid 79 and its twin line) and
../shared/corpus/logs/dmesg_xid119.log (leptonai/gpud: Xid 119 and the GSP rate-limit line).
"""

from __future__ import annotations

from slurmkit.health import kmsg
from slurmkit.health.checks import check_xid
from slurmkit.health.config import load_config
from slurmkit.health.state import NodeState, Xid

NVSENTINEL_155 = """\
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025
"""
JOURNALCTL_P51 = """\
Mar 07 19:30:42 p51 kernel: nvidia-nvlink: Nvlink Core is being initialized, major device number 237
Mar 07 19:30:42 p51 kernel: NVRM: The NVIDIA GPU 0000:01:00.0
                            NVRM: (PCI ID: 10de:13b6) installed in this system has
                            NVRM: fallen off the bus and is not responding to commands.
Mar 07 19:30:42 p51 kernel: nvidia: probe of 0000:01:00.0 failed with error -1
Mar 07 19:30:42 p51 kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).
"""
SYSLOG_H100 = """\
Jan  3 07:39:45 ubuntu kernel: [17257.355375] NVRM: The NVIDIA GPU 0000:5d:00.0
Jan  3 07:39:45 ubuntu kernel: [17257.355375] NVRM: (PCI ID: 10de:2330) installed in this system has
Jan  3 07:39:45 ubuntu kernel: [17257.355375] NVRM: fallen off the bus and is not responding to commands.
Jan  3 07:39:45 ubuntu kernel: [17257.355551] nvidia: probe of 0000:5d:00.0 failed with error -1
Jan  3 07:39:45 ubuntu kernel: [17257.418931] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""
XID149_FATAL = ("[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 "
                "(0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")


def _verdicts(xids):
    st = NodeState(node="n1", source="test")
    st.xids = xids
    return [(r.value, r.pci_bus_id, str(r.status), r.message) for r in check_xid(st, load_config())]


def test_multi_line_fallen_off_the_bus_without_an_xid_fails_the_gpu_it_names():
    for text, bus in ((NVSENTINEL_155, "0000:b3:00.0"), (JOURNALCTL_P51, "0000:01:00.0"),
                      (SYSLOG_H100, "0000:5d:00.0")):
        xids = kmsg.parse_log(text, "dmesg")
        assert [(x.xid, x.pci_bus_id) for x in xids] == [(79, bus)], text
        assert "fallen off the bus and is not responding to commands" in xids[0].message
        assert [(v, b, s) for v, b, s, _ in _verdicts(xids)] == [(79, bus, "fail")]


def test_kmsg_record_with_escaped_newlines_is_one_message(tmp_path):
    # edit (labelled): NVSentinel#155's record as /dev/kmsg gives it (one record, newlines as \x0a,
    # a SUBSYSTEM continuation line after it); priority 3, sequence 812, 1843.308145 s since boot
    dev = tmp_path / "kmsg"
    dev.write_text("3,812,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed "
                   "in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.\n"
                   " SUBSYSTEM=pci\n 6,813,1843439662,-;NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
    xids = kmsg.read_kmsg(None, dev, boot_time_s=1000.0)
    assert [(x.xid, x.pci_bus_id, x.seq) for x in xids] == [(79, "0000:b3:00.0", 812)]
    assert xids[0].time_s == 1000.0 + 1843.308145


def test_xid_79_and_its_twin_line_count_once(corpus):
    text = (corpus / "gpu-logs" / "akash-support-209_nvidia-smi-unknown-error_dmesg-T_xid79-fallen-off-bus.txt").read_text()
    assert text.count("fallen off the bus") == 2
    xids = kmsg.parse_log(text, "dmesg")
    assert [(x.xid, x.pci_bus_id) for x in xids] == [(79, "0000:a1:00.0")]
    assert [(v, s) for v, _, s, m in _verdicts(xids)] == [(79, "fail")] and "x1" in _verdicts(xids)[0][3]


def test_gsp_line_without_an_xid_counts_as_xid_119_once(corpus):
    text = (corpus / "logs" / "dmesg_xid119.log").read_text()
    numbered = text.count("NVRM: Xid (")
    xids = kmsg.parse_log(text, "dmesg")
    assert len(xids) == numbered  # the rate-limit line names the GPU its Xid 119 lines name: not a second event
    line = next(ln for ln in text.splitlines() if "Rate limiting GSP RPC error prints" in ln)
    alone = kmsg.parse_log(line + "\n", "dmesg")  # the same line where the Xid lines were not kept
    assert [(x.xid, x.pci_bus_id) for x in alone] == [(119, "0000:9b:00.0")]
    assert [s for _, _, s, _ in _verdicts(alone)] == ["fail"]


def test_nvlink_xid_severity_from_the_message():
    fatal = kmsg.parse_log(XID149_FATAL + "\n", "dmesg")
    assert _verdicts(fatal)[0][2] == "fail" and "fatal (the driver's word)" in _verdicts(fatal)[0][3]
    assert kmsg.judged_as(149, fatal[0].message) == (149, "fatal")
    # a Nonfatal one (message as in public Xid 145 handling tests) warns
    nonfatal = kmsg.parse_log("NVRM: Xid (PCI:0000:b9:00): 145, RLW, nonfatal, cross-contain=0, injected=0, Link 3 "
                              "(0x00000004 0x00000001 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n")
    assert [(v, s) for v, _, s, _ in _verdicts(nonfatal)] == [(145, "warn")]


def test_caused_by_previous_xid_is_judged_by_that_xid():
    # NVIDIA/open-gpu-kernel-modules#1150 (journal lines of an 8-GPU node whose NVLinks went
    # inactive; verbatim): Xid 45 channel teardowns the driver marks as caused by Xid 149 / 145
    text = """\
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149
kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000002 caused by previous Xid 149
"""
    xids = kmsg.parse_log(text)
    assert kmsg.judged_as(45, xids[0].message) == (149, None)
    verdicts = _verdicts(xids)
    # judged as the NVLink Xid that tore the job's channels down: not contained to the link, a
    # GPU reset (never an application's pass)
    assert [(v, b, s) for v, b, s, _ in verdicts] == [(45, "0000:dc:00.0", "fail"), (45, "0000:ed:00.0", "fail")]
    assert verdicts[0][3] == ("Xid 45 (preemptive cleanup) x2, caused by previous Xid 149: judged as Xid 149: "
                              "reset the GPU (the driver: caused by previous Xid 149)")
    fatal = kmsg.parse_log(XID149_FATAL + "\n")
    assert [(v, s) for v, _, s, _ in _verdicts(fatal)] == [(149, "fail")]
    plain = kmsg.parse_log("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001\n")
    assert [s for _, _, s, _ in _verdicts(plain)] == ["pass"]  # Xid 45 on its own: an application's


def test_hardware_xid_list_unchanged_for_plain_lines():
    x = Xid(xid=79, pci_bus_id="0000:3b:00.0", message="GPU has fallen off the bus.", origin="t", line=1)
    assert [(v, s) for v, _, s, _ in _verdicts([x])] == [(79, "fail")]
