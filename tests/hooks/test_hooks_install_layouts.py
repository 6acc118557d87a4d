"""`slurmkit hooks install` on real sites' prolog layouts, each chain then run the way slurmd
22.05+ runs it (tests/hooks/slurmd_chain.py: glob order, environment, first failure stops).

Layouts: a single script; DeepOps (its prolog.sh template from ../shared/corpus/sites, rendered
here, runs ``shared/bin/run-parts.sh <conf>/prolog.d``: the directory install used to put the
link to prolog.sh into, an endless prolog); Debian's run-parts over the same directory; a shell
loop over ``DIR/*.sh``; site globs ``DIR/*`` and ``DIR/*.sh``; ``PrologFlags=Serial``; configless.
"""

import os
import stat
import sys
from pathlib import Path

import pytest

from slurmd_chain import run_like_slurmd, slurmd_env
from slurmkit.hooks import install as inst
from slurmkit.hooks.config import render as render_config
from slurmkit.slurm import conf as sconf

#: DeepOps' prolog.sh template in the shared corpus (the ``corpus`` fixture; its README names the source)
DEEPOPS_PROLOG = "sites/deepops_prolog.sh.j2.TEMPLATE"

# DeepOps roles/slurm/templates/etc/slurm/shared/bin/run-parts.sh (NVIDIA/deepops), its run loop:
# edited (labelled): the squeue look-ups for exclusive / last-user jobs are left out (no Slurm
# here; both stay 0, so *-exclusive-* and *-lastuserjob-* parts are skipped as DeepOps does), and
# the parts' output goes to $LOG instead of /var/log/slurm/prolog-epilog.
DEEPOPS_RUN_PARTS = """#!/usr/bin/env bash
set -e
parts_dir=$1
exclusive=0
last_user_job=0
failed=0
for script in "$parts_dir"/*; do
    if [ ! -x "$script" ]; then
        continue
    fi
    if [[ "$script" == *"-exclusive-"* ]] && [ "$exclusive" = 0 ]; then
        continue
    fi
    if [[ "$script" == *"-lastuserjob-"* ]] && [ "$last_user_job" = 0 ]; then
        continue
    fi
    if ! $script >>@LOG@ 2>&1; then
        failed=1
    fi
done
if [ "$failed" = "1" ]; then
    exit 1
fi
"""


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _part(path: Path, log: Path, rc: int = 0) -> Path:
    return _exe(path, f"#!/bin/sh\necho {path.name} >> {log}\nexit {rc}\n")


def _conf(tmp_path, lines: str) -> Path:
    d = tmp_path / "etc" / "slurm"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "slurm.conf"
    path.write_text(f"ClusterName=test\nSlurmctldHost=ctl(127.0.0.1)\n{lines}NodeName=n1 CPUs=4\n")
    # the hooks' own folders in the test's directory; no gres.conf: a CPU-only node, the shim exits 0
    (d / inst.CONFIG).write_text(render_config(path, state_dir=tmp_path / "state", spool_dir=tmp_path / "spool",
                                               textfile_dir=tmp_path / "textfile", mode="enforce"))
    return path


def _install(path, **kw):
    plan = inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable, **kw))
    inst.apply(plan, path, installing=True)
    return plan


def _uninstall(path):
    plan = inst.plan_uninstall(sconf.load_tree(path), inst.read_manifest(path))
    inst.apply(plan, path, installing=False)


def _prolog(path):
    return sconf.find_effective(sconf.load_tree(path), "Prolog")[1].get("Prolog")


