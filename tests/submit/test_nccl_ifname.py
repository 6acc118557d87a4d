"""NCCL_SOCKET_IFNAME as NCCL reads it, and GLOO_SOCKET_IFNAME resolved from it on the node.

Inputs: the examples of NCCL's own documentation (user guide, Environment Variables,
NCCL_SOCKET_IFNAME: ``eth``, ``=eth0``, ``=eth0,eth1``, ``^docker``, ``^=docker0``) and the
NCCL_SOCKET_IFNAME lines of the public training scripts in ../shared/corpus/submit/
(torchtitan ``eth0,en,eth,em,bond``; awsome-distributed-training ``^docker,lo,veth,eth``).
The shell function the jobs run (job_templates/_ifname.sh.j2) runs in the real bash against
a fake /sys/class/net tree and against this machine's own interfaces.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from slurmkit.profile import load_profile
from slurmkit.profile.nccl import IfnameRule
from slurmkit.submit import nccl, site
from slurmkit.submit.check import check, checked_facts
from slurmkit.submit.site import SiteError

TEMPLATES = Path(__file__).resolve().parents[2] / "job_templates"


# -- the rule, as NCCL's documentation gives it -------------------------------------------------

@pytest.mark.parametrize("text, allowed, refused", [
    ("eth", ["eth0", "eth1"], ["ib0", "lo"]),                       # "Use all interfaces starting with eth"
    ("=eth0", ["eth0"], ["eth01", "eth1"]),                         # "Use only interface eth0"
    ("=eth0,eth1", ["eth0", "eth1"], ["eth2", "eth10"]),            # "Use only interfaces eth0 and eth1"
    ("^docker", ["eth0", "lo"], ["docker0", "docker_gwbridge"]),   # "Do not use any interface starting with docker"
    ("^=docker0", ["docker1", "eth0"], ["docker0"]),               # "Do not use interface docker0"
    ("eth0:1234", ["eth0", "eth01"], ["ib0"]),                      # a port suffix does not change the name match
])
def test_the_rule_is_nccls(text, allowed, refused):
    rule = IfnameRule.parse(text)
    assert rule.text == text
    assert [i for i in allowed if rule.allows(i)] == allowed
    assert [i for i in refused if rule.allows(i)] == []


@pytest.mark.parametrize("text, why", [("eth0,,ib", "empty entry"), ("=eth0,=eth1", "start of the whole list"),
                                       ("eth0,^ib", "start of the whole list"), ("eth0, ib0", "whitespace")])
def test_a_rule_nccl_would_misread_is_refused(text, why):
    with pytest.raises(ValueError, match=why):
        IfnameRule.parse(text)


def _corpus_ifnames(corpus: Path) -> dict[str, str]:
    """Script -> the NCCL_SOCKET_IFNAME value it exports (uncommented lines)."""
    out = {}
    for path in sorted((corpus / "submit").rglob("*")):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                m = re.match(r'\s*export\s+NCCL_SOCKET_IFNAME="?([^"\s]+)"?', line)
                if m:
                    out[str(path.relative_to(corpus))] = m.group(1)
    return out


def test_the_public_scripts_values_reach_nccl_unchanged(corpus):
    values = _corpus_ifnames(corpus)
    assert values == {"submit/awsome-distributed-training/fsdp_llama3_1_8b-training.sbatch": "^docker,lo,veth,eth",
                      "submit/torchtitan/multinode_trainer.slurm": "eth0,en,eth,em,bond"}
    for text in values.values():
        for value in (text, text.split(",")):             # a TOML string, or a list of its entries
            p = load_profile("sandbox", overrides=({"nccl": {"socket_ifname": value}},))
            env = {v.name: v.value for v in nccl.nccl_env(site.site_facts(p))}
            assert env["NCCL_SOCKET_IFNAME"] == text      # not "=^docker,...": NCCL's syntax passes through
            assert env[nccl.GLOO_RULE] == text and "GLOO_SOCKET_IFNAME" not in env


def test_the_issue_example_list_becomes_nccls_exclusion_list():
    p = load_profile("sandbox", overrides=({"nccl": {"socket_ifname": ["^docker", "lo", "veth"]}},))
    env = {v.name: v.value for v in nccl.nccl_env(site.site_facts(p))}
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"


# -- the one validation: site check and submit refuse the same profiles -------------------------

def _errors(overrides):
    p = load_profile("dgx-h100", overrides=overrides)
    return p, [f for f in check(p) if f.level == "error"]


def test_an_exact_name_no_nic_has_is_refused_by_check_and_submit():
    p, errors = _errors(({"nccl": {"socket_ifname": "=ib0"}},))
    assert [e.key for e in errors] == ["nccl.socket_ifname"]
    assert "names ib0, which node type dgx-h100 does not have" in errors[0].message
    with pytest.raises(SiteError, match="names ib0") as ei:
        checked_facts(p)
    assert ei.value.key == "nccl.socket_ifname"
    # the rails' netdevs as a prefix rule, or an exclusion rule: fine
    assert _errors(({"nccl": {"socket_ifname": "ibp"}},))[1] == []
    assert _errors(({"nccl": {"socket_ifname": "^docker,lo,veth"}},))[1] == []


def test_gloo_interface_named_by_the_profile_is_exported_and_checked():
    p = load_profile("dgx-h100", overrides=({"nccl": {"socket_ifname": "ibp", "gloo_socket_ifname": "ibp24s0"}},))
    env = {v.name: v.value for v in nccl.nccl_env(checked_facts(p))}
    assert env["GLOO_SOCKET_IFNAME"] == "ibp24s0" and nccl.GLOO_RULE not in env
    _, errors = _errors(({"nccl": {"socket_ifname": "ibp", "gloo_socket_ifname": "enp41s0f1np1"}},))
    assert [e.key for e in errors] == ["nccl.gloo_socket_ifname"]
    assert "not allowed by NCCL_SOCKET_IFNAME=ibp" in errors[0].message


def test_roce_over_infiniband_nics_is_refused():
    p, errors = _errors(({"nccl": {"fabric": "roce"}},))
    assert errors and errors[0].key == "node_types.dgx-h100.nics[0].link_layer"
    assert "compute NIC mlx5_0 is InfiniBand, but nccl.fabric = 'roce' runs over RoCE ports" in errors[0].message
    with pytest.raises(SiteError, match="mlx5_0 is InfiniBand"):
        checked_facts(p)


def test_sharp_tc_sl_are_first_class():
    p = load_profile("dgx-h100", overrides=({"nccl": {"net_plugin": "IBext", "collnet": True, "ib_sl": 1}},))
    env = {v.name: v.value for v in nccl.nccl_env(checked_facts(p))}
    assert (env["NCCL_NET"], env["NCCL_COLLNET_ENABLE"], env["NCCL_IB_SL"]) == ("IBext", "1", "1")
    p = load_profile("rtx4090-8x", overrides=({"nccl": {"ib_tc": 106}},))   # a RoCE lossless class
    assert {v.name: v.value for v in nccl.nccl_env(checked_facts(p))}["NCCL_IB_TC"] == "106"
    _, errors = _errors(({"nccl": {"fabric": "roce", "collnet": True}},))
    assert "nccl.collnet" in [e.key for e in errors]


# -- slurmkit_ifname: the job's own shell function ----------------------------------------------

def _function() -> str:
    return (TEMPLATES / "_ifname.sh.j2").read_text()


def _resolve(rule: str, sysfs: Path | None = None, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURMD_NODENAME": "n9"}
    if sysfs is not None:
        env["SLURMKIT_SYSFS"] = str(sysfs)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["/bin/bash", "-c", _function() + '\nslurmkit_ifname "$1"', "bash", rule],
                          capture_output=True, text=True, env=env, timeout=30)


#: A fake /sys/class/net (hand-made: the names are a DGX H100's netdevs as its user guide lists
#: them, tables 5/6, plus a docker bridge, a veth and eth0; ifindex / flags files as the kernel
#: writes them: "0x1003" = IFF_UP|IFF_BROADCAST|IFF_MULTICAST, lo "0x9", a down port "0x1002").
FAKE_NET = [("lo", 1, "0x9"), ("enp170s0f1np1", 2, "0x1003"), ("ibp24s0", 3, "0x1003"),
            ("ibp41s0f0", 4, "0x1002"), ("docker0", 5, "0x1003"), ("veth1234", 6, "0x1003"),
            ("eth0", 7, "0x1003"), ("bond0", 8, "0x1003"), ("ibp64s0", 9, "0x1003")]
#: operstate (sysfs): the loopback "unknown", a port administratively down "down", one up with
#: no link "lowerlayerdown" (IFF_UP but not running), the rest "up"
OPERSTATE = {"lo": "unknown", "ibp41s0f0": "down", "ibp64s0": "lowerlayerdown"}


@pytest.fixture
def fake_sysfs(tmp_path):
    for name, idx, flags in FAKE_NET:
        d = tmp_path / "class" / "net" / name
        d.mkdir(parents=True)
        (d / "ifindex").write_text(f"{idx}\n")
        (d / "flags").write_text(f"{flags}\n")
        (d / "operstate").write_text(OPERSTATE.get(name, "up") + "\n")
    return tmp_path


@pytest.mark.parametrize("rule, want", [
    ("^docker,lo,veth,eth", "enp170s0f1np1"),     # awsome-distributed-training: first by ifindex, not by name
    ("eth0,en,eth,em,bond", "enp170s0f1np1"),     # torchtitan: interface order, not the list's order
    ("ib", "ibp24s0"),
    ("^=lo,enp170s0f1np1,ibp24s0", "docker0"),     # ibp41s0f0 is down
    ("=eth0,eth1", "eth0"),
    ("=eth0:1234", "eth0"),
    ("bond", "bond0"),
    ("=ibp64s0,bond0", "bond0"),                   # ibp64s0 is up but has no link (not running)
])
def test_the_job_resolves_gloo_from_the_rule_on_a_fake_tree(fake_sysfs, tmp_path, rule, want):
    # no `ip` on PATH: the sysfs order and up flag alone (bash builtins only)
    r = _resolve(rule, fake_sysfs, path=str(tmp_path / "nobin"))
    assert (r.returncode, r.stdout, r.stderr) == (0, want + "\n", "")
    # the Python rule agrees: the first up interface by ifindex it allows
    py = IfnameRule.parse(rule)
    assert want == next(n for n, _, f in sorted(FAKE_NET, key=lambda x: x[1])
                        if int(f, 16) & 1 and OPERSTATE.get(n, "up") in ("up", "unknown") and py.allows(n))


def test_no_allowed_interface_says_so_and_fails(fake_sysfs, tmp_path):
    r = _resolve("=ibp41s0f0", fake_sysfs, path=str(tmp_path / "nobin"))    # the down port
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("slurmkit: no interface on n9 is up, has an address and is allowed by "
                               "NCCL_SOCKET_IFNAME==ibp41s0f0")


def _live_interfaces() -> list[str]:
    """This machine's interfaces NCCL could use: up and running (sysfs flags, operstate), with an
    address (`ip -o addr`), in ifindex order."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    with_addr = {line.split()[1] for line in out.splitlines() if line.strip()}
    net = Path("/sys/class/net")
    up = [(int((d / "ifindex").read_text()), d.name) for d in net.iterdir()
          if int((d / "flags").read_text(), 16) & 1 and d.name in with_addr
          and (d / "operstate").read_text().strip() in ("up", "unknown")]
    return [n for _, n in sorted(up)]


