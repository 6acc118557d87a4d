"""Pure pieces of the hooks: reason ownership, scontrol parsing, gres.conf mapping, textfile, spool."""

import os

import pytest

from slurmkit.health.state import GpuState, NodeState
from slurmkit.hooks import drain, gres, spool, textfile
from slurmkit.hooks.config import HookConfigError, parse as parse_config
from slurmkit.slurm import gres_conf

@pytest.mark.parametrize("reason, ours, take", [
    (None, False, True),
    ("", False, True),
    ("Prolog error", False, False),
    ("Epilog error", False, False),
    ("Kill task failed", False, False),
    ("slurmkit: xid GPU0 GPU-1: 79", True, True),
    ("slurmkit: nvml-timeout", True, True),
    ("maintenance: PSU swap", False, False),
    ("NHC: check_fs_mount: /scratch", False, False),
    ("not slurmkit: x", False, False),
])
def test_reason_ownership(reason, ours, take):
    assert drain.is_ours(reason) is ours
    assert drain.may_take_over(reason) is take


def test_parse_show_node():
    line = ("NodeName=n3 Arch=x86_64 CoresPerSocket=4 CPUAlloc=0 State=IDLE+DRAIN ThreadsPerCore=1 "
            "Partitions=gpu Reason=slurmkit: ecc_volatile_uncorrectable GPU2 GPU-abc: 3 [root@2026-11-30T20:00:00]")
    assert drain.parse_show_node(line) == {"state": "IDLE+DRAIN",
                                           "reason": "slurmkit: ecc_volatile_uncorrectable GPU2 GPU-abc: 3"}
    assert drain.parse_show_node("NodeName=n1 State=IDLE Partitions=gpu")["reason"] is None
    mid = "NodeName=n1 State=DOWN+DRAIN Reason=Prolog error [slurm@2026-11-30T20:00:00] Comment=(null)"
    assert drain.parse_show_node(mid)["reason"] == "Prolog error"


def test_sanitize_reason():
    from slurmkit.health.result import REASON_MAX

    assert drain.sanitize("a\nb\tc" + "x" * 300) == ("a b c" + "x" * 300)[:REASON_MAX - 3] + "..."
    assert drain.sanitize("slurmkit: xid GPU1 0000:9b:00.0: " + "Xid 79 " * 30).endswith("Xid 79...")


GRES = """\
# gres.conf
AutoDetect=off
NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-3
NodeName=n3 Name=gpu Type=a100 File=/dev/nvidia1
NodeName=n3 Name=gpu Type=a100 File=/dev/nvidia0
Name=mps Count=100
"""


def test_gres_files_per_node_in_index_order():
    lines = gres_conf.parse(GRES)
    assert gres.node_gpu_files(lines, "n2") == [f"/dev/nvidia{i}" for i in range(4)]
    # position, not the number in the name, is Slurm's index
    assert gres.node_gpu_files(lines, "n3") == ["/dev/nvidia1", "/dev/nvidia0"]
    assert gres.node_gpu_files(lines, "cpu1") is None


def test_gres_corpus_dgx1(corpus):
    lines = gres_conf.parse((corpus / "slurm" / "gres.conf.dgx1").read_text())
    files = gres.node_gpu_files(lines, "anynode")
    assert files == [f"/dev/nvidia{i}" for i in range(8)]


def test_gres_errors_name_the_line():
    with pytest.raises(gres.GresError) as info:
        gres_conf.parse("Name=gpu File=/dev/nvidia0\nbogus\n", "/etc/slurm/gres.conf")
    assert info.value.line == 2 and "/etc/slurm/gres.conf:2:" in str(info.value)
    with pytest.raises(gres.GresError) as info:   # read when the file is read, as slurmd does
        gres_conf.parse("AutoDetect=nvml\nNodeName=n1 Name=gpu Count=eight\n")
    assert "Count='eight': not a count" in str(info.value) and info.value.line == 2