@pytest.fixture
def dev_log():
    """A syslog socket at /dev/log for DeepOps' ``logger -s`` lines (set -e: a logger that cannot
    reach syslog fails the prolog); a real one is used where the host has it. /dev/log is one
    path for the whole host: the fixture holds a file lock while it is in use, so a test of
    another xdist worker never finds the socket of one whose reader has stopped (its senders
    then block) or sees it unlinked under its prolog."""
    import fcntl

    with open("/tmp/slurmkit-test-dev-log.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.path.exists("/dev/log"):
                yield
            else:
                yield from _syslog_socket()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _syslog_socket():
    """Bind /dev/log, read (and drop) what is sent to it until the generator is closed, unlink it."""
    import socket
    import threading

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("/dev/log")
    sock.settimeout(0.2)
    stop = threading.Event()

    def drain():  # a unix datagram socket queues 10 messages, then its senders block: read them
        while not stop.is_set():
            try:
                sock.recv(65536)
            except OSError:
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield
    finally:
        stop.set()
        reader.join(timeout=5)
        sock.close()
        os.unlink("/dev/log")


def _deepops(tmp_path, corpus):
    """DeepOps' layout, rendered: Prolog=<conf>/prolog.sh running <conf>/prolog.d via run-parts.sh."""
    conf_dir = tmp_path / "etc" / "slurm"
    log = tmp_path / "parts.log"
    template = (corpus / DEEPOPS_PROLOG).read_text()
    prolog = _exe(conf_dir / "prolog.sh", template.replace("{{ slurm_config_dir }}", str(conf_dir)))
    _exe(conf_dir / "shared" / "bin" / "run-parts.sh", DEEPOPS_RUN_PARTS.replace("@LOG@", str(log)))
    # part names from DeepOps' roles/slurm/templates/etc/slurm/prolog.d
    for name in ("50-all-enroot-dirs", "50-create-scratch", "50-exclusive-gpu", "95-all-rootless"):
        _part(conf_dir / "prolog.d" / name, log)
    path = _conf(tmp_path, f"Prolog={prolog}\n")
    return path, prolog, log


def test_deepops_prolog_gets_slurmkit_in_its_directory_not_a_cycle(corpus, tmp_path, dev_log):
    path, prolog, log = _deepops(tmp_path, corpus)
    before = path.read_text()
    plan = _install(path)
    d = path.parent / "prolog.d"
    assert _prolog(path) == str(prolog)  # left as it is: no glob over the directory prolog.sh runs
    assert not (d / inst.SITE_LINK).exists()
    assert (d / "99-slurmkit").exists() and os.access(d / "99-slurmkit", os.X_OK)
    note = next(n for n in plan.notes if n.startswith(f"Prolog={prolog}: slurmd will run"))
    assert note.index("50-all-enroot-dirs") < note.index("95-all-rootless") < note.index("99-slurmkit")
    assert any("endless" in n and "run-parts" in n for n in plan.notes)
    status, ran, _ = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)), timeout=60)
    assert status == 0 and ran == [str(prolog)]
    lines = log.read_text().splitlines()
    assert lines[:3] == ["50-all-enroot-dirs", "50-create-scratch", "95-all-rootless"]  # site's order kept
    assert any(line.startswith("slurmkit-prolog:") for line in lines[3:])  # then slurmkit's, once
    # a failing part still fails the prolog (DeepOps' run-parts.sh passes it on)
    _part(d / "50-create-scratch", log, rc=1)
    assert run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))[0] == 1
    _part(d / "50-create-scratch", log)
    _install(path)  # idempotent
    assert sorted(os.listdir(d)).count("99-slurmkit") == 1 and _prolog(path) == str(prolog)
    _uninstall(path)
    assert path.read_text() == before and not (d / "99-slurmkit").exists()


def test_debian_run_parts_over_the_conf_dirs_prolog_d(tmp_path):
    conf_dir = tmp_path / "etc" / "slurm"
    log = tmp_path / "parts.log"
    site = _exe(tmp_path / "site" / "prolog", f"#!/bin/sh\nset -e\n/usr/bin/run-parts --exit-on-error {conf_dir}/prolog.d\n")
    _part(conf_dir / "prolog.d" / "20-mounts", log)
    path = _conf(tmp_path, f"Prolog={site}\n")
    _install(path)
    assert _prolog(path) == str(site) and (conf_dir / "prolog.d" / "99-slurmkit").exists()
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0 and ran == [str(site)]
    assert log.read_text() == "20-mounts\n" and "slurmkit-prolog:" in err


