"""The hooks in the real Slurm sandbox: install, drain on a failing GPU, requeue, resume.

Every node replays a healthy snapshot recorded from the fake NVML (through the real pynvml);
n3 is switched to a failing one (a volatile uncorrectable ECC error on one GPU) right after a
periodic health check ran, with n1, n2 and n4 busy, so the next job lands on n3 and its prolog
catches the fault: n3 is drained with slurmkit's reason, the job is requeued (not held) and runs
elsewhere once a node frees up. Switched back, the periodic health check resumes n3 after
``resume_after`` clean runs.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nodeenv import record_snapshot, set_value
from slurmkit.atomicfile import atomic_write
from slurmkit.health.result import fit_reason
from slurmkit.hooks import drain, install as inst, spool
from slurmkit.hooks.config import render as render_config
from slurmkit.slurm import conf as sconf
from slurmkit.slurm.commands import run
from sandbox_nodes import job as _job, reconfigure, sbatch as _sbatch, show_node as _node
from slurmkit.waiting import wait_until


def _where(gpu: dict) -> str:
    """How the hooks' drain reason names a snapshot GPU on a sandbox node: NVML's index, Slurm's
    gres index (the place of /dev/nvidia<k> with the GPU's minor in gres.conf's File= list:
    slurmkit.sandbox.config.device_minors) and the bus id."""
    from slurmkit.sandbox.config import device_minors

    return f"GPU{gpu['index']} (gres index {device_minors(4).index(gpu['minor_number'])}, {gpu['pci_bus_id']})"

pytestmark = pytest.mark.slurm

INTERVAL_S = 5
RESUME_AFTER = 2


@pytest.fixture
def hooked(sandbox, fake_nvml, tmp_path):
    """Hooks installed into the sandbox's slurm.conf (uninstalled afterwards)."""
    conf = Path(sandbox.slurm_conf)
    # a directory of its own: a health check the last test's teardown did not stop in time may
    # still write into that test's directory
    work = Path(tempfile.mkdtemp(prefix="hooks-test-", dir=sandbox.dir))
    snaps = {}
    for n in sandbox.node_names:
        snaps[n] = work / f"{n}.json"
        record_snapshot(fake_nvml, snaps[n], node=n)
    failing = work / "n3-failing.json"
    snap3 = json.loads(snaps["n3"].read_text())
    failing.write_text(json.dumps(set_value(snap3, 1, "ecc_volatile_uncorrectable", 4)))
    dirs = {k: work / k for k in ("state", "spool", "textfile")}

    def config(overrides=None):
        s = dict(snaps, **(overrides or {}))
        return render_config(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path,
                             state_dir=dirs["state"], spool_dir=dirs["spool"], textfile_dir=dirs["textfile"],
                             resume_after=RESUME_AFTER, snapshots=s,
                             slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))

    spec = inst.InstallSpec(python=sys.executable, config=config(), interval_s=INTERVAL_S, timeout_s=60)
    plan = inst.plan_install(sconf.load_tree(conf), spec)
    inst.apply(plan, conf, installing=True)
    cfg_path = conf.parent / inst.CONFIG
    cfg_path.write_text(config())
    reconfigure(sandbox)
    yield {"conf": conf, "cfg_path": cfg_path, "config": config, "failing": failing, "snaps": snaps, **dirs}
    for n in sandbox.node_names:
        run(["scontrol", "update", f"nodename={n}", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
    inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
    reconfigure(sandbox)
    shutil.rmtree(work, ignore_errors=True)


@pytest.mark.versions
def test_failing_gpu_drains_requeues_and_resumes(sandbox, hooked):
    conf = hooked["conf"]
    hc3 = hooked["textfile"] / "slurmkit_n3_healthcheck.prom"
    # the periodic health check runs on every node, healthy, without draining anything
    wait_until(hc3.exists, 60, what="a health check on n3")
    reasons = {n: _node(conf, n)["reason"] for n in sandbox.node_names}
    assert all(r is None for r in reasons.values()), reasons
    blockers = [_sbatch(conf, "-w", n, "--exclusive", "-t", "5", "--wrap", "sleep 300") for n in ("n1", "n2", "n4")]
    try:
        wait_until(lambda: all(_job(conf, b)["JobState"] == "RUNNING" for b in blockers), 60, what="blockers running")
        # switch n3 right after a health check so that the job's prolog is first to see it
        last = hc3.stat().st_mtime
        wait_until(lambda: hc3.stat().st_mtime != last, 30, what="the next health check on n3")
        hooked["cfg_path"].write_text(hooked["config"]({"n3": hooked["failing"]}))
        job = _sbatch(conf, "-N1", "--gres=gpu:1", "-t", "2", "--requeue", "--wrap", "hostname")
        bad = json.loads(hooked["failing"].read_text())["gpus"][1]
        want = fit_reason(f"slurmkit: ecc_volatile_uncorrectable {_where(bad)}: 4 uncorrectable ECC errors since boot")
        got = wait_until(lambda: (_node(conf, "n3")["reason"] or "").startswith("slurmkit:")
                    and _node(conf, "n3"), 60, what="n3 drained by slurmkit")
        assert got["reason"] == want and "DRAIN" in got["state"]
        info = wait_until(lambda: _job(conf, job)["JobState"] == "PENDING" and _job(conf, job), 30, what="the job requeued")
        assert int(info["Restarts"]) >= 1  # it was started on n3 and requeued, not held
        assert info.get("Reason") != "JobHeldAdmin" and info.get("Priority") != "0"
        prolog3 = (hooked["textfile"] / "slurmkit_n3_prolog.prom").read_text()
        assert 'slurmkit_hook_exit_code{node="n3",hook="prolog"} 1' in prolog3
    finally:
        run(["scancel", *blockers], slurm_conf=str(conf), timeout=30)
    done = wait_until(lambda: _job(conf, job)["JobState"] == "COMPLETED" and _job(conf, job), 90, what="the job to finish elsewhere")
    assert done["NodeList"] in ("n1", "n2", "n4")
    # its epilog spooled a record for the node it ran on
    recs, problems = spool.read(hooked["spool"] / spool.file_name(done["NodeList"]))
    assert problems == [] and any(r.job_id == job and r.node == done["NodeList"] for r in recs)
    # still failing: the health check keeps n3 drained with our reason
    _health_runs(hooked, "n3", 2)
    assert _node(conf, "n3")["reason"] == want
    # switched back: resumed after RESUME_AFTER clean health checks
    hooked["cfg_path"].write_text(hooked["config"]())
    t0 = time.monotonic()
    wait_until(lambda: "DRAIN" not in _node(conf, "n3")["state"], INTERVAL_S * (RESUME_AFTER + 4) + 30, what="n3 resumed")
    assert time.monotonic() - t0 >= INTERVAL_S * (RESUME_AFTER - 1) - 1  # not on the first clean run
    assert _node(conf, "n3")["reason"] is None
    state = json.loads((hooked["state"] / "n3" / "health.json").read_text())
    assert state["drained_reason"] is None


def test_foreign_reason_is_never_overwritten_or_resumed(sandbox, hooked):
    conf = hooked["conf"]
    run(["scontrol", "update", "nodename=n4", "state=drain", "reason=admin: PSU swap"], slurm_conf=str(conf),
        timeout=30)
    hooked["cfg_path"].write_text(hooked["config"]({"n4": hooked["failing"]}))
    tf = hooked["textfile"] / "slurmkit_n4_healthcheck.prom"
    last = tf.stat().st_mtime if tf.exists() else 0
    wait_until(lambda: tf.exists() and tf.stat().st_mtime > last + INTERVAL_S, 60, what="two health checks on n4")
    assert _node(conf, "n4")["reason"] == "admin: PSU swap"
    hooked["cfg_path"].write_text(hooked["config"]())
    _health_runs(hooked, "n4", RESUME_AFTER + 1)  # clean runs enough to resume a drain of ours
    got = _node(conf, "n4")
    assert got["reason"] == "admin: PSU swap" and "DRAIN" in got["state"]


@pytest.mark.parametrize("layout", ["file", "glob", "include"])
def test_site_prolog_kept_and_runs_first(sandbox, fake_nvml, tmp_path, layout):
    """A site Prolog stays in place: it runs, before slurmkit's, and uninstall gives it back;
    whether slurm.conf names one script, a glob (``Prolog=<dir>/*``) or has the line in an
    ``Include``d file."""
    conf = Path(sandbox.slurm_conf)
    original = conf.read_bytes()
    work = Path(tempfile.mkdtemp(prefix="hooks-site-test-", dir=sandbox.dir))  # its own (see ``hooked``)
    if layout == "glob":
        (work / "site-prolog.d").mkdir()
        site = work / "site-prolog.d" / "50-site.sh"
    else:
        site = work / "site-prolog.sh"
    log = work / "site.log"
    state = work / "state"
    # the site script notes whether slurmkit's prolog already recorded the job on this node
    site.write_text(f'#!/bin/sh\nif [ -e "{state}/$SLURMD_NODENAME/job-$SLURM_JOB_ID.json" ]; then o=after; '
                    f'else o=before; fi\necho "$SLURM_JOB_ID $o" >> "{log}"\n')
    site.chmod(0o755)
    text = original.decode()
    assert "\n#Prolog=\n" in text
    # atomically: a slurmd may still be re-reading slurm.conf after the last reconfigure
    included = work / "site-prolog.conf"
    if layout == "include":
        included.write_text(f"# the site's prolog settings\nProlog={site}\n")
        atomic_write(conf, text.replace("\n#Prolog=\n", f"\nInclude {included}\n"))
    else:
        value = f"{site.parent}/*" if layout == "glob" else str(site)
        atomic_write(conf, text.replace("\n#Prolog=\n", f"\nProlog={value}\n"))
    with_site = conf.read_bytes()
    included_text = included.read_bytes() if layout == "include" else None
    snaps = {n: work / f"{n}.json" for n in sandbox.node_names}
    for n, p in snaps.items():
        record_snapshot(fake_nvml, p, node=n)
    cfg = render_config(conf, gres_conf=conf.parent / "gres.conf", state_dir=state, spool_dir=work / "spool",
                        textfile_dir=work / "textfile", snapshots=snaps,
                        slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    try:
        inst.apply(inst.plan_install(sconf.load_tree(conf), inst.InstallSpec(python=sys.executable, config=cfg,
                                                                             interval_s=300)), conf, True)
        reconfigure(sandbox)
        out = run(["srun", "-N1", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo $SLURM_JOB_ID"],
                  slurm_conf=str(conf), timeout=60).stdout.strip()
        assert log.read_text().split() == [out, "before"]
        files = wait_until(lambda: list((work / "spool").glob("*.jsonl")), 30, what="the epilog's spool record")
        assert [f.name for f in files] == [spool.file_name(_job(conf, out)["NodeList"])]  # its node's own file
        recs, _ = spool.read(files[0])
        assert [r.job_id for r in recs] == [out]
        if layout == "include":
            assert "prolog.d/*" in included.read_text()  # the key is edited where it is defined
        inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, False)
        assert conf.read_bytes() == with_site
        if layout == "include":
            assert included.read_bytes() == included_text
        if layout == "glob":
            assert sorted(p.name for p in site.parent.iterdir()) == ["50-site.sh"]
    finally:
        atomic_write(conf, original)
        reconfigure(sandbox)
        shutil.rmtree(work, ignore_errors=True)


def _health_runs(hooked, node, n):
    """Wait for ``n`` more health checks on ``node`` (its textfile rewritten n times)."""
    tf = hooked["textfile"] / f"slurmkit_{node}_healthcheck.prom"
    for _ in range(n):
        last = tf.stat().st_mtime if tf.exists() else 0
        wait_until(lambda: tf.exists() and tf.stat().st_mtime != last, INTERVAL_S * 4 + 10, what=f"a health check on {node}")


def test_broken_install_never_drains_with_prolog_error(sandbox, hooked):
    """A half-finished upgrade (the hooks' interpreter has no slurmkit): jobs still run, the node
    is not drained by Slurm's "Prolog error" / "Epilog error"."""
    conf = hooked["conf"]
    shims = [conf.parent / "prolog.d" / inst.OUR_SHIM, conf.parent / "epilog.d" / inst.OUR_SHIM]
    saved = {p: p.read_text() for p in shims}
    try:
        for p, kind in zip(shims, ("prolog", "epilog")):
            atomic_write(p, inst.shim_text(kind, "/usr/bin/python3", hooked["cfg_path"]), 0o755)
        out = run(["srun", "-w", "n1", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo ran $SLURM_JOB_ID"],
                  slurm_conf=str(conf), timeout=90).stdout.strip()
        assert out.startswith("ran ")
        job = out.split()[1]
        wait_until(lambda: _job(conf, job)["JobState"] == "COMPLETED", 30, what="the job to complete")
        # the epilog's shim (no slurmkit there) exits 0 and writes nothing of ours: wait for n1 to
        # leave COMPLETING (the epilog done and reported), then an "Epilog error" drain would show
        wait_until(lambda: "COMPLETING" not in _node(conf, "n1")["state"], 30, what="n1 done with the job's epilog")
        got = _node(conf, "n1")
        assert got["reason"] is None and "DRAIN" not in got["state"], got
    finally:
        for p, text in saved.items():
            atomic_write(p, text, 0o755)


def test_observe_mode_on_a_failing_node_changes_nothing(sandbox, hooked):
    conf = hooked["conf"]
    text = hooked["config"]({"n2": hooked["failing"]})
    hooked["cfg_path"].write_text('mode = "observe"\n' + text)
    out = run(["srun", "-w", "n2", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo $SLURM_JOB_ID"],
              slurm_conf=str(conf), timeout=90).stdout.strip()
    wait_until(lambda: (hooked["spool"] / spool.file_name("n2")).exists()
          and any(r.job_id == out for r in spool.read(hooked["spool"] / spool.file_name("n2"))[0]), 30, what="the job's epilog")
    # the epilog writes its energy record, then its metrics: on a loaded machine the .prom comes later
    wait_until(lambda: (hooked["textfile"] / "slurmkit_n2_epilog.prom").exists(), 30, what="the epilog's metrics")
    got = _node(conf, "n2")
    assert got["reason"] is None and "DRAIN" not in got["state"], got
    prolog = (hooked["textfile"] / "slurmkit_n2_prolog.prom").read_text()
    assert 'slurmkit_hook_exit_code{node="n2",hook="prolog"} 0' in prolog
    assert 'slurmkit_hook_observed_actions{node="n2",hook="prolog",action="enable_accounting"} 1' in prolog
    epilog = (hooked["textfile"] / "slurmkit_n2_epilog.prom").read_text()
    assert 'slurmkit_hook_observed_actions{node="n2",hook="epilog",action="reset_app_clocks"} 1' in epilog
    node_prom = (hooked["textfile"] / "slurmkit_n2_node.prom").read_text()
    assert re.search(r'slurmkit_observed_drains_total\{node="n2",check="ecc_volatile_uncorrectable"\} [1-9]', node_prom)


def test_drain_ownership_follows_slurms_current_reason(sandbox, hooked):
    conf = hooked["conf"]

    def update(node, *args):
        run(["scontrol", "update", f"nodename={node}", *args], slurm_conf=str(conf), timeout=30)

    # slurmkit drains n3 ...
    hooked["cfg_path"].write_text(hooked["config"]({"n3": hooked["failing"]}))
    wait_until(lambda: drain.is_ours(_node(conf, "n3")["reason"]), INTERVAL_S * 4 + 30, what="n3 drained by slurmkit")
    # ... the fault is fixed and an admin resumes n3 by hand: slurmkit forgets its drain
    hooked["cfg_path"].write_text(hooked["config"]())
    update("n3", "state=resume")
    _health_runs(hooked, "n3", 1)
    assert json.loads((hooked["state"] / "n3" / "health.json").read_text())["drained_reason"] is None
    # Slurm's own reason is never resumed (nor overwritten) by slurmkit
    update("n3", "state=drain", "reason=Prolog error")
    _health_runs(hooked, "n3", RESUME_AFTER + 1)
    got = _node(conf, "n3")
    assert got["reason"] == "Prolog error" and "DRAIN" in got["state"]
    update("n3", "state=resume")
    # the epilog on a node someone else drained exits 0 and adds no reason
    job = _sbatch(conf, "-w", "n4", "--gres=gpu:1", "-t", "2", "--wrap", "sleep 6")
    wait_until(lambda: _job(conf, job)["JobState"] == "RUNNING", 60, what="the job running on n4")
    update("n4", "state=drain", "reason=admin: PSU swap")
    hooked["cfg_path"].write_text(hooked["config"]({"n4": hooked["failing"]}))
    ep = hooked["textfile"] / "slurmkit_n4_epilog.prom"
    before = ep.stat().st_mtime if ep.exists() else 0
    wait_until(lambda: ep.exists() and ep.stat().st_mtime != before, 60, what="the job's epilog on n4")
    assert 'slurmkit_hook_exit_code{node="n4",hook="epilog"} 0' in ep.read_text()
    got = _node(conf, "n4")
    assert got["reason"] == "admin: PSU swap", got
    hooked["cfg_path"].write_text(hooked["config"]())


def _busy_snapshot(path_in, path_out, nvml_indexes, pid=424242):
    snap = json.loads(Path(path_in).read_text())
    for g in snap["gpus"]:
        if g["index"] in nvml_indexes:
            g["values"]["processes"] = {"value": [{"pid": pid, "used_mib": 20480, "uid": 1000}],
                                        "source": "nvmlDeviceGetComputeRunningProcesses_v3", "rc": "SUCCESS"}
            g["values"]["memory_used_mib"] = {"value": 20480, "source": "nvmlDeviceGetMemoryInfo_v2", "rc": "SUCCESS"}
    Path(path_out).write_text(json.dumps(snap))
    return path_out


def test_shared_node_two_one_gpu_jobs(sandbox, hooked):
    """Two 1-GPU jobs on one node at once: the first job's GPU is busy in the node's state, and
    the second job's prolog passes; a process left on the job's own GPU still fails it."""
    conf = hooked["conf"]
    first = _sbatch(conf, "-w", "n1", "--gres=gpu:1", "-t", "3", "--wrap", "sleep 120")
    jobs = [first]
    try:
        rec = wait_until(lambda: (hooked["state"] / "n1" / f"job-{first}.json").exists()
                    and json.loads((hooked["state"] / "n1" / f"job-{first}.json").read_text()), 60, what="the first job's prolog record")
        busy = {g["nvml_index"] for g in rec["gpus"]}
        assert len(busy) == 1
        work = hooked["cfg_path"].parent
        snap_n1 = hooked["snaps"]["n1"]
        shared = _busy_snapshot(snap_n1, work / "n1-shared.json", busy)
        hooked["cfg_path"].write_text(hooked["config"]({"n1": shared}))
        out = run(["srun", "-w", "n1", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo ok $SLURM_JOB_ID"],
                  slurm_conf=str(conf), timeout=90).stdout.split()
        assert out[0] == "ok"
        second = out[1]
        prolog = (hooked["textfile"] / "slurmkit_n1_prolog.prom").read_text()
        assert 'slurmkit_hook_exit_code{node="n1",hook="prolog"} 0' in prolog
        assert _node(conf, "n1")["reason"] is None
        # now a process is left on every GPU but the first job's: the next job's own GPU is busy
        all_gpus = {g["index"] for g in json.loads(Path(snap_n1).read_text())["gpus"]}
        stuck = _busy_snapshot(snap_n1, work / "n1-stuck.json", all_gpus)
        hooked["cfg_path"].write_text(hooked["config"]({"n1": stuck}))
        third = _sbatch(conf, "-w", "n1", "--gres=gpu:1", "-t", "1", "--requeue", "--wrap", "true")
        jobs.append(third)
        got = wait_until(lambda: drain.is_ours(_node(conf, "n1")["reason"])
                    and _node(conf, "n1"), 60, what="n1 drained for a leftover process")
        m = re.match(r"slurmkit: (leftover_processes|memory_used) GPU(\d+) ", got["reason"])
        assert m and int(m.group(2)) not in busy, got  # the third job's own GPU, not the first job's
        assert str(second) != str(third)
    finally:
        run(["scancel", *jobs], slurm_conf=str(conf), timeout=30)
        hooked["cfg_path"].write_text(hooked["config"]())


def test_hardware_xid_drain_lasts_until_reboot(sandbox, hooked):
    """Xid 79 drains n3; clean health checks afterwards do not resume it (no reset or reboot
    seen); once the boot id differs from the drain's (a reboot) it is resumed."""
    conf = hooked["conf"]
    snap = json.loads(Path(hooked["snaps"]["n3"]).read_text())
    g1 = next(g for g in snap["gpus"] if g["index"] == 1)
    snap["xids"] = [{"xid": 79, "pci_bus_id": g1["pci_bus_id"], "message": "GPU has fallen off the bus.",
                     "origin": "/dev/kmsg", "line": 7, "timestamp": ""}]
    xid_snap = hooked["cfg_path"].parent / "n3-xid79.json"
    xid_snap.write_text(json.dumps(snap))
    hooked["cfg_path"].write_text(hooked["config"]({"n3": xid_snap}))
    want = f"slurmkit: xid {_where(g1)}: Xid 79 GPU fell off the bus"
    wait_until(lambda: _node(conf, "n3")["reason"] == want, INTERVAL_S * 4 + 30, what="n3 drained for Xid 79")
    hooked["cfg_path"].write_text(hooked["config"]())  # the kernel log has nothing new: clean runs
    _health_runs(hooked, "n3", RESUME_AFTER + 2)
    got = _node(conf, "n3")
    assert got["reason"] == want and "DRAIN" in got["state"]
    # a reboot: the boot id slurmkit recorded at the drain is no longer the current one
    hp = hooked["state"] / "n3" / "health.json"
    h = json.loads(hp.read_text())
    assert h["drained_boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    atomic_write(hp, json.dumps({**h, "drained_boot_id": "boot-before-the-reboot"}))
    wait_until(lambda: "DRAIN" not in _node(conf, "n3")["state"], INTERVAL_S * (RESUME_AFTER + 4) + 30, what="n3 resumed after the reboot")


def test_gpu_reset_ends_only_that_gpus_xid_drain(sandbox, hooked):
    """Hardware XIDs on GPU1 (79) and GPU2 (48) drain n3. Recording GPU2's reset (``slurmkit
    hooks gpu-reset --done``) does not resume it: GPU1's XID still holds, and the reason moves to
    GPU1. Once GPU1 is reset too, clean health checks resume the node."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    conf = hooked["conf"]
    snap = json.loads(Path(hooked["snaps"]["n3"]).read_text())
    g1, g2 = (next(g for g in snap["gpus"] if g["index"] == i) for i in (1, 2))
    logged = time.time() - 60  # the kernel's timestamps, before any reset below
    snap["xids"] = [{"xid": 79, "pci_bus_id": g1["pci_bus_id"], "message": "GPU has fallen off the bus.",
                     "origin": "/dev/kmsg", "line": 7, "timestamp": "", "time_s": logged},
                    {"xid": 48, "pci_bus_id": g2["pci_bus_id"], "message": "DBE (double bit error) ECC error",
                     "origin": "/dev/kmsg", "line": 8, "timestamp": "", "time_s": logged}]
    xid_snap = hooked["cfg_path"].parent / "n3-xid79-48.json"
    xid_snap.write_text(json.dumps(snap))
    hooked["cfg_path"].write_text(hooked["config"]({"n3": xid_snap}))
    first = f"slurmkit: xid {_where(g2)}: Xid 48 double bit ECC error (+1 more)"
    wait_until(lambda: _node(conf, "n3")["reason"] == first, INTERVAL_S * 4 + 30, what="n3 drained for Xids 48 and 79")
    holds = json.loads((hooked["state"] / "n3" / "health.json").read_text())["xid_holds"]
    assert sorted(holds) == sorted([g1["pci_bus_id"], g2["pci_bus_id"]])
    hooked["cfg_path"].write_text(hooked["config"]())  # the kernel log has nothing new: clean runs

    def reset(index):
        r = CliRunner().invoke(cli_main, ["hooks", "gpu-reset", str(index), "--done", "--node", "n3",
                                          "--config", str(hooked["cfg_path"])])
        assert r.exit_code == 0, r.output
        return r.output

    assert f"GPU {g2['pci_bus_id']} reset recorded by hand" in reset(2)
    then = f"slurmkit: xid {_where(g1)}: Xid 79 GPU fell off the bus"
    wait_until(lambda: _node(conf, "n3")["reason"] == then, INTERVAL_S * 4 + 30, what="n3's reason moved to GPU1")
    _health_runs(hooked, "n3", RESUME_AFTER + 1)
    got = _node(conf, "n3")
    assert got["reason"] == then and "DRAIN" in got["state"]  # GPU1's XID still holds the drain
    reset(g1["pci_bus_id"])
    wait_until(lambda: "DRAIN" not in _node(conf, "n3")["state"], INTERVAL_S * (RESUME_AFTER + 4) + 30, what="n3 resumed after GPU1's reset")
    assert json.loads((hooked["state"] / "n3" / "health.json").read_text())["xid_holds"] == {}