def test_gres_autodetect_gpus_are_matched_through_nvml():
    """``AutoDetect=nvml`` with ``Name=gpu Type=h100 Count=4`` and no File=: Slurm's index k is
    the GPU with the k-th smallest NVML index (gres_gpu.c sorts by gpu_nvml.c's NVLink matrix);
    ``AutoDetect=nvidia`` (no matrix) keeps slurmd's File sort: the k-th smallest minor."""
    lines = gres_conf.parse("AutoDetect=nvml\nNodeName=n[1-2] Name=gpu Type=h100 Count=4\n")
    files = gres.node_gpu_files(lines, "n2")
    assert files == [None] * 4 and gres.node_gpu_files(lines, "cpu1") is None
    st = NodeState(node="n2", source="t")
    for nvml_index, minor in enumerate([3, 1, 0, 2]):  # NVML order != minor order
        st.gpus.append(GpuState(index=nvml_index, uuid=f"GPU-{nvml_index}", pci_bus_id=f"0000:0{nvml_index}:00.0",
                                minor_number=minor))
    got = gres.map_job_gpus([0, 3], files, st, autodetect="nvml")
    assert [(g.minor, g.nvml_index, g.file) for g in got] == [(3, 0, "/dev/nvidia3"), (2, 3, "/dev/nvidia2")]
    got = gres.map_job_gpus([0, 3], files, st, autodetect="nvidia")
    assert [(g.minor, g.nvml_index, g.file) for g in got] == [(0, 2, "/dev/nvidia0"), (3, 0, "/dev/nvidia3")]


def test_job_gpus_and_mapping():
    assert gres.parse_job_gpus("0,2") == [0, 2] and gres.parse_job_gpus("") == [] and gres.parse_job_gpus(None) == []
    with pytest.raises(ValueError):
        gres.parse_job_gpus("0,gpu1")
    state = NodeState(node="n1", source="test", gpus=[
        GpuState(index=0, uuid="GPU-a", pci_bus_id="0000:19:00.0", minor_number=7),
        GpuState(index=1, uuid="GPU-b", pci_bus_id="0000:3b:00.0", minor_number=5)])
    minors = {"/dev/nvidia0": 5, "/dev/nvidia1": 7}
    got = gres.map_job_gpus([1, 0], ["/dev/nvidia0", "/dev/nvidia1"], state, minor_of=minors.__getitem__)
    assert [(g.index, g.minor, g.nvml_index, g.uuid) for g in got] == [(1, 7, 0, "GPU-a"), (0, 5, 1, "GPU-b")]
    with pytest.raises(ValueError):
        gres.map_job_gpus([4], ["/dev/nvidia0"], state)


