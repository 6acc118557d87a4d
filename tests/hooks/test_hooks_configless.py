"""A configless node: slurmd keeps slurm.conf and gres.conf in ``<SlurmdSpoolDir>/conf-cache``
(src/slurmd/slurmd/slurmd.c ``_read_config``: ``conf_cache = <spooldir>/conf-cache``), and the
node has no ``/etc/slurm/slurm.conf`` nor ``gres.conf``. The prolog gets ``SLURM_CONF`` pointing
into the cache (slurmd sets it; a real job's environment shows
``SLURM_CONF=/var/spool/slurm/d/conf-cache/slurm.conf``), HealthCheckProgram gets none and finds
the cache through the hooks config's ``conf_cache``.

The fault is the double-bit (uncorrectable) ECC error of a real ``nvidia-smi -q`` capture, and
scontrol a recorder (tests/hooks/recording_scontrol.py).
"""

import json
import re
import shutil

from nodeenv import nvml_gpu_of
from recording_scontrol import dbe_snapshot as _dbe
from recording_scontrol import install_recorder


def _configless(node, tmp_path, snapshot):
    """Move the node's slurm.conf and gres.conf into slurmd's conf cache under a per-node
    SlurmdSpoolDir (``/var/spool/slurmd/%n``); the hooks config names the controller's
    /etc/slurm/slurm.conf (absent here) and the cache with ``%n``."""
    cache = tmp_path / "spool-slurmd" / "n1" / "conf-cache"
    cache.mkdir(parents=True)
    shutil.move(node.slurm_conf, cache / "slurm.conf")
    shutil.move(node.gres_conf, cache / "gres.conf")
    bin_dir = tmp_path / "fake-bin"
    log = tmp_path / "scontrol.log"
    install_recorder(bin_dir, log)
    node.write_config({"n1": snapshot}, bin_dir=str(bin_dir),
                      extra=f'conf_cache = "{tmp_path}/spool-slurmd/%n/conf-cache"\n')
    # the config install wrote names gres_conf beside the controller's slurm.conf: drop that key
    # (an install on a configless cluster writes none; the gres.conf slurmd reads is found)
    node.cfg_path.write_text("\n".join(line for line in node.cfg_path.read_text().splitlines()
                                       if not line.startswith("gres_conf")) + "\n")
    return cache, log


def _dbe_node(node, healthy, corpus, tmp_path, gpu: int):
    """A configless node (:func:`_configless`) whose NVML GPU ``gpu`` has the corpus DBE:
    ``(GPU record, volatile count, conf cache, scontrol log)``."""
    _, snap = healthy
    g = nvml_gpu_of(node, snap, gpu)
    bad, volatile = _dbe(corpus, snap, g["index"])
    snapshot = tmp_path / "dbe.json"
    snapshot.write_text(json.dumps(bad))
    cache, log = _configless(node, tmp_path, snapshot)
    return g, volatile, cache, log


def _dbe_reason(g) -> str:
    """The drain reason's start for the DBE on ``g`` (a regex: the reason names the GPU's gres
    index too, and a long reason is cut at a word)."""
    return rf"slurmkit: ecc_volatile_uncorrectable GPU{g['index']} \(gres index \d+, {g['pci_bus_id']}\)"


def _drained(log, cache, want: str) -> bool:
    """Whether the recording scontrol's ``log`` holds a drain of n1 with reason ``want`` (a
    regex), called with SLURM_CONF the cache's slurm.conf."""
    prefix = re.escape(f"SLURM_CONF={cache / 'slurm.conf'} update nodename=n1 state=drain reason=")
    return re.search(prefix + want, log.read_text()) is not None


