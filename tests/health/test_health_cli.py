"""``slurmkit health check|snapshot|import`` exit codes, JSON shape and bad-input errors, and the
kernel-log Xid reader with its cursor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.health.errors import CaptureError
from slurmkit.health.kmsg import read_kmsg
from slurmkit.health.source import SourceError, load_capture


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.corpus
def test_check_exit_codes_and_json_shape(corpus):
    q = corpus / "nvidia-smi-q"
    assert run("health", "check", "--from", str(q / "dual_a5000-v13.xml")).exit_code == 0
    r = run("--json", "health", "check", "--from", str(q / "a10_row_remap_pending.txt"))
    assert r.exit_code == 1
    rep = json.loads(r.output)
    assert set(rep) >= {"node", "source", "status", "results"} and rep["status"] == "fail"
    fail = [x for x in rep["results"] if x["status"] == "fail"][0]
    assert set(fail) >= {"check", "status", "gpu_index", "uuid", "pci_bus_id", "value", "limit"}
    assert fail["pci_bus_id"] == "0000:07:00.0"
    r = run("health", "check", "--from", str(q / "dual_a5000-v13.xml"), "--kernel-log", str(corpus / "logs" / "dmesg_xid119.log"))
    assert r.exit_code == 1 and "xid" in r.output and "119" in r.output


@pytest.mark.corpus
def test_import_then_check_the_snapshot(corpus, tmp_path):
    out = tmp_path / "h100.json"
    r = run("health", "import", str(corpus / "nvidia-smi-q" / "8xH100_hw_slowdown_power_brake.txt"), "-o", str(out),
            "--node", "gpu17")
    assert r.exit_code == 0, r.output
    snap = json.loads(out.read_text())
    assert snap["node"] == "gpu17" and len(snap["gpus"]) == 8
    assert snap["gpus"][4]["values"]["clock_event_reasons"]["source"].startswith("nvidia-smi:")
    r = run("--json", "health", "check", "--from", str(out))
    assert r.exit_code == 0 and json.loads(r.output)["status"] == "warn"


@pytest.mark.parametrize("content,line,needle", [
    ('{"slurmkit_snapshot": 1, "gpus": [', 1, "bad JSON"),
    ('{\n "slurmkit_snapshot": 1,\n "gpus": [}\n', 3, "bad JSON"),
    ('{"slurmkit_snapshot": 99, "gpus": []}', None, "not a valid slurmkit snapshot"),
    ('{"slurmkit_snapshot": 1, "gpus": [{"values": {}}]}', None, "not a valid slurmkit snapshot"),
    ('{"slurmkit_snapshot": 1, "gpus": [{"index": 0, "values": {"temperature_c": 5}}]}', None, "want an object"),
    ("hello\n", 1, "not a slurmkit snapshot"),
    ("<?xml version='1.0'?>\n<nvidia_smi_log>\n<gpu id='0'><uuid>x</gpu>\n", 3, "malformed XML"),
    ("<?xml version='1.0'?>\n<nvidia_smi_log><attached_gpus>1</attached_gpus>\n<gpu id='00000000:01:00.0'>\n"
     "<fb_memory_usage><used>lots</used></fb_memory_usage></gpu></nvidia_smi_log>\n", 4, "want a number"),
    ("==============NVSMI LOG==============\n\nDriver Version : 535.1\n\nGPU 00000000:07:00.0\n"
     "    FB Memory Usage\n        Used : many MiB\n", 7, "want a number"),
    ("==============NVSMI LOG==============\n\nGPU 00000000:07:00.0\n    Product Name : X\n"
     "    Weird:thing\n", 5, "want 'key : value'"),
    ("==============NVSMI LOG==============\n\nDriver Version : 535.1\n", 1, "no 'GPU <bus id>' section"),
])
def test_bad_capture_is_a_clear_error_with_file_and_line(tmp_path, content, line, needle):
    f = tmp_path / "bad.capture"
    f.write_text(content)
    with pytest.raises(SourceError) as ei:
        load_capture(f)
    assert ei.value.file == str(f) and needle in str(ei.value)
    if line is not None:
        assert ei.value.line == line and f"{f}:{line}:" in str(ei.value)
    r = run("health", "check", "--from", str(f))
    assert r.exit_code == 2 and str(f) in r.output and "Traceback" not in r.output


def test_unreadable_files_exit_2(tmp_path):
    r = run("health", "check", "--from", str(tmp_path / "missing.json"))
    assert r.exit_code == 2 and "missing.json" in r.output
    b = tmp_path / "bin.json"
    b.write_bytes(b"{\xff\xfe}")
    r = run("health", "import", str(b), "-o", str(tmp_path / "o.json"))
    assert r.exit_code == 2 and "not UTF-8" in r.output


@pytest.mark.corpus
def test_bad_profile_health_table_exit_2(tmp_path, corpus):
    p = tmp_path / "site.toml"
    p.write_text("extends = 'sandbox'\n[health]\nmode = 'enforce'\n[health.thresholds]\nretired_pages_fail = 'x'\n")
    r = run("health", "check", "--from", str(corpus / "nvidia-smi-q" / "tesla-t4.xml"), "--site", str(p))
    assert r.exit_code == 2 and f"{p}:5: health.thresholds.retired_pages_fail: expected a number" in r.output
    p.write_text("[health\n")
    r = run("health", "check", "--from", str(corpus / "nvidia-smi-q" / "tesla-t4.xml"), "--site", str(p))
    assert r.exit_code == 2 and f"{p}:1: TOML syntax error" in r.output
    # the old option name still works
    r = run("health", "check", "--from", str(corpus / "nvidia-smi-q" / "tesla-t4.xml"), "--profile", str(p))
    assert r.exit_code == 2 and f"{p}:1: TOML syntax error" in r.output


@pytest.mark.corpus
def test_profile_pins_change_the_verdict(tmp_path, corpus):
    t4 = corpus / "nvidia-smi-q" / "tesla-t4.xml"
    drv = load_capture(t4).driver_version
    p = tmp_path / "site.toml"
    p.write_text(f"extends = 'sandbox'\n[health]\ndriver_version = '{drv}'\n[health.checks]\npersistence_mode = false\npcie_width = false\n")
    r = run("--json", "health", "check", "--from", str(t4), "--site", str(p), "--node", "n1")
    rep = json.loads(r.output)
    assert rep["status"] == "pass" and ["pass"] == [x["status"] for x in rep["results"] if x["check"] == "driver_version"]
    r = run("--json", "health", "check", "--from", str(t4), "--site", str(p), "--node", "elsewhere")
    rep = json.loads(r.output)  # a node the profile does not list: said (warn), the exit still 0
    assert r.exit_code == 0 and rep["status"] == "warn"
    assert [x["status"] for x in rep["results"] if x["check"] == "node_type"] == ["warn"]


KMSG = ("6,100,1000,-;usb 1-1: new device\n"
        "3,101,2000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=x, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n"
        "4,102,3000,-;NVRM: Xid (PCI:0000:19:00): 13, pid=55, name=python, Graphics Exception\n")


def test_kmsg_cursor_only_new_records(tmp_path):
    dev = tmp_path / "kmsg"  # /dev/kmsg's record format, from a file we wrote
    dev.write_text(KMSG)
    cur = tmp_path / "cursor"
    first = read_kmsg(cur, dev)
    assert [(x.xid, x.pci_bus_id, x.line) for x in first] == [(79, "0000:3b:00.0", 101), (13, "0000:19:00.0", 102)]
    assert cur.read_text().strip() == "102"
    assert read_kmsg(cur, dev) == []
    dev.write_text(KMSG + "3,103,4000,-;NVRM: Xid (PCI:0000:3b:00): 48, DBE\n")
    assert [x.xid for x in read_kmsg(cur, dev)] == [48]
    dev.write_text("3,5,10,-;NVRM: Xid (PCI:0000:3b:00): 74, NVLink\n")  # sequence restarted: reboot
    assert [x.xid for x in read_kmsg(cur, dev)] == [74]


def test_real_dev_kmsg_is_readable_or_own_trouble(tmp_path):
    try:
        read_kmsg(tmp_path / "cursor")
    except OSError as exc:  # not root / no /dev/kmsg: the live source records it as our own error
        pytest.skip(f"/dev/kmsg not readable here: {exc}")
    assert (tmp_path / "cursor").read_text().strip().isdigit()


def test_health_modules_import_nothing_heavy():
    code = ("import sys, slurmkit.health.checks, slurmkit.health.runner, slurmkit.health.source, "
            "slurmkit.health.nvsmi, slurmkit.health.kmsg, slurmkit.health.config, slurmkit.health.nvml_source;"
            "print(sorted(m for m in ('pandas','matplotlib','jinja2','click','prometheus_client','pynvml') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == []


def test_old_schema_ecc_totals_and_n_a_values(tmp_path):
    f = tmp_path / "v100.xml"  # the pre-Ampere ECC layout (single_bit / double_bit totals), our own fixture
    f.write_text("<?xml version='1.0'?>\n<nvidia_smi_log><driver_version>470.1</driver_version>"
                 "<attached_gpus>1</attached_gpus>\n<gpu id='00000000:3B:00.0'><uuid>GPU-v</uuid>"
                 "<minor_number>0</minor_number><ecc_errors><volatile>"
                 "<single_bit><device_memory>5</device_memory><total>7</total></single_bit>"
                 "<double_bit><device_memory>2</device_memory><total>2</total></double_bit></volatile>"
                 "</ecc_errors><temperature><gpu_temp>N/A</gpu_temp></temperature></gpu></nvidia_smi_log>\n")
    s = load_capture(f)
    g = s.gpus[0]
    assert (g.pci_bus_id, g.get("ecc_volatile_uncorrectable"), g.get("ecc_volatile_correctable")) == ("0000:3b:00.0", 2, 7)
    assert g.rc("temperature_c") == "NOT_AVAILABLE" and g.get("temperature_c") is None
    r = run("--json", "health", "check", "--from", str(f))
    assert r.exit_code == 1
    assert [x["check"] for x in json.loads(r.output)["results"] if x["status"] == "fail"] == ["ecc_volatile_uncorrectable"]


def test_bad_capture_value_names_its_field(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text("<?xml version='1.0'?>\n<nvidia_smi_log><attached_gpus>1</attached_gpus>\n<gpu id='00000000:01:00.0'>\n"
                 "<fb_memory_usage><used>lots</used></fb_memory_usage></gpu></nvidia_smi_log>\n")
    with pytest.raises(CaptureError) as ei:
        load_capture(f)
    assert (ei.value.file, ei.value.line, ei.value.key) == (str(f), 4, "fb_memory_usage/used")
    assert str(ei.value) == f"{f}:4: fb_memory_usage/used: want a number, got 'lots'"


def test_first_kmsg_read_is_a_baseline_then_new_xids_are_judged(tmp_path):
    from slurmkit.health.checks import run_checks
    from slurmkit.health.config import load_config
    from slurmkit.health.state import GpuState, NodeState

    dev = tmp_path / "kmsg"
    dev.write_text(KMSG)
    cur = tmp_path / "kmsg-healthcheck.cursor"
    st = NodeState(node="n1", source="t")
    st.gpus = [GpuState(index=0, uuid="GPU-0", pci_bus_id="0000:3b:00.0")]
    st.xids = read_kmsg(cur, dev)  # first run after install: this boot's old XIDs
    assert all(x.origin.startswith("baseline:") for x in st.xids)
    xr = [r for r in run_checks(st, load_config()) if r.check == "xid"]
    assert [(r.value, r.status) for r in xr] == [(13, "pass"), (79, "warn")]
    assert "baseline, not a drain" in xr[1].message
    # the next XID is judged; an NVRM line saying a GPU fell off the bus counts without a number
    dev.write_text(KMSG + "3,103,4000,-;NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.\n")
    st.xids = read_kmsg(cur, dev)
    assert [(x.xid, x.pci_bus_id, x.origin) for x in st.xids] == [(79, "0000:3b:00.0", str(dev))]
    xr = [r for r in run_checks(st, load_config()) if r.check == "xid"]
    assert [(r.value, r.status, r.gpu_index) for r in xr] == [(79, "fail", 0)]
    assert xr[0].reason() == "slurmkit: xid GPU0 0000:3b:00.0: Xid 79 GPU fell off the bus"


def test_each_hook_keeps_its_own_kmsg_cursor(tmp_path):
    """A health check during a job does not hide the job's XIDs from its epilog."""
    from slurmkit.hooks import nodestate

    dev = tmp_path / "kmsg"
    dev.write_text(KMSG)
    cursors = {h: nodestate.kmsg_cursor(tmp_path, "n1", h) for h in ("prolog", "epilog", "healthcheck")}
    assert len(set(cursors.values())) == 3
    (tmp_path / "n1").mkdir(exist_ok=True)
    for c in cursors.values():
        read_kmsg(c, dev)  # each consumer's baseline
    dev.write_text(KMSG + "3,103,4000,-;NVRM: Xid (PCI:0000:3b:00): 48, DBE\n")
    assert [x.xid for x in read_kmsg(cursors["healthcheck"], dev)] == [48]   # during the job
    assert [x.xid for x in read_kmsg(cursors["epilog"], dev)] == [48]        # still seen at its end


