"""The hook flows run through the installed shims, on snapshots recorded from the fake NVML."""

import json
import os
import subprocess
import sys
import time


from nodeenv import nvml_gpu_of, record_snapshot, set_value, where

from slurmkit.health.result import fit_reason

from slurmkit.hooks import spool


def test_healthy_prolog_maps_gpus_and_makes_no_rpc(node, healthy):
    path, snap = healthy
    node.write_config({"n1": path})
    r = node.run(node.prolog)
    assert r.returncode == 0, r.stderr
    assert "own trouble" not in r.stderr  # scontrol is unreachable here: any RPC would show
    rec = json.loads((node.state_dir / "n1" / "job-101.json").read_text())
    for row in rec["gpus"]:
        g = nvml_gpu_of(node, snap, row["index"])
        assert row["uuid"] == g["uuid"] and row["pci_bus_id"] == g["pci_bus_id"]
        assert row["nvml_index"] == g["index"] and row["minor"] == g["minor_number"]
        assert row["start_energy_mj"] == g["values"]["total_energy_mj"]["value"]
    assert [row["index"] for row in rec["gpus"]] == [0, 2]
    # index, minor and NVML order all differ in this layout
    assert any(row["index"] != row["minor"] != row["nvml_index"] for row in rec["gpus"])
    assert node.metric("n1", "prolog", "slurmkit_hook_exit_code") == 0
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 0
    # a healthy node's results: one count of the passes, no series per result
    assert not any(k[0] == "slurmkit_health_check_status" for k in node.textfile("n1", "prolog"))
    assert node.metric("n1", "prolog", "slurmkit_health_checks_passed") > 20
    assert "would enable accounting mode" in r.stderr


def test_epilog_spools_energy_delta_and_kills_only_the_users_processes(node, healthy, fake_nvml, tmp_path):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0
    later = record_snapshot(fake_nvml, tmp_path / "later.json", energy_mj=snap["gpus"][0]["values"]
                            ["total_energy_mj"]["value"] + 5_000_000)
    job_gpu = nvml_gpu_of(node, later, 2)["index"]
    later["gpus"][job_gpu]["values"]["processes"] = {
        "value": [{"pid": 4242, "used_mib": 100, "uid": 1000, "job_id": "101"},
                  {"pid": 4343, "used_mib": 100, "uid": 2000, "job_id": "102"},
                  {"pid": 4444, "used_mib": 100, "uid": 1000, "job_id": "103"},   # the user's other job
                  {"pid": 4545, "used_mib": 100, "uid": 1000},                    # job unknown
                  {"pid": 4646, "used_mib": 100, "uid": 0, "job_id": "101"}],     # root's
        "source": "nvmlDeviceGetComputeRunningProcesses_v3", "rc": "SUCCESS"}
    (tmp_path / "later.json").write_text(json.dumps(later))
    node.write_config({"n1": tmp_path / "later.json"})
    r = node.run(node.epilog)
    assert r.returncode == 0, r.stderr
    assert "would kill pid 4242" in r.stderr
    for pid in (4343, 4444, 4545, 4646):
        assert f"would kill pid {pid}" not in r.stderr and f"leaving pid {pid}" in r.stderr
    assert "pid 4444 belongs to job 103, not 101: left alone" in r.stderr
    assert "pid 4545 of uid 1000: its job is unknown" in r.stderr
    assert "pid 4646 belongs to root: never killed" in r.stderr
    assert "would reset application clocks" in r.stderr
    recs, problems = spool.read(node.spool_dir / spool.file_name("n1"))
    assert problems == [] and len(recs) == 1
    rec = recs[0]
    assert rec.job_id == "101" and rec.node == "n1" and rec.user == "alice" and rec.uid == 1000
    assert rec.source == "measured" and rec.end_s >= rec.start_s
    total = 0
    for row in rec.gpus:
        before = nvml_gpu_of(node, snap, row.index)["values"]["total_energy_mj"]["value"]
        after = nvml_gpu_of(node, later, row.index)["values"]["total_energy_mj"]["value"]
        assert row.energy_mj == after - before and not row.counter_reset
        total += after - before
    assert rec.energy_mj_total == total > 0
    assert oct(os.stat(node.spool_dir).st_mode & 0o777) == "0o700"
    assert oct(os.stat(node.spool_dir / spool.file_name("n1")).st_mode & 0o777) == "0o600"
    assert not (node.state_dir / "n1" / "job-101.json").exists()