def test_the_job_resolves_gloo_on_this_machine():
    live = _live_interfaces()
    assert "lo" in live
    assert _resolve("lo").stdout == "lo\n"
    others = [n for n in live if n != "lo"]
    # every interface but the loopback excluded, the way the public scripts exclude docker/veth
    rule = "^" + ",".join(others) if others else "lo"
    assert _resolve(rule).stdout == "lo\n"
    r = _resolve("^lo")
    assert r.stdout == (others[0] + "\n" if others else "") and r.returncode == (0 if others else 1)


def test_site_check_fails_where_submit_fails_with_the_same_words(tmp_path):
    """A RoCE fabric over the sandbox's InfiniBand NICs: `site check` and `submit` both exit 2
    and name the same file, line and key."""
    import sys

    text = (Path(__file__).resolve().parents[2] / "site" / "sandbox.toml").read_text()
    bad = tmp_path / "roce.toml"
    bad.write_text(text.replace('fabric = "infiniband"', 'fabric = "roce"'))
    line = next(i for i, x in enumerate(bad.read_text().splitlines(), 1) if x.strip() == 'link_layer = "InfiniBand"')
    want = (f"{bad}:{line}: node_types.sandbox-h100x4.nics[0].link_layer: compute NIC mlx5_0 is InfiniBand, "
            f"but nccl.fabric = 'roce' runs over RoCE ports")
    run = [sys.executable, "-m", "slurmkit"]
    chk = subprocess.run(run + ["site", "check", str(bad)], capture_output=True, text=True, timeout=60)
    sub = subprocess.run(run + ["submit", "srun", "--site", str(bad), "--dry-run", "--", "true"],
                         capture_output=True, text=True, timeout=60)
    assert chk.returncode == 2 and sub.returncode == 2
    assert f"slurmkit: error: {want}" in chk.stderr and "Traceback" not in chk.stderr
    assert sub.stderr.startswith(f"slurmkit: error: {want}") and sub.stdout == ""
    assert "INVALID for submit" in chk.stdout
    ok = subprocess.run(run + ["site", "check", "sandbox"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "NCCL_SOCKET_IFNAME: lo (interfaces starting with lo)" in ok.stdout
    assert "GLOO_SOCKET_IFNAME: resolved on each node at job start" in ok.stdout


@pytest.mark.parametrize("table, key, words", [
    ({"socket_ifname": "=eth0,=eth1"}, "nccl.socket_ifname", "only at the start of the whole list"),
    ({"gloo_socket_ifname": "^docker"}, "nccl.gloo_socket_ifname", "gloo takes exact names"),
    ({"net_plugin": "ib"}, "nccl.net_plugin", "matched by name"),
    ({"ib_sl": 16}, "nccl.ib_sl", "must be 0..15"),
])
def test_the_loader_refuses_what_nccl_or_gloo_would_misread(tmp_path, table, key, words):
    from slurmkit.profile import ProfileError

    body = "\n".join(f"{k} = {v!r}" if isinstance(v, int) else f'{k} = "{v}"' for k, v in table.items())
    site_file = tmp_path / "s.toml"
    site_file.write_text(f'extends = "sandbox"\n[nccl]\n{body}\n')
    with pytest.raises(ProfileError, match=words) as ei:
        load_profile(str(site_file))
    assert ei.value.key == key and ei.value.line == 3