def test_shell_loop_over_sh_files_gets_a_matching_name(tmp_path):
    log = tmp_path / "parts.log"
    parts = tmp_path / "site" / "prolog.d"
    _part(parts / "10-a.sh", log)
    site = _exe(tmp_path / "site" / "prolog", f'#!/bin/sh\nfor f in {parts}/*.sh; do "$f" || exit 1; done\n')
    path = _conf(tmp_path, f"Prolog={site}\n")
    _install(path)
    assert (parts / "99-slurmkit.sh").exists() and _prolog(path) == str(site)
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0 and log.read_text() == "10-a.sh\n" and "slurmkit-prolog:" in err


def test_single_script_becomes_a_glob_that_runs_it_first(tmp_path):
    log = tmp_path / "parts.log"
    site = _part(tmp_path / "site" / "prolog.sh", log)
    path = _conf(tmp_path, f"Prolog={site}\nPrologFlags=Serial\n")
    before = path.read_text()
    plan = _install(path)
    d = path.parent / "prolog.d"
    assert _prolog(path) == f"{d}/*"
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0 and ran == [str(d / inst.SITE_LINK), str(d / inst.OUR_SHIM)]
    assert log.read_text() == "prolog.sh\n" and "slurmkit-prolog:" in err
    assert any(f"1. {d / inst.SITE_LINK} (exec {site}); 2. {d / inst.OUR_SHIM}" in n for n in plan.notes)
    assert sconf.find_effective(sconf.load_tree(path), "PrologFlags")[1].get("PrologFlags") == "Serial,Alloc"
    assert any(n.startswith("PrologFlags=Serial keeps Serial") for n in plan.notes)
    _part(site, log, rc=3)  # the site's prolog fails: slurmd stops there with its status
    status, ran, _ = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 3 and ran == [str(d / inst.SITE_LINK)]
    _uninstall(path)
    assert path.read_text() == before and not d.exists()


def test_site_prolog_that_finds_its_files_through_dollar_0_runs_once_and_succeeds(tmp_path):
    """A single-script site Prolog that sources ``$(dirname "$0")/lib.sh`` (a link in prolog.d
    would make ``$0`` the link, and the prolog fail with "lib.sh: not found" on every node):
    run through the installed chain the way slurmd runs it, it runs once, by its own path, and
    succeeds; uninstall names the admin's file added to prolog.d since, which stops running; an
    earlier install's link is replaced by the wrapper."""
    log = tmp_path / "site.log"
    site_dir = tmp_path / "opt" / "site"
    _exe(site_dir / "lib.sh", f'site_log() {{ echo "$1 $0" >> {log}; }}\n')
    site = _exe(site_dir / "prolog", '#!/bin/sh\nset -e\n. "$(dirname "$0")/lib.sh"\nsite_log prolog\n')
    path = _conf(tmp_path, f"Prolog={site}\n")
    before = path.read_text()
    plan = _install(path)
    d = path.parent / "prolog.d"
    assert not os.path.islink(d / inst.SITE_LINK) and os.access(d / inst.SITE_LINK, os.X_OK)
    assert any(f"from the wrapper {d / inst.SITE_LINK}" in n for n in plan.notes)
    alloc = next(n for n in plan.notes if n.startswith("PrologFlags=Alloc added"))
    assert f"the site's Prolog {site} as well as slurmkit's" in alloc and "when the job is allocated" in alloc
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0, err
    assert ran == [str(d / inst.SITE_LINK), str(d / inst.OUR_SHIM)]
    assert log.read_text() == f"prolog {site}\n"  # once, and $0 is the site's own path
    admin = _part(d / "50-admin-added", tmp_path / "admin.log")
    plan = inst.plan_uninstall(sconf.load_tree(path), inst.read_manifest(path))
    warn = [n for n in plan.notes if n.startswith("warning: not slurmkit's")]
    assert len(warn) == 1 and str(admin) in warn[0] and f"Prolog back to 'Prolog={site}'" in warn[0]
    assert str(d / inst.SITE_LINK) not in warn[0]
    # an install made by an earlier slurmkit (a link to the site's script): installing again
    # puts the wrapper in the link's place
    admin.unlink()
    (d / inst.SITE_LINK).unlink()
    (d / inst.SITE_LINK).symlink_to(site)
    _install(path)
    assert not os.path.islink(d / inst.SITE_LINK)
    assert (d / inst.SITE_LINK).read_text() == inst.site_wrapper(str(site))
    assert site.read_text().startswith('#!/bin/sh\nset -e\n. "$(dirname "$0")/lib.sh"')  # written beside, not through
    plan = inst.plan_uninstall(sconf.load_tree(path), inst.read_manifest(path))
    inst.apply(plan, path, installing=False)
    assert path.read_text() == before and not d.exists()