def test_energy_counter_reset_is_flagged(node, healthy, fake_nvml, tmp_path):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0
    reset = record_snapshot(fake_nvml, tmp_path / "reset.json", energy_mj=1000)
    node.write_config({"n1": tmp_path / "reset.json"})
    assert node.run(node.epilog).returncode == 0
    rec = spool.read(node.spool_dir / spool.file_name("n1"))[0][0]
    for row in rec.gpus:
        assert row.counter_reset is True
        assert row.energy_mj == nvml_gpu_of(node, reset, row.index)["values"]["total_energy_mj"]["value"]
    assert "lower bound" in rec.reason


def test_epilog_without_prolog_record_says_unavailable(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    assert node.run(node.epilog, job_id="555").returncode == 0
    rec = spool.read(node.spool_dir / spool.file_name("n1"))[0][0]
    assert rec.source == "unavailable" and "no prolog record" in rec.reason
    assert rec.energy_mj_total is None


def _failing(node, snap, tmp_path, slurm_index=2, errors=3):
    g = nvml_gpu_of(node, snap, slurm_index)
    bad = set_value(snap, g["index"], "ecc_volatile_uncorrectable", errors)
    p = tmp_path / "failing.json"
    p.write_text(json.dumps(bad))
    return p, g


def test_observe_mode_logs_what_it_would_drain(node, healthy, tmp_path):
    path, snap = healthy
    p, g = _failing(node, snap, tmp_path)
    node.write_config({"n1": p}, mode="observe")
    r = node.run(node.prolog)
    assert r.returncode == 0
    # (a reason longer than sinfo's 100 characters is cut at a word: the whole line is in the log)
    assert "would drain n1: " + fit_reason(f"slurmkit: ecc_volatile_uncorrectable {where(node, g)}: 3 uncorrectable "
                                           "ECC errors since boot") in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="ecc_volatile_uncorrectable",
                       gpu=str(g["index"])) == 2


def test_other_node_uses_its_own_source(node, healthy, tmp_path):
    path, snap = healthy
    p, _ = _failing(node, snap, tmp_path)
    node.write_config({"n1": p, "n2": path}, mode="observe")
    r = node.run(node.prolog, node="n2")
    assert r.returncode == 0 and "would drain" not in r.stderr


