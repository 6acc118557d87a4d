"""The installed prolog chain run by a real slurmd (the sandbox, Slurm 22.05): DeepOps' layout
(its prolog.sh template rendered, running ``shared/bin/run-parts.sh <conf dir>/prolog.d``) gets
slurmkit's shim inside that directory; a job runs, slurmd runs prolog.sh once, the site's part and
slurmkit's prolog each once, and no node is drained (the old install recursed until
PrologEpilogTimeout drained every node). Then a typo in the hooks config: the next job runs and
its prolog writes the own-trouble metric (no dark node)."""

import os
import shutil
import sys
from pathlib import Path

import pytest

from nodeenv import record_snapshot
from sandbox_nodes import reconfigure, show_node

from slurmkit.waiting import wait_until
from slurmkit.hooks import install as inst
from slurmkit.hooks.config import render as render_config
from slurmkit.slurm import conf as sconf
from slurmkit.slurm.commands import run
from test_hooks_install_layouts import DEEPOPS_PROLOG, DEEPOPS_RUN_PARTS, dev_log  # noqa: F401 (fixture)

pytestmark = pytest.mark.slurm


def test_deepops_layout_runs_once_under_slurmd(corpus, sandbox, fake_nvml, dev_log):  # noqa: F811
    conf = Path(sandbox.slurm_conf)
    before = conf.read_text()
    work = Path(sandbox.dir) / "layout-test"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    log = work / "parts.log"
    template = (corpus / DEEPOPS_PROLOG).read_text()
    prolog = work / "prolog.sh"
    prolog.write_text(template.replace("{{ slurm_config_dir }}", str(work)))
    (work / "shared" / "bin").mkdir(parents=True)
    (work / "shared" / "bin" / "run-parts.sh").write_text(DEEPOPS_RUN_PARTS.replace("@LOG@", str(log)))
    (work / "prolog.d").mkdir()
    (work / "prolog.d" / "50-all-enroot-dirs").write_text(f"#!/bin/sh\necho 50-all-enroot-dirs $SLURM_JOB_ID >> {log}\n")
    for p in (prolog, work / "shared" / "bin" / "run-parts.sh", work / "prolog.d" / "50-all-enroot-dirs"):
        p.chmod(0o755)
    snaps = {}
    for n in sandbox.node_names:
        snaps[n] = work / f"{n}.json"
        record_snapshot(fake_nvml, snaps[n], node=n)
    conf.write_text(before.replace("# Slots for `slurmkit hooks install`", f"Prolog={prolog}\n# Slots for `slurmkit hooks install`", 1))
    cfg = render_config(conf, gres_conf=conf.parent / "gres.conf", state_dir=work / "state", spool_dir=work / "spool",
                        textfile_dir=work / "textfile", snapshots=snaps, mode="enforce",
                        slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    # slurmkit's shim goes into the directory prolog.sh runs, not into the conf dir's prolog.d
    plan = inst.plan_install(sconf.load_tree(conf), inst.InstallSpec(python=sys.executable, config=cfg, timeout_s=60))
    try:
        inst.apply(plan, conf, installing=True)
        (conf.parent / inst.CONFIG).write_text(cfg)
        assert sconf.find_effective(sconf.load_tree(conf), "Prolog")[1].get("Prolog") == str(prolog)
        assert (work / "prolog.d" / "99-slurmkit").exists()
        reconfigure(sandbox)
        job = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n1", "-t", "2", "--wrap", "hostname"],
                  slurm_conf=str(conf), timeout=30).stdout.strip()

        def state():
            out = run(["scontrol", "show", "job", "-o", job], slurm_conf=str(conf), timeout=30).stdout
            return dict(t.split("=", 1) for t in out.split() if "=" in t)["JobState"]

        assert wait_until(lambda: state() == "COMPLETED", 90, what=f"job {job} completed")
        lines = log.read_text().splitlines()
        assert lines.count(f"50-all-enroot-dirs {job}") == 1, lines
        assert sum(1 for line in lines if "slurmkit-prolog: info: node=n1 job=" + job in line and "prolog done" in line) == 1
        assert (work / "textfile" / "slurmkit_n1_prolog.prom").exists()
        assert "DRAIN" not in show_node(conf, "n1")["state"] and show_node(conf, "n1")["reason"] is None
        # a typo in the shared hooks config: jobs still run, and the first prolog counts it
        (conf.parent / inst.CONFIG).write_text(cfg.replace('mode = "enforce"', 'mode = "enforse"'))
        job = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n1", "-t", "2", "--wrap", "hostname"],
                  slurm_conf=str(conf), timeout=30).stdout.strip()
        assert wait_until(lambda: state() == "COMPLETED", 90, what=f"job {job} completed")
        prom = (work / "textfile" / "slurmkit_n1_prolog.prom").read_text()
        assert 'slurmkit_hook_own_errors_total{node="n1",hook="prolog"} 1' in prom, prom
        assert 'slurmkit_hook_exit_code{node="n1",hook="prolog"} 0' in prom
        assert any("mode: want enforce or observe" in line for line in log.read_text().splitlines())
    finally:
        inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
        conf.write_text(before)
        reconfigure(sandbox)
        run(["scontrol", "update", "nodename=n1", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)


def test_dollar_0_relative_site_prolog_runs_once_under_slurmd(sandbox, fake_nvml):
    """A single-script site Prolog that sources ``$(dirname "$0")/lib.sh``: after install (the
    conf dir's prolog.d with the wrapper that execs it, and slurmkit's shim) a job runs, slurmd
    runs the site's prolog once by its own path, it succeeds, and no node is drained (a link in
    its place made ``$0`` the link: "Prolog error" and a drained node)."""
    conf = Path(sandbox.slurm_conf)
    before = conf.read_text()
    work = Path(sandbox.dir) / "dollar0-test"
    shutil.rmtree(work, ignore_errors=True)
    (work / "site").mkdir(parents=True)
    log = work / "site.log"
    (work / "site" / "lib.sh").write_text(f'site_log() {{ echo "$1 $0 $SLURM_JOB_ID" >> {log}; }}\n')
    site = work / "site" / "prolog"
    site.write_text('#!/bin/sh\nset -e\n. "$(dirname "$0")/lib.sh"\nsite_log prolog\n')
    site.chmod(0o755)
    snaps = {}
    for n in sandbox.node_names:
        snaps[n] = work / f"{n}.json"
        record_snapshot(fake_nvml, snaps[n], node=n)
    conf.write_text(before.replace("# Slots for `slurmkit hooks install`", f"Prolog={site}\n# Slots for `slurmkit hooks install`", 1))
    cfg = render_config(conf, state_dir=work / "state", spool_dir=work / "spool", textfile_dir=work / "textfile",
                        snapshots=snaps, mode="enforce", slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    plan = inst.plan_install(sconf.load_tree(conf), inst.InstallSpec(python=sys.executable, config=cfg, timeout_s=60))
    try:
        inst.apply(plan, conf, installing=True)
        (conf.parent / inst.CONFIG).write_text(cfg)
        d = conf.parent / "prolog.d"
        assert sconf.find_effective(sconf.load_tree(conf), "Prolog")[1].get("Prolog") == f"{d}/*"
        assert not os.path.islink(d / inst.SITE_LINK)
        reconfigure(sandbox)
        job = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n2", "-t", "2", "--wrap", "hostname"],
                  slurm_conf=str(conf), timeout=30).stdout.strip()

        def state():
            out = run(["scontrol", "show", "job", "-o", job], slurm_conf=str(conf), timeout=30).stdout
            return dict(t.split("=", 1) for t in out.split() if "=" in t)["JobState"]

        assert wait_until(lambda: state() == "COMPLETED", 90, what=f"job {job} completed")
        assert log.read_text().splitlines() == [f"prolog {site} {job}"]  # once, by its own path
        assert (work / "textfile" / "slurmkit_n2_prolog.prom").exists()  # slurmkit's prolog ran after it
        assert "DRAIN" not in show_node(conf, "n2")["state"] and show_node(conf, "n2")["reason"] is None
    finally:
        inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
        conf.write_text(before)
        reconfigure(sandbox)
        run(["scontrol", "update", "nodename=n2", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