@pytest.mark.parametrize("pattern,files,shim,order", [
    ("*", ["20-a", "50-b"], "10-slurmkit", ["50-b", "20-a", "10-slurmkit"]),
    ("*.sh", ["a.sh", "b.sh", "README"], "10-slurmkit.sh", ["b.sh", "a.sh", "10-slurmkit.sh"]),
    ("*", ["05-early", "50-b"], "00-slurmkit", ["50-b", "05-early", "00-slurmkit"]),
])
def test_site_glob_is_kept_and_gets_a_matching_shim(tmp_path, pattern, files, shim, order):
    log = tmp_path / "parts.log"
    site_d = tmp_path / "site.d"
    for f in files:
        _part(site_d / f, log)
    path = _conf(tmp_path, f"Prolog={site_d}/{pattern}\n")
    before = path.read_text()
    plan = _install(path)
    assert _prolog(path) == f"{site_d}/{pattern}"  # kept as the glob: no link to a pattern
    assert not any(os.path.islink(site_d / f) for f in os.listdir(site_d))
    assert (site_d / shim).exists()
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0 and [os.path.basename(p) for p in ran] == order
    assert log.read_text().split() == [o for o in order if o != shim] and "slurmkit-prolog:" in err
    assert any("; ".join(f"{i}. {site_d / o}" for i, o in enumerate(order, 1)) in n for n in plan.notes)
    _uninstall(path)
    assert path.read_text() == before and sorted(os.listdir(site_d)) == sorted(files)


def test_a_glob_install_cannot_match_is_refused(tmp_path):
    (tmp_path / "site.d").mkdir()
    path = _conf(tmp_path, f"Prolog={tmp_path}/site.d/[0-9]*\n")
    with pytest.raises(inst.InstallError) as info:
        _install(path)
    assert "slurm.conf:3" in str(info.value) and "cannot name a file this pattern matches" in str(info.value)


def test_unreadable_site_script_never_globs_a_directory_of_the_sites(tmp_path):
    log = tmp_path / "parts.log"
    conf_dir = tmp_path / "etc" / "slurm"
    _part(conf_dir / "prolog.d" / "50-site-part", log)  # the site's own prolog.d, run by a script not here
    path = _conf(tmp_path, "Prolog=/opt/site/missing-prolog\n")
    plan = _install(path)
    assert _prolog(path) == f"{conf_dir}/slurmkit-prolog.d/*"
    assert sorted(os.listdir(conf_dir / "prolog.d")) == ["50-site-part"]
    assert any("cannot be read here" in n for n in plan.notes)


def test_configless_deepops_site_is_refused_then_said_what_to_copy(corpus, tmp_path, dev_log):
    path, prolog, _ = _deepops(tmp_path, corpus)
    path.write_text(path.read_text().replace("ClusterName=test\n", "ClusterName=test\nSlurmctldParameters=enable_configless\n"))
    with pytest.raises(inst.InstallError):
        _install(path)
    plan = _install(path, configless=True)
    assert (path.parent / "prolog.d" / "99-slurmkit").exists() and _prolog(path) == str(prolog)
    assert any("copy these to every node" in n for n in plan.notes)
    assert stat.S_IMODE(os.stat(path.parent / "prolog.d" / "99-slurmkit").st_mode) == 0o755