def test_configless_node_with_a_dbe_drains(node, healthy, corpus, tmp_path):
    g, volatile, cache, log = _dbe_node(node, healthy, corpus, tmp_path, 2)
    assert not node.slurm_conf.exists() and not node.gres_conf.exists()
    want = _dbe_reason(g) + rf": {volatile} uncorrectable ECC"
    # the prolog: slurmd gives it SLURM_CONF in its cache
    r = node.run(node.prolog, env={"SLURM_CONF": str(cache / "slurm.conf")})
    assert r.returncode == 1, r.stderr
    assert re.search(want, r.stderr) and "GPU checks skipped" not in r.stderr and "own trouble" not in r.stderr
    assert _drained(log, cache, want)
    # the periodic check: no SLURM_CONF at all; the cache is found through conf_cache (%n expanded)
    log.unlink()
    r = node.run(node.healthcheck, job_id=None, gpus=None, env={"SLURM_CONF": ""})
    assert r.returncode == 0 and re.search(want, r.stderr) and "own trouble" not in r.stderr, r.stderr
    assert _drained(log, cache, want)
    assert node.metric("n1", "healthcheck", "slurmkit_hook_own_errors_total") == 0


def test_unreadable_gres_conf_is_own_trouble_and_gres_still_judges(node, healthy, corpus, tmp_path):
    """The cache without gres.conf (slurm.conf says ``Gres=gpu:h100:4``): own trouble, counted,
    and the checks run against Gres= and NVML: the DBE still drains; never "no GPUs expected"."""
    g, volatile, cache, log = _dbe_node(node, healthy, corpus, tmp_path, 2)
    (cache / "gres.conf").unlink()
    r = node.run(node.healthcheck, job_id=None, gpus=None, env={"SLURM_CONF": ""})
    assert r.returncode == 0, r.stderr
    assert "GPU checks skipped" not in r.stderr and "no GPUs expected" not in r.stderr
    assert f"own trouble (no drain): no gres.conf (looked at {cache / 'gres.conf'}), while" in r.stderr, r.stderr
    assert f"while {cache / 'slurm.conf'} gives n1 Gres=gpu:h100:4: checking its 4 GPUs against Gres= and NVML" \
        in r.stderr
    assert re.search(_dbe_reason(g).removeprefix("slurmkit: "), r.stderr)
    assert "state=drain" in log.read_text()
    assert node.metric("n1", "healthcheck", "slurmkit_hook_own_errors_total") == 1
    assert node.metric("n1", "healthcheck", "slurmkit_health_check_status", check="gpu_count", gpu="") == 0
    # gres.conf there but unreadable for a reason of its own: the same
    (cache / "gres.conf").mkdir()
    r = node.run(node.healthcheck, job_id=None, gpus=None, env={"SLURM_CONF": ""})
    assert "Gres=gpu:h100:4: checking its 4 GPUs" in r.stderr and "ecc_volatile_uncorrectable" in r.stderr
    # no slurm.conf anywhere either: own trouble, never "no GPUs expected"
    (cache / "gres.conf").rmdir()
    (cache / "slurm.conf").unlink()
    r = node.run(node.healthcheck, job_id=None, gpus=None, env={"SLURM_CONF": ""})
    assert "no slurm.conf either" in r.stderr and "no GPUs expected" not in r.stderr
    assert node.metric("n1", "healthcheck", "slurmkit_hook_own_errors_total") == 3


#: cluster-toolkit's slurm.conf template (../shared/corpus; its README names the source), Python
#: str.format placeholders filled as Slurm-GCP's conf.py fills them (the controller on loopback)
TOOLKIT_TEMPLATE = "sites/turn4/long-prolog-slurm.conf.tpl.TEMPLATE"
TOOLKIT_VALUES = {"control_host": "ctl", "control_addr": "127.0.0.2", "auth_key": "munge", "mpi_default": "pmi2",
                  "control_host_port": "6820-6830", "state_save": "/var/spool/slurm", "accounting_storage_host": "ctl",
                  "name": "toolkit", "slurmlog": "/var/log/slurm"}