def test_hook_import_path_stays_light(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    code = ("import sys, runpy; sys.argv=[sys.argv[1]]\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "heavy = [m for m in ('pandas', 'matplotlib', 'jinja2', 'click', 'prometheus_client') if m in sys.modules]\n"
            "print('HEAVY', heavy, 'EXIT', code)\n")
    env = {"SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "1", "SLURM_JOB_UID": "0",
           "SLURM_JOB_USER": "root"}
    for shim in (node.prolog, node.epilog, node.healthcheck):
        r = subprocess.run([sys.executable, "-I", "-c", code, str(shim)], env=env, capture_output=True, text=True,
                           timeout=60)
        assert "HEAVY [] EXIT 0" in r.stdout, (shim, r.stdout, r.stderr)


#: Standard-library modules that cost the hooks' start-up several ms each on every job
#: (dataclasses brings inspect, ast, dis, tokenize; pathlib brings urllib.parse and ipaddress):
#: the hook modules use slurmkit.records, os.path and collections.abc instead, tomllib only when a
#: cache is stale, subprocess only for live NVML, scontrol or the active check.
SLOW_STDLIB = ("dataclasses", "inspect", "ast", "typing", "pathlib", "urllib.parse", "tomllib", "subprocess",
               "logging", "argparse")


def test_hook_start_up_stays_off_the_slow_stdlib_modules(node, healthy, tmp_path):
    """The real shims, as Slurm runs them (``-I``), with a site profile and the InfiniBand
    checks on (the bench's setup), plus a partition clock policy over the node type's resting
    one and an Xid in the kernel log (so the policy, the running job's expectations, the GPU
    reset record and the Xid's attribution are all on the path): from the second run on
    (caches warm) none of :data:`SLOW_STDLIB` is imported by the prolog, the epilog or the
    health check."""
    from fake_sysfs import sandbox_tree

    path, snap = healthy
    bus = snap["gpus"][0]["pci_bus_id"]
    capture = tmp_path / "xid.json"  # an application Xid (13: the job's own fault, no drain)
    capture.write_text(json.dumps(dict(snap, xids=[{"xid": 13, "pci_bus_id": bus, "message": "Graphics Exception",
                                                    "origin": "/dev/kmsg", "line": 1, "timestamp": "",
                                                    "time_s": time.time() + 3600}])))
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nexpected_gpu_count = 4\n'
                    '[clock_policies.rest]\npower_limit_w = 650\n'
                    '[clock_policies.steady]\nlocked_clocks_mhz = [1215, 1410]\npower_limit_w = 500\n'
                    '[node_types.sandbox-h100x4]\nclock_policy = "rest"\n'
                    '[partitions.steady]\nnodes = "n[1-4]"\nnode_type = "sandbox-h100x4"\nclock_policy = "steady"\n')
    node.write_config({"n1": capture}, extra=f'profile = "{site}"\n',
                      sysfs={"n1": sandbox_tree(tmp_path / "sys")})
    env = {"SLURMD_NODENAME": "n1", "SLURM_CONF": str(node.slurm_conf), "SLURM_JOB_ID": "7",
           "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_UID": "0", "SLURM_JOB_USER": "root",
           "SLURM_JOB_PARTITION": "steady"}
    logs = []

    def imports(argv):
        r = subprocess.run([sys.executable, "-I", "-X", "importtime", *argv], env=env, capture_output=True,
                           text=True, timeout=60)
        log = [line for line in r.stderr.splitlines() if not line.startswith("import time:")]
        assert r.returncode == 0 and not any("own trouble" in line for line in log), log
        logs.extend(log)
        return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}

    bare = imports(["-c", "pass"])  # what the interpreter loads anyway (an editable install's finder: pathlib)
    for warm in (False, True):
        for shim in (node.prolog, node.epilog, node.healthcheck):
            loaded = imports([str(shim)])
            assert {"slurmkit.hooks.flows", "slurmkit.health.checks", "slurmkit.health.fabric",
                    "slurmkit.hooks.clock_policy", "slurmkit.profile.clock_policy", "slurmkit.hooks.attribution",
                    "slurmkit.hooks.gpureset"} <= loaded, shim.name
            if warm:
                assert sorted(m for m in SLOW_STDLIB if m in loaded - bare) == [], shim.name
    text = "\n".join(logs)
    assert f"Xid 13 on {bus}: attributed to" in text, text  # the attribution ran
    assert "clock policy steady (not applied) (partition steady)" in text, text  # replayed: nothing set


