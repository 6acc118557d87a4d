"""Xids judged by NVIDIA's Xid catalog (slurmkit/health/xidcatalog.py) and by what the driver
states in the line: the kernel log as the driver writes it, on real logs.

Sources (lines verbatim unless said):
- NVIDIA/open-gpu-kernel-modules#1230 ("GSP timeout", driver 595.71.05, dmesg): GPU6's heartbeat
  timeout, "Memory Subsystem Error detected" and the "GSP Timeout" banner, no PCI address (one
  trailing blank removed);
- ublue-os/bazzite#4449 (journalctl -k): ``NVRM: GPU0 _kgspIsHeartbeatTimedOut`` / ``GSP RM
  heartbeat timed out``; NVIDIA/open-gpu-kernel-modules#1125 (dmesg): the same naming no GPU;
- NVIDIA/open-gpu-kernel-modules#1151 (journalctl, RTX 5080 after its Xid 79):
  ``RmInitAdapter failed! (0x22:0x56:894)`` / ``rm_init_adapter failed``; NVIDIA's driver README
  (560.35.03, "Known issues", quoted in pop-os/pop#3363): Xid 79 then RmInitAdapter failed;
- ../shared/corpus/gpu-logs/gpud_dmesg-time-format-iso_xid48-63-94.log (leptonai/gpud test data):
  Xid 48, 63, a contained Xid 94 ``RST: No, D-RST: No`` and its channel lines;
- NVIDIA's driver source (open-gpu-kernel-modules ``src/nvidia/src/kernel/gpu/arch/ampere/
  kern_gpu_ga100.c``, ``_gpuGenerateErrorLog_GA100``): the Xid 95 ``RST: Yes, D-RST: No`` line;
- NVIDIA/open-gpu-kernel-modules#502 (dmesg): Xid 109 CTX SWITCH TIMEOUT; leptonai/gpud#46
  (``dmesg --ctime``): Xid 13.
"""

from __future__ import annotations

from slurmkit.health import kmsg, xidcatalog
from slurmkit.health.checks import check_xid
from slurmkit.health.config import load_config
from slurmkit.health.state import GpuState, NodeState

GSP_1230 = """\
[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200
[   24.302484] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200
[   84.300451] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: currentTime: f420db7018cc0 >= f420db7018cc0
[   84.300463] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: Timeout was set to: 4000 msecs!
[   84.300476] NVRM: GPU6 kbusSendSysmembarSingle_GH100: - timeout error waiting for startToken = 0x3 cnt=24105122
[   84.300480] NVRM: GPU6 kgmmuCheckMemSubsysError_IMPL: Memory Subsystem Error detected. kbusSendSysmembarSingle failed.
[   84.300482] NVRM: GPU6 _kgspCheckIfMemsysError: Unexpected error when checking for memory subsystem error: 0x72
[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************
[   84.738339] NVRM: GPU6 RPC event history (CPU <- GSP):
"""
BAZZITE_4449 = """\
     Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 322227881 heartbeat 0 heartbeatWithOffsetMs 318098841 diff 4129040 timeout 5200
     Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out
"""
NO_GPU_1125 = """\
[37803.140477] NVRM: _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 3856513292 heartbeat 0 heartbeatWithOffsetMs 0 diff 3856513292 timeout 5200
[37803.140481] NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out
"""
INIT_1151 = """\
May 27 16:50:10 fedora kernel: NVRM: GPU 0000:09:00.0: rm_init_adapter failed, device minor number 0
May 27 16:50:10 fedora kernel: NVRM: osInitNvMapping: *** Cannot attach gpu
May 27 16:50:10 fedora kernel: NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter
May 27 16:50:10 fedora kernel: NVRM: GPU 0000:09:00.0: RmInitAdapter failed! (0x22:0x56:894)
"""
README_KNOWN_ISSUE = """\
NVRM: Xid (PCI:0000:09:00): 79, pid=2172, GPU has fallen off the bus.
NVRM: GPU 0000:09:00.0: GPU has fallen off the bus.
NVRM: GPU 0000:09:00.0: RmInitAdapter failed! (0x26:0x65:1239)
NVRM: GPU 0000:09:00.0: rm_init_adapter failed, device minor number 0
"""
XID95_DRIVER = "NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No"
XID109_502 = ("[ 7839.537911] NVRM: Xid (PCI:0000:26:00): 109, pid=55914, name=re8.exe, Ch 00000046, "
              "errorString CTX SWITCH TIMEOUT, Info 0x2c02c")
XID13_GPUD46 = ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, "
                "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter")


def _node(xids, buses=()):
    st = NodeState(node="n1", source="test")
    st.gpus = [GpuState(index=i, pci_bus_id=b) for i, b in enumerate(buses)]
    st.xids = xids
    return st


def _verdicts(xids, buses=()):
    return [(r.value, r.gpu_index, r.pci_bus_id, str(r.status), r.message)
            for r in check_xid(_node(xids, buses), load_config())]