# cloud.conf as Slurm-GCP's scripts/conf.py ``conflines`` / ``nodeset_lines`` write it
# (GoogleCloudPlatform/slurm-gcp: the expected output of its scripts/tests/test_conf.py, with
# the Prolog/Epilog lines conflines adds when custom prolog / epilog scripts are configured and
# one GPU nodeset); edited (labelled): the nodeset is named n[1-2] with Gres=gpu:4 to match the
# test node, the custom scripts directory is the test's.
CLOUD_CONF = """\
PrivateData=cloud
LaunchParameters=enable_nss_slurm,use_interactive_step
SlurmctldParameters=cloud_dns,enable_configless,idle_on_node_suspend
SchedulerParameters=bf_continue,salloc_wait_nodes,ignore_prefer_validation
GresTypes=gpu
Prolog={custom}/prolog.d/*
Epilog={custom}/epilog.d/*
SuspendProgram=/slurm/scripts/suspend.py
ResumeProgram=/slurm/scripts/resume.py
ResumeFailProgram=/slurm/scripts/suspend.py
ResumeRate=0
ResumeTimeout=300
SuspendRate=0
SuspendTimeout=300
TopologyPlugin=topology/tree
NodeName=DEFAULT State=UNKNOWN RealMemory=7552 Boards=1 SocketsPerBoard=1 CoresPerSocket=1 ThreadsPerCore=2 CPUs=2
NodeName=n[1-2] State=CLOUD Gres=gpu:4
NodeSet=x-gpu Nodes=n[1-2]
PartitionName=gpu Nodes=x-gpu State=UP DefMemPerCPU=3776 SuspendTime=300 Oversubscribe=Exclusive Default=YES
"""


def test_cluster_toolkit_site_gets_printed_lines_and_its_configless_node_drains(node, healthy, corpus, tmp_path):
    """A generated, configless site (cluster-toolkit / Slurm-GCP: slurm.conf from a template,
    ``include cloud.conf`` generated beside it with ``enable_configless`` and a Prolog glob, and
    gres.conf ``NodeName=... Name=gpu File=/dev/nvidia[0-3]`` as ``gen_cloud_gres_conf`` writes
    it): ``install --print`` prints the lines for the generator and the files to deploy and
    edits nothing; a node whose slurmd cached these files (``SlurmdSpoolDir=/var/spool/slurmd``
    in the template: ``conf_cache`` written) drains for a DBE."""
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    ctl = tmp_path / "ctl" / "etc" / "slurm"
    ctl.mkdir(parents=True)
    custom = tmp_path / "ctl" / "custom_scripts"
    for d in ("prolog.d", "epilog.d"):
        (custom / d).mkdir(parents=True)
    (custom / "prolog.d" / "50-site.prolog").write_text("#!/bin/sh\nexit 0\n")
    conf = ctl / "slurm.conf"
    conf.write_text((corpus / TOOLKIT_TEMPLATE).read_text().format(**TOOLKIT_VALUES))
    (ctl / "cloud.conf").write_text(CLOUD_CONF.format(custom=custom))
    gres = f"NodeName=n[1-2] Name=gpu File={node.dev}/nvidia[0-3]\n"
    (ctl / "gres.conf").write_text(gres)
    before = {p.name: p.read_bytes() for p in ctl.iterdir()}
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(conf), "--print", "--configless",
                                      "--state-dir", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    out = r.output
    assert {p.name: p.read_bytes() for p in ctl.iterdir()} == before  # nothing edited or created
    assert not (custom / "prolog.d" / "10-slurmkit").exists()
    lines = out.splitlines()
    # each line under the comment saying what it replaces, in the file that defines the key
    assert lines[lines.index(f"# {conf}: was: PrologFlags=Contain") + 1] == "PrologFlags=Contain,Alloc"
    assert lines[lines.index(f"# {ctl / 'cloud.conf'}: was: SchedulerParameters=bf_continue,salloc_wait_nodes,"
                             "ignore_prefer_validation") + 1] == \
        "SchedulerParameters=bf_continue,salloc_wait_nodes,ignore_prefer_validation,nohold_on_prolog_fail"
    assert f"HealthCheckProgram={ctl / 'slurmkit-healthcheck'}" in lines
    assert not any(x.startswith("PrologEpilogTimeout=") for x in lines)  # the site's 600 is kept
    assert any(x.startswith("# kept the site's PrologEpilogTimeout=600") for x in lines)
    # the files to deploy: the shim into the site's prolog.d glob, the health check, the config
    assert f"cat > '{custom / 'prolog.d' / '10-slurmkit'}' <<'SLURMKIT_EOF'" in lines
    assert f"chmod 755 '{ctl / 'slurmkit-healthcheck'}'" in lines
    assert 'conf_cache = "/var/spool/slurmd/conf-cache"' in lines and not any(x.startswith("gres_conf") for x in lines)
    assert "# --print: nothing written" in lines
    assert any(x.startswith("# PrologFlags=Alloc added, as written only: the site's Contain already sets it")
               for x in lines)
    copy = next(x for x in lines if x.startswith("# configless: copy these to every node"))
    assert str(custom / "prolog.d" / "10-slurmkit") in copy and str(ctl / "prolog.d") not in copy
    assert "/var/spool/slurmd/conf-cache" in copy
    # the node: slurmd's cache holds what slurmctld sent (slurm.conf, the included cloud.conf, gres.conf)
    g, volatile, cache, log = _dbe_node(node, healthy, corpus, tmp_path, 1)
    for name in ("slurm.conf", "cloud.conf", "gres.conf"):
        shutil.copy(ctl / name, cache / name)
    r = node.run(node.healthcheck, job_id=None, gpus=None, env={"SLURM_CONF": ""})
    want = _dbe_reason(g)
    assert r.returncode == 0 and re.search(want, r.stderr) and "own trouble" not in r.stderr, r.stderr
    assert _drained(log, cache, want)