def test_textfile_parses_with_prometheus_client(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    fams = [("x_status", "gauge", "help with \\ backslash", [({"check": 'we"ird\nname', "gpu": "0"}, 2)]),
            ("x_errors_total", "counter", "c", [({"node": "n1"}, 3)]),
            ("x_seconds", "gauge", "s", [({}, 0.125)])]
    path = tmp_path / "m.prom"
    textfile.write(path, textfile.render(fams))
    parsed = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    s = parsed["x_status"].samples[0]
    assert s.labels == {"check": 'we"ird\nname', "gpu": "0"} and s.value == 2
    assert parsed["x_errors"].type == "counter" and parsed["x_errors"].samples[0].value == 3
    assert parsed["x_seconds"].samples[0].value == 0.125
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_energy_delta():
    assert spool.energy_delta(1000, 5000) == (4000, False)
    assert spool.energy_delta(5000, 1200) == (1200, True)
    assert spool.energy_delta(None, 5) == (None, False)


def test_spool_read_reports_bad_lines(tmp_path):
    p = tmp_path / "energy.jsonl"
    good = spool.record("9", "n1", "u", 1, 1.0, 2.0, [spool.GpuEnergy(0, start_energy_mj=1, end_energy_mj=4)], "live")
    import json

    p.write_text(json.dumps(good.to_json()) + "\n{broken\n" + json.dumps({"v": 99, "job_id": "8"}) + "\n")
    recs, problems = spool.read(p)
    assert [r.energy_mj_total for r in recs] == [3]
    assert [x.split(":")[1] for x in problems] == ["2", "3"]


@pytest.mark.parametrize("text, words", [
    ('slurm_conf = "/x"\nfoo = 1\n', "foo: unknown key"),
    ('slurm_conf = "/x"\nresume_after = 0\n', "resume_after"),
    ('slurm_conf = "/x"\ndeadline_s = "8"\n', "deadline_s: wrong type"),
    ('mode = "enforce"\n', "slurm_conf: missing"),
    ('slurm_conf = "/x"\n[nodes.n1]\nsnapshot = 3\n', "nodes.n1.snapshot"),
    ('slurm_conf = "/x"\n[nodes.n1]\nlive = true\n', "nodes.n1"),
])
def test_hook_config_errors(text, words):
    with pytest.raises(HookConfigError) as info:
        parse_config(text, "/etc/slurm/slurmkit-hooks.toml")
    assert words in str(info.value) and str(info.value).startswith("/etc/slurm/slurmkit-hooks.toml: ")


def test_hook_config_relative_paths_and_defaults():
    cfg = parse_config('slurm_conf = "slurm.conf"\n[nodes.n3]\nsnapshot = "snaps/n3.json"\n', "/etc/slurm/h.toml")
    assert cfg.slurm_conf == "/etc/slurm/slurm.conf"
    assert cfg.snapshot_for("n3") == "/etc/slurm/snaps/n3.json" and cfg.snapshot_for("n1") is None
    assert cfg.mode is None and cfg.deadline_s is None  # unset: the profile's [health] values
    assert cfg.resume_after == 3 and cfg.scontrol_timeout_s == 5.0
    from slurmkit.profile.health import Health

    over = cfg.over_profile(Health(mode="observe", deadline_s=2.5))
    assert (over.mode, over.deadline_s) == ("observe", 2.5)
    set_ = parse_config('slurm_conf = "s"\nmode = "enforce"\ndeadline_s = 4\n', "/h.toml")
    assert (set_.over_profile(Health(mode="observe", deadline_s=2.5)).mode, set_.deadline_s) == ("enforce", 4.0)


def test_job_of_a_process_from_its_slurm_cgroup_or_environment(tmp_path):
    from slurmkit.hooks import jobproc

    def proc(pid, cgroup, environ=b""):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "cgroup").write_text(cgroup)
        (d / "environ").write_bytes(environ)

    # cgroup v2 (Slurm 22.05+ cgroup/v2) and v1 (freezer / memory hierarchies)
    proc(1, "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n")
    proc(2, "12:memory:/slurm/uid_1000/job_77/step_batch\n4:freezer:/slurm/uid_1000/job_77/step_batch\n")
    proc(3, "0::/user.slice/user-1000.slice/session-3.scope\n", b"HOME=/home/a\0SLURM_JOB_ID=991\0")
    proc(4, "0::/user.slice/user-1000.slice/session-3.scope\n", b"HOME=/home/a\0")
    assert [jobproc.job_of(p, str(tmp_path)) for p in (1, 2, 3, 4, 5)] == ["4242", "77", "991", None, None]
    defs = tmp_path / "login.defs"
    defs.write_text("# comment\nUID_MIN\t\t\t 2000\nUID_MAX 60000\n")
    assert jobproc.uid_min(str(defs)) == 2000 and jobproc.uid_min(str(tmp_path / "none")) == 1000
    v = jobproc.verdict
    assert v(9, 1000, "5", "5", 1000).kill
    assert not v(9, 0, "5", "5", 0).kill and "root" in v(9, 0, "5", "5", 0).why
    assert not v(9, 999, "5", "5", 999).kill and "system uid 999" in v(9, 999, "5", "5", 999).why
    assert not v(9, 1000, "6", "5", 1000).kill and not v(9, 1000, None, "5", 1000).kill
    assert not v(9, 1001, "5", "5", 1000).kill and not v(9, None, "5", "5", 1000).kill


def test_main_runs_the_hook_with_the_cycle_collector_off_and_restores_it(node, monkeypatch):
    import gc

    from slurmkit.hooks import flows, main

    seen, moves = [], []
    monkeypatch.setitem(flows.FLOWS, "prolog", lambda run: seen.append(gc.isenabled()) or 0)
    for name in ("freeze", "unfreeze"):
        monkeypatch.setattr(gc, name, lambda real=getattr(gc, name), name=name: (moves.append(name), real())[1])
    assert gc.isenabled()
    assert main.main("prolog", str(node.cfg_path), env={"SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "5"}) == 0
    assert seen == [False] and gc.isenabled()
    assert moves == ["freeze", "unfreeze"] and gc.get_freeze_count() == 0  # the run's objects to the oldest generation
    gc.freeze()
    try:  # a caller's frozen objects stay frozen: no move
        moves.clear()
        frozen = gc.get_freeze_count()
        assert main.main("prolog", str(node.cfg_path), env={"SLURMD_NODENAME": "n1"}) == 0
        assert moves == [] and gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    gc.disable()
    try:  # a caller that had it off keeps it off
        moves.clear()
        assert main.main("prolog", str(node.cfg_path), env={"SLURMD_NODENAME": "n1"}) == 0
        assert not gc.isenabled() and moves == []
    finally:
        gc.enable()
    assert (node.textfile_dir / "slurmkit_n1_prolog.prom").exists()