def test_snapshot_takes_site_and_sysfs_like_check(healthy, tmp_path, monkeypatch):
    from fake_sysfs import load_module, sandbox_tree, set_aer, set_port

    monkeypatch.delenv("SLURMKIT_SITE", raising=False)
    path, base = healthy
    root = sandbox_tree(tmp_path / "sys")
    set_port(root, "mlx5_2", rate=200)
    load_module(root, "nvidia_peermem")
    set_aer(root, base["gpus"][1]["pci_bus_id"], correctable=12)
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\ngpudirect_rdma = true\n')
    out = tmp_path / "n2.json"
    r = run("health", "snapshot", "--from", str(path), "--site", str(site), "--node", "n2", "--sysfs", str(root),
            "-o", str(out))
    assert r.exit_code == 0, r.output
    snap = json.loads(out.read_text())
    assert [(p["hca"], p["rate_gbps"]) for p in snap["ib_ports"]] == [
        ("mlx5_0", 400.0), ("mlx5_1", 400.0), ("mlx5_2", 200.0), ("mlx5_3", 400.0), ("mlx5_4", 100.0)]
    assert snap["services"] == {"peermem": {"module": "nvidia_peermem"}}
    assert snap["gpus"][1]["values"]["pcie_aer_correctable"]["value"] == 12  # replayed from the tree
    # the recorded snapshot judges the same, without the tree
    r = run("--json", "health", "check", "--from", str(out), "--site", str(site), "--node", "n2")
    rep = json.loads(r.output)
    assert r.exit_code == 1 and [x["place"] for x in rep["results"] if x["status"] == "fail"] == ["mlx5_2/1"]
    # without --site nothing beside NVML is recorded, as before
    run("health", "snapshot", "--from", str(path), "-o", str(out))
    assert json.loads(out.read_text())["ib_ports"] is None