def test_which_slurm_conf_and_gres_conf_a_hook_reads(tmp_path):
    """SLURM_CONF first, then the hooks config's slurm_conf, then slurmd's cache (%n expanded);
    gres.conf: the config's when it is a file, else beside the slurm.conf found."""
    from slurmkit.hooks.confpaths import DEFAULT_CONF_CACHES, locate

    etc, cache = tmp_path / "etc", tmp_path / "spool" / "n7" / "conf-cache"
    for d in (etc, cache):
        d.mkdir(parents=True)
        (d / "slurm.conf").write_text("ClusterName=t\n")
    (cache / "gres.conf").write_text("Name=gpu File=/dev/nvidia0\n")
    spool = f"{tmp_path}/spool/%n/conf-cache"
    got = locate({"SLURM_CONF": str(cache / "slurm.conf")}, str(etc / "slurm.conf"), None, spool, "n7")
    assert (got.slurm_conf, got.gres_conf) == (str(cache / "slurm.conf"), str(cache / "gres.conf"))
    # no SLURM_CONF (the health check): the config's slurm.conf, and only the gres.conf beside it
    # (none there: none, never the cache's of another slurm.conf)
    got = locate({}, str(etc / "slurm.conf"), None, spool, "n7")
    assert got.slurm_conf == str(etc / "slurm.conf") and got.gres_conf is None
    assert got.looked_gres == (str(etc / "gres.conf"),)
    # the controller's path absent on the node: the cache
    got = locate({}, str(tmp_path / "ctl" / "slurm.conf"), None, spool, "n7")
    assert got.slurm_conf == str(cache / "slurm.conf")
    # a gres.conf the config names wins when it is a file
    (etc / "gres.conf").write_text("")
    assert locate({}, str(tmp_path / "x"), str(etc / "gres.conf"), spool, "n7").gres_conf == str(etc / "gres.conf")
    # no conf_cache in the config: slurmd's link and its default spool directory
    got = locate({}, str(tmp_path / "x"), None, None, "n7")
    assert got.looked_slurm == (str(tmp_path / "x"), *(f"{d}/slurm.conf" for d in DEFAULT_CONF_CACHES))