EIGHT = [f"0000:{b}:00.0" for b in ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")]


def test_gsp_heartbeat_memsys_and_banner_naming_gpu6_fail_nvml_index_6():
    xids = kmsg.parse_log(GSP_1230, "dmesg")
    # both heartbeat lines, the memory-subsystem line and the banner; not the RPC history
    assert [(x.xid, x.pci_bus_id, x.gpu_index, x.line) for x in xids] == [
        (119, None, 6, 1), (119, None, 6, 2), (119, None, 6, 6), (119, None, 6, 8)]
    (v, gpu, bus, status, msg), = _verdicts(xids, EIGHT)
    assert (v, gpu, bus, status) == (119, 6, "0000:ba:00.0", "fail")
    assert msg == "Xid 119 (GSP RPC timeout) x4: reset the GPU"


def test_gpu_index_that_nvml_lacks_and_a_line_naming_no_gpu_fail_the_node():
    (v, gpu, bus, status, msg), = _verdicts(kmsg.parse_log(GSP_1230, "dmesg"), EIGHT[:4])
    assert (v, gpu, bus, status) == (119, None, None, "fail") and "GPU6 in the driver's words" in msg
    xids = kmsg.parse_log(NO_GPU_1125, "dmesg")
    assert [(x.xid, x.pci_bus_id, x.gpu_index) for x in xids] == [(119, None, None)] * 2
    assert [(v, g, b, s) for v, g, b, s, _ in _verdicts(xids, EIGHT)] == [(119, None, None, "fail")]


def test_journalctl_gpu0_heartbeat_maps_through_nvml_index():
    xids = kmsg.parse_log(BAZZITE_4449, "journalctl")
    assert [(x.xid, x.gpu_index) for x in xids] == [(119, 0), (119, 0)]
    assert [(v, g, b, s) for v, g, b, s, _ in _verdicts(xids, ["0000:05:00.0"])] == [(119, 0, "0000:05:00.0", "fail")]


def test_rm_init_adapter_failed_fails_the_gpu_it_names():
    xids = kmsg.parse_log(INIT_1151, "journalctl")
    assert [(x.xid, x.pci_bus_id, x.line) for x in xids] == [(143, "0000:09:00.0", 1), (143, "0000:09:00.0", 4)]
    assert xids[1].message == "RmInitAdapter failed! (0x22:0x56:894)"
    (v, gpu, bus, status, msg), = _verdicts(xids)
    assert (v, bus, status) == (143, "0000:09:00.0", "fail") and "x2: reset the GPU" in msg
    # after an Xid 79 (the driver README's sequence): the GPU fails on both counts
    after79 = kmsg.parse_log(README_KNOWN_ISSUE)
    assert sorted((v, s) for v, _, _, s, _ in _verdicts(after79)) == [(79, "fail"), (143, "fail")]
    assert next(m for v, *_, m in _verdicts(after79) if v == 79) == "Xid 79 (GPU fell off the bus) x1: reboot the node"  # its twin line counted once


def test_contained_xid_94_rst_no_does_not_drain(corpus):
    text = (corpus / "gpu-logs" / "gpud_dmesg-time-format-iso_xid48-63-94.log").read_text()
    xids = kmsg.parse_log(text, "dmesg")
    line94 = [x for x in xids if "RST:" in x.message]
    assert [x.message for x in line94] == ["pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"]
    (v, _, bus, status, msg), = _verdicts(line94)
    assert (v, bus, status) == (94, "0000:19:00.0", "pass")
    assert msg == "Xid 94 (contained error) x1: application error, ignored (the driver: RST: No, D-RST: No)"
    channels = [x for x in xids if x.xid == 94 and "RST:" not in x.message]
    assert len(channels) == 8 and {s for _, _, _, s, _ in _verdicts(channels)} == {"pass"}  # the catalog: RESTART_APP
    # the whole log: the DBE (Xid 48) drains; 63 (row remap event: IGNORE) and 94 do not
    whole = {v: s for v, _, _, s, _ in _verdicts(xids)}
    assert whole == {48: "fail", 63: "pass", 94: "pass"}


def test_xid_95_rst_yes_needs_a_reset_and_flags_decide_for_94():
    xids = kmsg.parse_log(XID95_DRIVER + "\n")
    (v, _, bus, status, msg), = _verdicts(xids)
    assert (v, bus, status) == (95, "0000:01:00.0", "fail") and "reset the GPU (the driver: RST: Yes, D-RST: No)" in msg
    assert xidcatalog.judge(94, "Contained: CE User Channel (0x9). RST: Yes, D-RST: No")[2:4] == ("fail", "reset the GPU")
    assert xidcatalog.judge(94, "Contained: SM (0x1). RST: No, D-RST: Yes")[2:4] == ("fail", "drain and reset the GPU")
    assert xidcatalog.judge(95, "Uncontained: FBHUB. RST: No, D-RST: No")[2] == "warn"
    assert xidcatalog.judge(95, "pid=1, name=x, Ch 00000008")[2] == "fail"  # no flags: the catalog's RESET_GPU


def test_actions_follow_the_catalog_both_ways():
    assert [(v, s) for v, _, _, s, _ in _verdicts(kmsg.parse_log(XID109_502 + "\n"))] == [(109, "fail")]
    assert [(v, s) for v, _, _, s, _ in _verdicts(kmsg.parse_log(XID13_GPUD46 + "\n"))] == [(13, "pass")]
    # the catalog's rows for the Xids the old list judged wrongly
    for xid in (46, 109, 136, 143, 158):
        assert xidcatalog.resolution(xid) == "RESET_GPU" and xidcatalog.judge(xid, "")[2] == "fail", xid
    for xid in (69, 94):
        assert xidcatalog.resolution(xid) == "RESTART_APP" and xidcatalog.judge(xid, "")[2] == "pass", xid
    assert xidcatalog.judge(79, "")[2:] == ("fail", "reboot the node", "NVIDIA Xid catalog: RESTART_BM")
    assert xidcatalog.judge(999, "")[2] == "warn"  # unknown to the catalog: shown, not drained
    assert len(xidcatalog.CATALOG) == 172 and xidcatalog.CATALOG[154][0] == "GPU_RECOVERY_ACTION_CHANGED"