# Slurm-GCP's slurm_mux (GoogleCloudPlatform/slurm-gcp, the external prolog/epilog setup script
# that writes /opt/apps/adm/slurm/slurm_mux and links slurm_prolog / slurm_epilog to it), its run
# loop; edited (labelled): the debug log settings (slurm_mux.conf, LOGFILE) are left out, the
# scriptlets' output goes to stderr instead of /dev/null.
SLURM_MUX = """#!/bin/bash
set -e
BASE=$(readlink -f $0)
BASE=${BASE%/*}
for SCRIPTLET in ${BASE}/${SLURM_SCRIPT_CONTEXT}.d/*.${SLURM_SCRIPT_CONTEXT}; do
\tif [[ -x ${SCRIPTLET} ]]; then
\t\techo "Running ${SCRIPTLET}"
\t\t${SCRIPTLET} $@ 1>&2
\tfi
done
for SCRIPTLET in ${BASE}/partition-${SLURM_JOB_PARTITION}-${SLURM_SCRIPT_CONTEXT}.d/*.${SLURM_SCRIPT_CONTEXT}; do
\tif [[ -x ${SCRIPTLET} ]]; then
\t\t${SCRIPTLET} $@ 1>&2
\tfi
done
"""


def test_slurm_gcp_mux_keeps_its_scriptlets_and_runs_before_slurmkit(tmp_path):
    """Prolog=/opt/apps/adm/slurm/slurm_prolog, a link to slurm_mux, which runs
    ``$SLURM_SCRIPT_CONTEXT.d/*.$SLURM_SCRIPT_CONTEXT`` beside itself (found through
    ``readlink -f $0``): install's link to it still finds that directory, the scriptlets run
    before slurmkit's prolog, and a failing scriptlet (the mux's ``set -e``) fails the prolog."""
    adm = tmp_path / "adm"
    log = tmp_path / "parts.log"
    _exe(adm / "slurm_mux", SLURM_MUX)
    (adm / "slurm_prolog").symlink_to("slurm_mux")
    _part(adm / "prolog_slurmd.d" / "start-rxdm.prolog_slurmd", log)
    path = _conf(tmp_path, f"Prolog={adm / 'slurm_prolog'}\n")
    plan = _install(path)
    d = path.parent / "prolog.d"
    assert _prolog(path) == f"{d}/*" and (d / inst.SITE_LINK).read_text() == inst.site_wrapper(str(adm / "slurm_prolog"))
    assert any(f"1. {d / inst.SITE_LINK} (exec {adm / 'slurm_prolog'}); 2. {d / inst.OUR_SHIM}" in n for n in plan.notes)
    status, ran, err = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 0 and ran == [str(d / inst.SITE_LINK), str(d / inst.OUR_SHIM)]
    assert log.read_text() == "start-rxdm.prolog_slurmd\n" and "slurmkit-prolog:" in err
    _part(adm / "prolog_slurmd.d" / "start-rxdm.prolog_slurmd", log, rc=4)
    status, ran, _ = run_like_slurmd(_prolog(path), slurmd_env(conf=str(path)))
    assert status == 4 and ran == [str(d / inst.SITE_LINK)]


def test_real_sites_timeout_note_reads_as_a_sentence(tmp_path, corpus):
    """genomedk (Prolog, Epilog and PrologSlurmctld of its own) and dgx1x4 (none): the note for
    the PrologEpilogTimeout install adds names the site's scripts it now bounds, or none."""
    for site, named in (("genomedk", ["Prolog=/opt/slurm/scripts/slurm-prolog",
                                      "PrologSlurmctld=/opt/slurm/scripts/controller-prolog"]), ("dgx1x4", [])):
        d = tmp_path / site
        d.mkdir()
        path = d / "slurm.conf"
        path.write_text((corpus / "sites" / f"{site}_slurm.conf").read_text())
        plan = inst.plan_install(sconf.load_tree(path), inst.InstallSpec(python=sys.executable,
                                                                        config=render_config(path)))
        note = next(n for n in plan.notes if n.startswith("PrologEpilogTimeout=60 added"))
        assert all(x in note for x in named)
        assert ("the site's own too" in note) == bool(named)
        assert "epilog, a Prolog" not in note and "; a Prolog or Epilog that runs past it is killed" in note


