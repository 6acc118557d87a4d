"""Timeouts and schedules said out loud, against a real slurmctld and slurmd (the sandbox,
Slurm 22.05): the sandbox's slurm.conf with a site setting of the kind that used to be kept or
changed without a word (a PrologSlurmctld and no PrologEpilogTimeout; PrologEpilogTimeout=5,
shorter than the hooks' deadline; HealthCheckNodeState=ALLOC; HealthCheckInterval=3600).
``slurmkit hooks install`` prints the note or warning, ``scontrol reconfigure`` is accepted and
``scontrol show config`` holds the values install wrote or kept, and a job still runs through
the installed chain (its prolog writes its metric, no node drained). The settings are edits of
the sandbox's own slurm.conf (slurmkit/sandbox/templates/slurm.conf.j2), labelled per case."""

import shutil
import tempfile
from pathlib import Path

import pytest

from nodeenv import record_snapshot
from sandbox_nodes import backups, drop_new_backups, hooks_cli, install_args, job, reconfigure, restart, show_config, show_node

from slurmkit.atomicfile import atomic_write
from slurmkit.hooks import install as inst
from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

NEED_S = inst.hooks_need_s(8.0, inst.InstallSpec(python="").scontrol_timeout_s)  # the CLI's default deadline


#: a site with no timeout and no script of its own: what install adds, said
ADDED = ("PrologEpilogTimeout=60 added (the site had none): it bounds every prolog and epilog; a Prolog or Epilog "
         "that runs past it is killed and Slurm drains the node")


def _cases(work: Path, conf: Path):
    ctld = work / "ctld-prolog.sh"
    need = f"{NEED_S:g}"
    return {
        # a site with a PrologSlurmctld and no timeout: install adds 60 and says it bounds that script
        "prologslurmctld": (f"PrologSlurmctld={ctld}", {"PrologEpilogTimeout": "60", "PrologSlurmctld": str(ctld)},
                            [f"PrologEpilogTimeout=60 added (the site had none): it bounds every prolog and epilog, "
                             f"the site's own too (PrologSlurmctld={ctld}); a Prolog or Epilog that runs past it is "
                             "killed and Slurm drains the node; a PrologSlurmctld past it has its job requeued "
                             "(slurm.conf(5)). '--timeout 0' leaves it unset"]),
        # a site timeout shorter than the hooks may take: kept, and said
        "short-timeout": ("PrologEpilogTimeout=5", {"PrologEpilogTimeout": "5"},
                          [f"kept the site's PrologEpilogTimeout=5 ({conf}:@LINE@); --replace sets 60",
                           f"warning: PrologEpilogTimeout=5 ({conf}:@LINE@) is shorter than the hooks may take "
                           f"({need} s: 8 s NVML deadline, 2 x "]),
        "alloc-only": ("HealthCheckNodeState=ALLOC", {"HealthCheckNodeState": "ALLOC", "PrologEpilogTimeout": "60"},
                       [ADDED, f"warning: HealthCheckNodeState=ALLOC ({conf}:@LINE@) never runs the health check on a "
                        "drained idle node, so slurmkit never resumes one it drained: add IDLE (or use ANY)"]),
        "hourly": ("HealthCheckInterval=3600", {"HealthCheckInterval": "3600 sec", "PrologEpilogTimeout": "60"},
                   [ADDED, f"kept the site's HealthCheckInterval=3600 ({conf}:@LINE@); --replace sets 300",
                    f"warning: HealthCheckInterval=3600 ({conf}:@LINE@) is longer than the stale-hook alert's "
                    f"{inst.STALE_ALERT_S} s: SlurmkitHooksStale fires on every node",
                    "warning: HealthCheckInterval=3600 x resume_after="]),
    }


@pytest.mark.parametrize("case", ["prologslurmctld", "short-timeout", "alloc-only", "hourly"])
def test_install_says_what_it_keeps_or_adds_and_slurm_takes_it(sandbox, fake_nvml, case):
    conf = Path(sandbox.slurm_conf)
    original = conf.read_bytes()
    work = Path(tempfile.mkdtemp(prefix="hooks-schedule-test-", dir=sandbox.dir))
    ctld_log = work / "ctld.log"
    (work / "ctld-prolog.sh").write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID" >> "{ctld_log}"\n')
    (work / "ctld-prolog.sh").chmod(0o755)
    line, want_config, want_notes = _cases(work, conf)[case]
    text = original.decode()
    assert "\n#HealthCheckProgram=\n" in text
    site = text.replace("\n#HealthCheckProgram=\n", f"\n#HealthCheckProgram=\n{line}\n")
    lineno = site.splitlines().index(line) + 1
    snaps = {n: work / f"{n}.json" for n in sandbox.node_names}
    for n, p in snaps.items():
        record_snapshot(fake_nvml, p, node=n)
    cfg = conf.parent / inst.CONFIG
    had_cfg = cfg.exists()
    kept = backups(conf)
    try:
        atomic_write(conf, site)  # atomically: a slurmd may still be re-reading slurm.conf
        reconfigure(sandbox)
        if case == "prologslurmctld":  # 22.05 runs a PrologSlurmctld only once slurmctld restarts
            restart(sandbox, "slurmctld")
        res = hooks_cli(conf, *install_args(work, snaps))
        assert res.returncode == 0, res.stderr
        said = res.stdout.splitlines()
        for want in want_notes:
            want = want.replace("@LINE@", str(lineno))
            assert any(s.startswith(want) for s in said), (want, said)
        if case == "short-timeout":  # the site's PrologEpilogTimeout is kept, never raised silently
            assert not any("PrologEpilogTimeout=60 added" in s for s in said), said
        reconfigure(sandbox)
        got = show_config(conf)
        assert {k: got[k] for k in want_config} == want_config
        assert got["HealthCheckProgram"] == str(conf.parent / inst.HEALTHCHECK_SHIM)
        assert got["Prolog"] == f"{conf.parent}/prolog.d/*" and "Alloc" in got["PrologFlags"]
        # a job still runs through the installed chain
        out = run(["srun", "-N1", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo $SLURM_JOB_ID"],
                  slurm_conf=str(conf), timeout=90).stdout.strip()
        node = job(conf, out)["NodeList"]
        prom = work / "textfile" / f"slurmkit_{node}_prolog.prom"
        assert f'slurmkit_hook_exit_code{{node="{node}",hook="prolog"}} 0' in prom.read_text()
        if case == "prologslurmctld":
            assert ctld_log.read_text().split() == [out]  # the site's slurmctld prolog ran too
        wait_until(lambda: "COMPLETING" not in show_node(conf, node)["state"], 30, what=f"{node} done with the epilog")
        got = show_node(conf, node)
        assert got["reason"] is None and "DRAIN" not in got["state"], got
        res = hooks_cli(conf, "uninstall")
        assert res.returncode == 0, res.stderr
        assert conf.read_text() == site  # uninstall gives the site's line back as it was
    finally:
        hooks_cli(conf, "uninstall")  # after a failure above: what install added goes (else a no-op)
        atomic_write(conf, original)
        if cfg.exists() and not had_cfg:
            cfg.unlink()
        reconfigure(sandbox)
        if case == "prologslurmctld":  # else slurmctld keeps running the (removed) script
            restart(sandbox, "slurmctld")
        for n in sandbox.node_names:
            if "DRAIN" in show_node(conf, n)["state"]:
                run(["scontrol", "update", f"nodename={n}", "state=resume"], slurm_conf=str(conf), timeout=30)
        drop_new_backups(conf, kept)
        shutil.rmtree(work, ignore_errors=True)
