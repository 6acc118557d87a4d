"""`slurmkit hooks install` / `uninstall` on realistic slurm.conf files (no Slurm needed)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.hooks import install as inst
from slurmkit.hooks.config import load as load_config, render as render_config
from slurmkit.slurm import conf as sconf

NHC_SITE = """\
# Production-like slurm.conf: NHC prolog, pam_slurm_adopt, Include'd scheduling settings
ClusterName=alpha
SlurmctldHost=ctl1(127.0.0.1)
Prolog=/usr/sbin/nhc-prolog   # LBNL Node Health Check
Epilog=/etc/slurm/site-epilog.sh
PrologFlags=Contain,X11
HealthCheckInterval=600
Include sched.conf
#HealthCheckProgram=
NodeName=gpu[01-16] CPUs=64 Gres=gpu:a100:8 State=UNKNOWN
PartitionName=gpu Nodes=gpu[01-16] Default=YES
"""
SCHED = """\
SchedulerType=sched/backfill
SchedulerParameters=bf_continue,defer
PrologEpilogTimeout=120
"""


def _site(tmp_path, main=NHC_SITE, sched=SCHED):
    d = tmp_path / "etc"
    d.mkdir()
    (d / "slurm.conf").write_text(main)
    if sched is not None:
        (d / "sched.conf").write_text(sched)
    return d / "slurm.conf"


def _install(path, **kw):
    spec = inst.InstallSpec(python=sys.executable, config=render_config(path), **kw)
    plan = inst.plan_install(sconf.load_tree(path), spec)
    inst.apply(plan, path, installing=True)
    return plan


def _uninstall(path):
    plan = inst.plan_uninstall(sconf.load_tree(path), inst.read_manifest(path))
    inst.apply(plan, path, installing=False)
    return plan


def _value(path, key):
    found = sconf.find_effective(sconf.load_tree(path), key)
    return (found[0].path.name, found[1].get(key)) if found else None


def test_install_merges_with_site_values(tmp_path):
    path = _site(tmp_path)
    plan = _install(path)
    d = path.parent
    assert _value(path, "Prolog") == ("slurm.conf", f"{d}/prolog.d/*")
    assert _value(path, "Epilog") == ("slurm.conf", f"{d}/epilog.d/*")
    # the site's scripts stay, next to our shim, first in slurmd's (reverse alphabetical) order
    assert (d / "prolog.d" / "90-site").read_text() == inst.site_wrapper("/usr/sbin/nhc-prolog")
    assert "exec '/etc/slurm/site-epilog.sh' \"$@\"" in (d / "epilog.d" / "90-site").read_text()
    assert sorted(os.listdir(d / "prolog.d")) == ["10-slurmkit", "90-site"]
    assert _value(path, "PrologFlags") == ("slurm.conf", "Contain,X11,Alloc")
    # SchedulerParameters lives in the Include'd file: edited there
    assert _value(path, "SchedulerParameters") == ("sched.conf", "bf_continue,defer,nohold_on_prolog_fail")
    assert _value(path, "HealthCheckProgram") == ("slurm.conf", f"{d}/slurmkit-healthcheck")
    # foreign values are kept without --replace, and the admin is told
    assert _value(path, "HealthCheckInterval") == ("slurm.conf", "600")
    assert _value(path, "PrologEpilogTimeout") == ("sched.conf", "120")
    assert any("HealthCheckInterval=600" in n for n in plan.notes)
    assert any("scontrol reconfigure" in n for n in plan.notes)
    text = path.read_text()
    # the template slot comment was used, the comment on the Prolog line kept in the marker
    assert "#HealthCheckProgram=\n" not in text
    assert "LBNL Node Health Check" in text
    # every other line kept
    for line in ("ClusterName=alpha", "NodeName=gpu[01-16] CPUs=64 Gres=gpu:a100:8 State=UNKNOWN"):
        assert line in text.splitlines()
    # backups of both edited files, byte for byte the originals
    backups = sorted(p.name for p in d.iterdir() if ".slurmkit-" in p.name)
    assert len(backups) == 2
    assert (d / backups[0]).read_text() in (NHC_SITE, SCHED)
    # shims run our interpreter directly (behind a /bin/sh fail-safe guard), not through the click CLI
    shim = (d / "prolog.d" / "10-slurmkit").read_text()
    assert shim.startswith("#!/bin/sh\n") and f"py='{sys.executable}'" in shim and "slurmkit.hooks.main" in shim
    assert "import click" not in shim and "slurmkit.cli" not in shim and str(d / "slurmkit-hooks.toml") in shim
    assert os.access(d / "prolog.d" / "10-slurmkit", os.X_OK)
    cfg = load_config(d / "slurmkit-hooks.toml")
    assert cfg.slurm_conf == str(path)


def test_install_is_idempotent(tmp_path):
    path = _site(tmp_path)
    _install(path)
    before = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()}
    plan = inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable,
                                                                        config=render_config(path)))
    assert not plan.changed and plan.diff() == ""
    inst.apply(plan, path, installing=True)
    after = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()}
    assert after == before


def test_uninstall_restores_byte_for_byte_when_unchanged(tmp_path):
    path = _site(tmp_path)
    _install(path)
    plan = _uninstall(path)
    assert set(plan.restore) == {path, path.parent / "sched.conf"}
    assert path.read_text() == NHC_SITE and (path.parent / "sched.conf").read_text() == SCHED
    assert not (path.parent / "prolog.d").exists() and not (path.parent / "slurmkit-healthcheck").exists()
    assert not (path.parent / "slurmkit-hooks.toml").exists()
    assert not inst.manifest_path(path).exists()


def test_uninstall_after_admin_edit_removes_only_our_lines(tmp_path):
    path = _site(tmp_path)
    _install(path)
    edited = path.read_text().replace("ClusterName=alpha", "ClusterName=alpha\nMaxJobCount=50000")
    path.write_text(edited)
    plan = _uninstall(path)
    assert path not in plan.restore
    assert path.read_text() == NHC_SITE.replace("ClusterName=alpha", "ClusterName=alpha\nMaxJobCount=50000")
    assert (path.parent / "sched.conf").read_text() == SCHED  # unchanged one restored


def test_replace_takes_over_foreign_healthcheck_and_uninstall_gives_it_back(tmp_path):
    main = NHC_SITE.replace("#HealthCheckProgram=", "HealthCheckProgram=/usr/sbin/nhc")
    path = _site(tmp_path, main)
    with pytest.raises(inst.InstallError) as info:
        inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable))
    assert "slurm.conf:9" in str(info.value) and "--replace" in str(info.value)
    _install(path, replace=True)
    assert _value(path, "HealthCheckProgram")[1].endswith("slurmkit-healthcheck")
    assert _value(path, "HealthCheckInterval")[1] == str(inst.DEFAULT_INTERVAL_S)
    # --replace never lowers the site's PrologEpilogTimeout (120 s > slurmkit's 60 s)
    assert _value(path, "PrologEpilogTimeout") == ("sched.conf", "120")
    path.write_text(path.read_text() + "# admin note\n")  # changed since: line-wise undo
    _uninstall(path)
    assert path.read_text() == main + "# admin note\n"


def test_minimal_conf_gets_new_lines_before_nodes(tmp_path):
    main = "ClusterName=c\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
    path = _site(tmp_path, main, sched=None)
    _install(path)
    lines = path.read_text().splitlines()
    node_at = next(i for i, l in enumerate(lines) if l.startswith("NodeName="))
    for key in ("Prolog=", "Epilog=", "PrologFlags=Alloc", "SchedulerParameters=nohold_on_prolog_fail",
                "HealthCheckProgram=", "HealthCheckInterval=", "PrologEpilogTimeout="):
        at = next(i for i, l in enumerate(lines) if l.startswith(key))
        assert at < node_at and lines[at].endswith("# slurmkit-hooks: added")
    assert sorted(os.listdir(path.parent / "prolog.d")) == ["10-slurmkit"]
    _uninstall(path)
    assert path.read_text() == main


def test_existing_glob_is_kept(tmp_path):
    (tmp_path / "site.d").mkdir()
    main = f"Prolog={tmp_path}/site.d/*\nNodeName=n1\n"
    path = _site(tmp_path, main, sched=None)
    _install(path)
    assert _value(path, "Prolog")[1] == f"{tmp_path}/site.d/*"
    assert (tmp_path / "site.d" / "10-slurmkit").exists()
    _uninstall(path)
    assert path.read_text() == main and (tmp_path / "site.d").is_dir()
    assert not (tmp_path / "site.d" / "10-slurmkit").exists()


def test_shared_line_is_refused(tmp_path):
    path = _site(tmp_path, "PrologFlags=Contain SchedulerParameters=x\nNodeName=n1\n", sched=None)
    with pytest.raises(inst.InstallError) as info:
        inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable))
    assert "slurm.conf:1" in str(info.value)


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmkit", "hooks", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


def test_cli_install_dry_run_diff_and_errors(tmp_path):
    path = _site(tmp_path)
    r = _cli("install", "--slurm-conf", str(path), "--dry-run", "--state-dir", str(tmp_path / "st"))
    assert r.returncode == 0, r.stderr
    assert "+PrologFlags=Contain,X11,Alloc" in r.stdout and "scontrol reconfigure" in r.stdout
    assert path.read_text() == NHC_SITE and not (path.parent / "prolog.d").exists()
    r = _cli("install", "--slurm-conf", str(path), "--state-dir", str(tmp_path / "st"))
    assert r.returncode == 0, r.stderr
    assert _value(path, "PrologFlags")[1] == "Contain,X11,Alloc"
    # observe mode unless asked for enforce: the hooks log what they would do and change nothing
    assert load_config(path.parent / "slurmkit-hooks.toml").mode == "observe"
    r = _cli("uninstall", "--slurm-conf", str(path))
    assert r.returncode == 0, r.stderr
    assert path.read_text() == NHC_SITE
    bad = _site(tmp_path / "b", "ClusterName=c\nnot a line\n", sched=None) if (tmp_path / "b").mkdir() is None else None
    r = _cli("install", "--slurm-conf", str(bad))
    assert r.returncode == 2 and f"{bad}:2:" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"slurmkit: error: {bad}:2:") and r.stderr.count("\n") == 1
    r = _cli("install", "--slurm-conf", str(tmp_path / "missing.conf"))
    assert r.returncode == 2 and "missing.conf" in r.stderr and "Traceback" not in r.stderr
    r = _cli("install", "--slurm-conf", str(path), "--snapshot", "n1")
    assert r.returncode == 2 and r.stderr == "slurmkit: error: --snapshot: 'n1': want NODE=FILE\n"
    # past Slurm's 16 bits (the sandbox's scontrol reconfigure: "HealthCheckInterval value (86400)
    # is greater than 65535"): refused before anything is written
    before = path.read_text()
    for opt in ("--interval", "--timeout"):
        r = _cli("install", "--slurm-conf", str(path), opt, "86400")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith(f"slurmkit: error: {opt}: 86400 s: Slurm takes 0 to 65535 s ("), r.stderr
        assert path.read_text() == before and not (path.parent / "slurmkit-hooks.toml").exists()
    path.write_text(NHC_SITE.replace("#HealthCheckProgram=", "HealthCheckProgram=/usr/sbin/nhc"))
    r = _cli("install", "--slurm-conf", str(path))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"slurmkit: error: {path}:9: HealthCheckProgram=/usr/sbin/nhc belongs to the site")


def test_replace_raises_a_short_prolog_epilog_timeout_only(tmp_path):
    path = _site(tmp_path, sched=SCHED.replace("PrologEpilogTimeout=120", "PrologEpilogTimeout=20"))
    plan = _install(path)
    assert _value(path, "PrologEpilogTimeout") == ("sched.conf", "20")  # without --replace: kept, said so
    assert any("PrologEpilogTimeout=20" in n and "--replace" in n for n in plan.notes)
    _uninstall(path)
    _install(path, replace=True)
    assert _value(path, "PrologEpilogTimeout") == ("sched.conf", str(inst.DEFAULT_TIMEOUT_S))


def test_chain_keeps_nhc_after_slurmkits_check_and_uninstall_gives_it_back(tmp_path):
    # the site's line with a quoted value and a trailing comment: reinstalling reads it back as slurmd does
    main = NHC_SITE.replace("#HealthCheckProgram=", 'HealthCheckProgram="/usr/sbin/nhc"  # the NHC of the site')
    path = _site(tmp_path, main)
    log = tmp_path / "nhc.log"
    nhc = tmp_path / "nhc"
    nhc.write_text(f"#!/bin/sh\necho nhc ran >> {log}\nexit 1\n")  # NHC found a problem (and drained itself)
    nhc.chmod(0o755)
    path.write_text(main.replace("/usr/sbin/nhc", str(nhc)))
    # the hooks' own folders in the test's directory, not the host's /var/lib
    (path.parent / inst.CONFIG).write_text(render_config(
        path, state_dir=tmp_path / "state", spool_dir=tmp_path / "spool", textfile_dir=tmp_path / "textfile"))
    plan = _install(path, chain=True)
    hc = path.parent / inst.HEALTHCHECK_SHIM
    assert _value(path, "HealthCheckProgram")[1] == str(hc)
    assert any(f"{nhc} keeps running, from {hc}, after slurmkit's check" in n for n in plan.notes)
    r = subprocess.run([str(hc)], env={"SLURMD_NODENAME": "n1"}, capture_output=True, text=True, timeout=60)
    assert log.read_text() == "nhc ran\n"          # NHC ran, after slurmkit's check
    assert r.returncode == 0
    assert r.stderr.index("slurmkit-healthcheck: info: node=n1 job=- healthcheck done") \
        < r.stderr.index(f"the site's health check {nhc} exited 1")
    _install(path, chain=True)  # idempotent: still chained
    assert str(nhc) in hc.read_text()
    _uninstall(path)
    assert path.read_text() == main.replace("/usr/sbin/nhc", str(nhc))


def test_configless_cluster_is_refused_with_what_to_do(tmp_path):
    path = _site(tmp_path, NHC_SITE.replace("ClusterName=alpha\n", "ClusterName=alpha\nSlurmctldParameters=enable_configless\n"))
    with pytest.raises(inst.InstallError) as info:
        inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable))
    msg = str(info.value)
    assert "slurm.conf:3" in msg and "configless" in msg and "every node" in msg and "--configless" in msg
    plan = _install(path, configless=True)
    assert any("copy these to every node" in n for n in plan.notes)


def test_uninstall_keeps_an_admin_edited_hooks_config(tmp_path):
    path = _site(tmp_path)
    cfg = path.parent / inst.CONFIG
    _install(path)
    original = cfg.read_text()
    cfg.write_text(original + "resume_after = 5  # admin's edit\n")
    plan = _uninstall(path)
    kept = [p for p in os.listdir(path.parent) if p.startswith(inst.CONFIG + ".slurmkit-edited-")]
    assert not cfg.exists() and len(kept) == 1
    assert (path.parent / kept[0]).read_text() == original + "resume_after = 5  # admin's edit\n"
    assert any("was edited since install: kept as" in n for n in plan.notes)
    assert path.read_text() == NHC_SITE and not inst.manifest_path(path).exists()
    _install(path)  # unedited: removed, as before
    _uninstall(path)
    assert not cfg.exists() and len([p for p in os.listdir(path.parent) if ".slurmkit-edited-" in p]) == 1


def test_cli_says_nothing_to_change_on_its_own_line(tmp_path):
    path = _site(tmp_path)
    args = ("install", "--slurm-conf", str(path), "--state-dir", str(tmp_path / "st"),
            "--spool-dir", str(tmp_path / "sp"), "--textfile-dir", str(tmp_path / "tf"))
    assert _cli(*args).returncode == 0
    r = _cli(*args, "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "nothing to change: the hooks are already installed"
    assert "run 'scontrol reconfigure' for Slurm to pick up the change" in lines


def test_a_timeout_added_is_said_out_loud_and_can_be_left_unset(tmp_path):
    main = NHC_SITE.replace("PrologFlags=Contain,X11\n", "PrologFlags=Contain,X11\nPrologSlurmctld=/etc/slurm/ctld-prolog.sh\n")
    path = _site(tmp_path, main, sched=SCHED.replace("PrologEpilogTimeout=120\n", ""))
    plan = _install(path)
    note = next(n for n in plan.notes if n.startswith("PrologEpilogTimeout=60 added (the site had none)"))
    assert "PrologSlurmctld=/etc/slurm/ctld-prolog.sh" in note and "Prolog=/usr/sbin/nhc-prolog" in note
    assert "drains the node" in note and "--timeout 0" in note
    _uninstall(path)
    plan = _install(path, timeout_s=None)
    assert _value(path, "PrologEpilogTimeout") is None
    assert not any("PrologEpilogTimeout" in n for n in plan.notes)


def test_short_timeout_and_schedules_that_keep_nodes_drained_are_warned(tmp_path):
    main = NHC_SITE.replace("HealthCheckInterval=600\n", "HealthCheckInterval=3600\nHealthCheckNodeState=ALLOC,CYCLE\n")
    path = _site(tmp_path, main, sched=SCHED.replace("PrologEpilogTimeout=120", "PrologEpilogTimeout=5"))
    plan = _install(path)
    warnings = [n for n in plan.notes if n.startswith("warning:")]
    assert len(warnings) == 5, warnings
    assert any("HealthCheckNodeState=ALLOC,CYCLE" in w and "leaves MIXED (busy) nodes unchecked" in w
               for w in warnings)
    assert any("PrologEpilogTimeout=5" in w and "shorter than the hooks may take (20 s" in w
               and "nvml-timeout" in w for w in warnings)
    assert any("HealthCheckNodeState=ALLOC,CYCLE" in w and "never resumes" in w for w in warnings)
    assert any("HealthCheckInterval=3600" in w and "SlurmkitHooksStale" in w for w in warnings)
    assert any("resumed 3 h after" in w for w in warnings)
    # the defaults (ANY, 300 s, a 120 s timeout) warn about nothing
    _uninstall(path)
    path.write_text(NHC_SITE)
    (path.parent / "sched.conf").write_text(SCHED)
    assert not [n for n in _install(path).notes if n.startswith("warning:")]


def test_slurm_25_05_prolog_and_epilog_timeouts_take_the_place_of_prolog_epilog_timeout(tmp_path):
    """Slurm 25.05+ reads PrologTimeout / EpilogTimeout, each in place of PrologEpilogTimeout
    for its side (src/common/read_config.c; slurm.conf(5) 'This value is not used for prologs if
    PrologTimeout is configured'). Site lines from the aws-samples GPU cluster health check
    suite's Slurm README (2.gpu-cluster-healthcheck/slurm: 'Prolog=/path/to/...
    prolog-gpu-healthcheck.sh' and 'PrologTimeout=900'), paths edited (labelled)."""
    site = "Prolog=/opt/gpu-healthcheck/slurm/prolog-gpu-healthcheck.sh\nPrologTimeout=900   # 15 minutes\n"
    main = NHC_SITE.replace("Prolog=/usr/sbin/nhc-prolog   # LBNL Node Health Check\n", site)
    path = _site(tmp_path, main, sched=SCHED.replace("PrologEpilogTimeout=120\n", ""))
    plan = _install(path)
    note = next(n for n in plan.notes if n.startswith("PrologEpilogTimeout=60 added"))
    # it bounds the epilogs only: the site's 900 s keeps bounding its prolog, which it is not said to cut
    assert "the epilogs only" in note and "PrologTimeout=900" in note
    assert "Epilog=/etc/slurm/site-epilog.sh" in note and "prolog-gpu-healthcheck.sh" not in note
    assert not [n for n in plan.notes if n.startswith("warning:")]
    _uninstall(path)
    # both split timeouts set: PrologEpilogTimeout would bound nothing, so it is not added; a short
    # one is warned by its own name (install does not edit it)
    path.write_text(main.replace("PrologTimeout=900", "PrologTimeout=900\nEpilogTimeout=10"))
    plan = _install(path)
    assert _value(path, "PrologEpilogTimeout") is None
    assert any(n.startswith("PrologEpilogTimeout not added") and "EpilogTimeout=10" in n for n in plan.notes)
    warnings = [n for n in plan.notes if n.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: EpilogTimeout=10 (")
    assert "raise it to at least 20" in warnings[0]
    _uninstall(path)
    # a site PrologEpilogTimeout both split ones override is not warned about, however short
    (path.parent / "sched.conf").write_text(SCHED.replace("PrologEpilogTimeout=120", "PrologEpilogTimeout=5"))
    path.write_text(main.replace("PrologTimeout=900", "PrologTimeout=900\nEpilogTimeout=300"))
    assert not [n for n in _install(path).notes if n.startswith("warning:")]


def test_a_health_check_interval_of_zero_is_warned_not_kept_silently(tmp_path):
    """``HealthCheckInterval=0`` written out explicitly, as a Puppet slurm module's rspec expects
    of its generated slurm.conf (shared_examples 'slurm_conf_common': "HealthCheckInterval=0"):
    the periodic check is off (slurm.conf(5): zero disables it), so slurmkit would never resume a
    node it drained. Install keeps the site's value without --replace, and says what it means."""
    path = _site(tmp_path, NHC_SITE.replace("HealthCheckInterval=600", "HealthCheckInterval=0"))
    plan = _install(path)
    assert _value(path, "HealthCheckInterval") == ("slurm.conf", "0")
    warnings = [n for n in plan.notes if n.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: HealthCheckInterval=0 (")
    assert "never resumed" in warnings[0] and "--replace sets 300" in warnings[0]
    _uninstall(path)
    _install(path, replace=True)
    assert _value(path, "HealthCheckInterval") == ("slurm.conf", "300")


def _venv_like(root, mode=0o755):
    """``root/bin/python`` -> /usr/bin/python3 (as ``python3 -m venv`` links it) and a package
    ``root/site/slurmkit/hooks/jobxids.py``, directories of ``mode``, the file 0644."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    reader = root / "site" / "slurmkit" / "hooks" / "jobxids.py"
    reader.parent.mkdir(parents=True)
    reader.write_text("")
    reader.chmod(0o644)
    for d in (root, root / "bin", root / "site", root / "site" / "slurmkit", reader.parent):
        d.chmod(mode)
    return root / "bin" / "python", [("the slurmkit package it imports", str(root / "site" / "slurmkit"), inst.LIST),
                                     ("the Xid reader", str(reader), inst.READ)]


def test_an_interpreter_other_users_cannot_run_is_warned(open_dir):
    """The hooks' interpreter is run by the job's user for the mid-run retry's Xid query: a
    directory of mode 0700 on its way (as pyenv's /root is: a venv made from it links its
    python there), through a symbolic link too, or a package file only root reads, is warned
    about by name; an interpreter and package every user can use are not."""
    py, imports = _venv_like(open_dir / "opt" / "slurmkit")
    assert inst.interpreter_warnings(str(py), imports) == []
    locked = open_dir / "root"
    locked.mkdir(mode=0o700)
    locked.chmod(0o700)
    py2, imports2 = _venv_like(locked / "venv")
    (w,) = inst.interpreter_warnings(str(py2), imports2)
    assert w.startswith(f"warning: the hooks' interpreter {py2} cannot be run by every user (the interpreter: "
                        f"{locked} is mode 0700; the slurmkit package it imports: {locked} is mode 0700; the Xid "
                        f"reader: {locked} is mode 0700): ")
    assert "the mid-run retry's Xid query runs it as the job's user and would answer 'unknown'" in w
    (open_dir / "python").symlink_to(py2)  # an open link to it: the kernel follows it into the 0700 directory
    (w,) = inst.interpreter_warnings(str(open_dir / "python"))
    assert f"(the interpreter: {locked} is mode 0700)" in w
    Path(imports[1][1]).chmod(0o600)  # a package installed under umask 077
    (w,) = inst.interpreter_warnings(str(py), imports)
    assert f"(the Xid reader: {imports[1][1]} is mode 0600)" in w
    assert inst.others_blocked(str(open_dir / "gone" / "python"), inst.RUN) == \
        f"{open_dir / 'gone'}: No such file or directory"
    (open_dir / "noexec").write_text("")
    (open_dir / "noexec").chmod(0o744)
    assert inst.others_blocked(str(open_dir / "noexec"), inst.RUN) == f"{open_dir / 'noexec'} is mode 0744"


def test_cli_install_warns_of_an_interpreter_other_users_cannot_run(tmp_path, open_dir, monkeypatch):
    """``hooks install`` checks the interpreter it runs with (written into the shims)."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    locked = open_dir / "root"
    locked.mkdir(mode=0o700)
    locked.chmod(0o700)
    py, _ = _venv_like(locked / "venv")
    monkeypatch.setattr(sys, "executable", str(py))
    path = _site(tmp_path)
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(path), "--dry-run",
                                      "--state-dir", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    (w,) = [line for line in r.output.splitlines() if line.startswith("warning: the hooks' interpreter")]
    assert w.startswith(f"warning: the hooks' interpreter {py} cannot be run by every user (the interpreter: "
                        f"{locked} is mode 0700") and "would answer 'unknown'" in w
    assert r.output.endswith("dry run: nothing written\n") and not (path.parent / "prolog.d").exists()


def test_cli_install_writes_the_interpreter_given_with_python(tmp_path, open_dir, node_python, monkeypatch):
    """``hooks install --python PATH``: the shims run PATH (as given: a venv's python is a link,
    kept), what it reads is checked (a venv every user can run: no warning, though install
    itself runs with a locked one); one that cannot import slurmkit is refused, named."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    locked = open_dir / "root"
    locked.mkdir(mode=0o700)
    locked.chmod(0o700)
    py, _ = _venv_like(locked / "venv")
    monkeypatch.setattr(sys, "executable", str(py))  # install itself runs with a locked interpreter
    path = _site(tmp_path)
    args = ["hooks", "install", "--slurm-conf", str(path), "--state-dir", str(tmp_path / "st")]
    r = CliRunner().invoke(cli_main, [*args, "--dry-run"])
    (w,) = [line for line in r.output.splitlines() if line.startswith("warning: the hooks' interpreter")]
    assert w.endswith("give that interpreter to install: --python PATH")
    r = CliRunner().invoke(cli_main, [*args, "--python", str(node_python)])
    assert r.exit_code == 0, r.output
    assert "warning: the hooks' interpreter" not in r.output
    shim = (path.parent / inst.HEALTHCHECK_SHIM).read_text()
    assert f"py='{node_python}'" in shim and str(py) not in shim
    (tmp_path / "bare").mkdir()
    bare = tmp_path / "bare" / "python"
    bare.symlink_to("/usr/bin/python3")  # no slurmkit there
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(path), "--dry-run",
                                      "--python", str(bare)])
    assert r.exit_code == 2 and f"{bare}: --python: it cannot import slurmkit's hooks (ModuleNotFoundError: " \
        "No module named 'slurmkit')" in r.output, r.output


@pytest.mark.parametrize("line, want", [("HealthCheckNodeState=IDLE,CYCLE\n", "IDLE,CYCLE"), ("", "ANY")])
def test_install_writes_the_health_check_node_state_for_the_stale_alert(tmp_path, line, want):
    """The hooks config keeps slurm.conf's HealthCheckNodeState as install found it (Slurm's
    default ANY where it is not set): the hooks export it, and SlurmkitHooksStale spares a busy
    node the health check skips by design."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main
    from slurmkit.hooks.config import load as load_hooks_config

    path = _site(tmp_path, NHC_SITE.replace("HealthCheckInterval=600\n", f"HealthCheckInterval=600\n{line}"))
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(path), "--state-dir", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    assert load_hooks_config(path.parent / inst.CONFIG).health_check_node_state == want