def test_bad_job_gpus_is_own_trouble(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    r = node.run(node.prolog, gpus="0,x")
    assert r.returncode == 0 and "not a GPU index" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 1


def test_per_check_switch_in_hooks_config(node, healthy, tmp_path):
    path, snap = healthy
    p, g = _failing(node, snap, tmp_path)
    node.write_config({"n1": p}, mode="observe", extra="checks = {ecc_volatile_uncorrectable = false}\n")
    r = node.run(node.prolog)
    assert r.returncode == 0 and "would drain" not in r.stderr
    assert not any(k[1] and ("check", "ecc_volatile_uncorrectable") in k[1] for k in node.textfile("n1", "prolog"))
    node.write_config({"n1": p}, mode="observe", extra="checks = {no_such_check = false}\n")
    r = node.run(node.prolog)
    assert r.returncode == 0 and "checks.no_such_check: unknown check id" in r.stderr


def test_profile_health_reaches_the_hooks_and_health_check_alike(node, healthy, tmp_path):
    """One site file: its [health] mode, deadline, pin and threshold are what the hook flow and
    `health check --site` use; an edit to the file reaches the next hook run (no stale cache)."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main
    from slurmkit.hooks import config as hconfig, flows
    from slurmkit.hooks.log import HookLog

    path, snap = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\ndeadline_s = 2.5\n'
                    'expected_gpu_count = 9\n[health.thresholds]\nretired_pages_fail = 7\n')
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n')
    r = node.run(node.prolog)
    assert r.returncode == 0 and "own trouble" not in r.stderr, r.stderr
    assert "observe mode: would drain n1: slurmkit: gpu_count" in r.stderr  # the profile's mode
    assert (node.state_dir / "profile-health.json").exists()
    run = flows.Run("prolog", "n1", {}, hconfig.load(node.cfg_path), HookLog("prolog", "n1", None))
    assert run.setup()
    assert (run.cfg.mode, run.cfg.deadline_s) == ("observe", 2.5)
    assert run.judging.hc.t("retired_pages_fail") == 7 and run.judging.hc.expect["expected_gpu_count"] == 9

    res = CliRunner().invoke(cli_main, ["--json", "health", "check", "--from", str(path), "--site", str(site)])
    rep = json.loads(res.output)
    assert res.exit_code == 1 and rep["status"] == "fail"
    assert [(x["value"], x["limit"]) for x in rep["results"] if x["check"] == "gpu_count" and x["status"] == "fail"] \
        == [(len(snap["gpus"]), 9)]
    env = CliRunner(env={"SLURMKIT_SITE": str(site)}).invoke(
        cli_main, ["--json", "health", "check", "--from", str(path)])
    assert env.exit_code == 1 and json.loads(env.output)["results"] == rep["results"]

    site.write_text(site.read_text().replace('mode = "observe"', 'mode = "enforce"'))
    r = node.run(node.prolog)
    assert r.returncode == 1 and "would drain" not in r.stderr  # the edit reached the hook

    # a typo in the shared profile is own trouble, and never switches the checks off: the node
    # is judged with the last profile that loaded (enforce, 9 GPUs expected: still drained)
    good = site.read_text()
    site.write_text(good + "[health.checks]\nno_such = false\n")
    r = node.run(node.prolog)
    assert f"{site}:" in r.stderr and "health.checks.no_such: unknown check id" in r.stderr
    assert "checking with the last site profile that loaded" in r.stderr
    assert r.returncode == 1 and "drain reason: slurmkit: gpu_count: 4 of 9 GPUs visible" in r.stderr, r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="gpu_count", gpu="") == 2
    # never loaded good (a fresh node, a bad profile since install): the defaults judge the GPUs
    (node.state_dir / "profile-health.json").unlink()
    r = node.run(node.prolog)
    assert "no earlier good load of it: checking with the defaults" in r.stderr, r.stderr
    assert r.returncode == 0 and "drain reason" not in r.stderr, r.stderr  # 4 GPUs, as gres.conf lists
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="gpu_count", gpu="") == 0
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") >= 1
    # fixed: the profile's values are back
    site.write_text(good)
    r = node.run(node.prolog)
    assert "site profile" not in r.stderr and "checking with" not in r.stderr, r.stderr
    assert r.returncode == 1 and "drain reason: slurmkit: gpu_count: 4 of 9 GPUs visible" in r.stderr, r.stderr


def _busy(snapshot, nvml_index, pid):
    """A copy of ``snapshot`` with a compute process (20 GiB) on one GPU."""
    snap = json.loads(json.dumps(snapshot))
    g = next(x for x in snap["gpus"] if x["index"] == nvml_index)
    g["values"]["processes"] = {"value": [{"pid": pid, "used_mib": 20480, "uid": 1000, "job_id": "99"}],
                                "source": "nvmlDeviceGetComputeRunningProcesses_v3", "rc": "SUCCESS"}
    g["values"]["memory_used_mib"] = {"value": 20480, "source": "nvmlDeviceGetMemoryInfo_v2", "rc": "SUCCESS"}
    return snap


def test_shared_node_prolog_judges_only_the_jobs_gpus(node, healthy, tmp_path):
    """Another job busy on GPU1 of a shared node: a 1-GPU job on GPU0 passes; a process left on
    the job's own GPU still fails it."""
    path, snap = healthy
    other = nvml_gpu_of(node, snap, 1)["index"]
    p = tmp_path / "busy.json"
    p.write_text(json.dumps(_busy(snap, other, 7777)))
    node.write_config({"n1": p})
    r = node.run(node.prolog, gpus="0")
    assert r.returncode == 0 and "leftover_processes" not in r.stderr and "memory_used" not in r.stderr, r.stderr
    # the same busy GPU is the job's own: fails
    r = node.run(node.prolog, job_id="102", gpus="1")
    assert r.returncode == 1
    assert f"leftover_processes GPU{other} " in r.stderr and "memory_used" in r.stderr
    # the periodic health check never takes a busy GPU for a leftover
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "leftover_processes" not in r.stderr and "would drain" not in r.stderr
    # a job with no GPU on a GPU node judges none of them
    assert node.run(node.prolog, job_id="103", gpus="").returncode == 0


def test_autodetect_gres_conf_still_gets_every_check(node, healthy, tmp_path):
    """gres.conf for AutoDetect=nvml (Name=gpu Type=h100 Count=4, no File=): the GPUs are matched
    through NVML (Slurm index k = k-th NVML index: gres_gpu.c sorts what gpu_nvml.c finds by its
    NVLink matrix's self position), every check runs and the count is expected."""
    path, snap = healthy
    node.gres_conf.write_text("AutoDetect=nvml\nNodeName=n[1-2] Name=gpu Type=h100 Count=4\n")
    node.write_config({"n1": path})
    r = node.run(node.prolog, gpus="0,2")
    assert r.returncode == 0 and "own trouble" not in r.stderr, r.stderr
    rec = json.loads((node.state_dir / "n1" / "job-101.json").read_text())
    by_nvml = sorted(snap["gpus"], key=lambda g: g["index"])
    assert [g["minor_number"] for g in by_nvml] != sorted(g["minor_number"] for g in by_nvml)  # orders differ
    assert [(row["index"], row["minor"], row["uuid"]) for row in rec["gpus"]] == \
        [(0, by_nvml[0]["minor_number"], by_nvml[0]["uuid"]), (2, by_nvml[2]["minor_number"], by_nvml[2]["uuid"])]
    # a fault is still caught: the checks did not fail open
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(set_value(snap, 1, "ecc_volatile_uncorrectable", 2)))
    node.write_config({"n1": bad})
    r = node.run(node.prolog, job_id="102")
    assert r.returncode == 1 and "slurmkit: ecc_volatile_uncorrectable GPU1 " in r.stderr
    # fewer GPUs than Count= fails gpu_count
    node.gres_conf.write_text("AutoDetect=nvml\nNodeName=n[1-2] Name=gpu Type=h100 Count=8\n")
    node.write_config({"n1": path})
    r = node.run(node.prolog, job_id="103", gpus="0")
    assert r.returncode == 1 and "slurmkit: gpu_count: 4 of 8 GPUs visible" in r.stderr