#: Magic Castle's Puppet template of slurm.conf (../shared/corpus; its README names the source)
MAGIC_CASTLE = "sites/turn4/slurm.conf.epp.TEMPLATE"


def _render_epp(text: str, values: dict, conf_dir: Path) -> str:
    """The EPP template as Puppet renders it for one site: ``<%= $x %>`` from ``values``, the
    control lines (``<% ... -%>``) dropped, of an ``if``/``else`` pair the ``if`` branch kept
    (x11 forwarding on: the template's ``PrologFlags=alloc,contain`` of the ``else`` is
    dropped), and its absolute ``include /etc/slurm/`` pointed at ``conf_dir`` (labelled edit:
    the test's files, not the host's)."""
    import re

    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("<%") and s.endswith("-%>") and "<%=" not in s:
            continue
        line = re.sub(r"<% if \$\w+ \{ %>.*?<% \} %>", "", line)
        out.append(re.sub(r"<%=\s*(.*?)\s*%>", lambda m: values[m.group(1)], line))
    rendered = "\n".join(out) + "\n"
    rendered = rendered.replace("PrologFlags=alloc,contain\n", "", 1) if rendered.count("PrologFlags=") == 2 else rendered
    return rendered.replace("include /etc/slurm/", f"include {conf_dir}/")


def test_puppet_magic_castle_site_gets_lines_to_add_and_nothing_written(corpus, tmp_path):
    """Magic Castle's slurm.conf, generated by Puppet (absolute ``include`` first and last,
    lower-case ``PrologFlags=alloc,contain,x11``, a single-script ``Epilog``, ``# Prolog=`` left
    commented): ``install --print`` edits nothing and prints the lines for the template:
    ``Epilog`` as a glob over the directory whose wrapper runs the site's epilog by its own path,
    the hooks' keys as new lines, ``PrologFlags`` not at all (its ``alloc`` is read as Slurm reads
    it, case-insensitively), and the files to deploy."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    d = tmp_path / "etc" / "slurm"
    d.mkdir(parents=True)
    values = {"$slurmdb[0]": "mgmt1", "$cluster_name": "phoenix", "max($nb_nodes, 1)": "2", "$resume_timeout": "3600",
              "$suspend_time": "3600", "$suspend_rate": "20", "$resume_rate": "20", "$log_level": "info",
              "$hostname": "mgmt1", "$slurmdb[1]": "mgmt2", "$suspend_exc_nodes": "gpu-node1",
              "$name": "gpu", "join($values['nodes'], ',')": "gpu-node[1-2]"}
    conf = d / "slurm.conf"
    conf.write_text(_render_epp((corpus / MAGIC_CASTLE).read_text(), values, d))
    (d / "nodes.conf").write_text("NodeName=gpu-node[1-2] CPUs=16 RealMemory=60000 Gres=gpu:a100:4\n")
    (d / "slurm-addendum.conf").write_text("")
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(conf), "--print",
                                      "--state-dir", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    lines = r.output.splitlines()
    assert lines[lines.index(f"# {conf}: was: Epilog=/etc/slurm/epilog") + 1] == f"Epilog={d}/epilog.d/*"
    assert lines[lines.index(f"# {conf}: was: SchedulerParameters=salloc_wait_nodes") + 1] == \
        "SchedulerParameters=salloc_wait_nodes,nohold_on_prolog_fail"
    for new in (f"Prolog={d}/prolog.d/*", f"HealthCheckProgram={d}/slurmkit-healthcheck", "HealthCheckInterval=300",
                "PrologEpilogTimeout=60"):
        assert lines[lines.index(new) - 1] == f"# {conf}: new"
    assert not any(x.startswith("PrologFlags=") for x in lines)
    wrapper = lines.index(f"cat > '{d / 'epilog.d' / inst.SITE_LINK}' <<'SLURMKIT_EOF'")
    assert lines[wrapper + 3] == "exec '/etc/slurm/epilog' \"$@\""
    assert lines[-1] == "# --print: nothing written"
