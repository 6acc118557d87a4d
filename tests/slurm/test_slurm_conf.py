"""slurm.conf text model: round trip, lookups across Include files, edits, clear errors."""

from pathlib import Path

import pytest

from slurmkit.slurm import conf

SITE = """\
# Site slurm.conf (realistic: NHC prolog, pam_slurm_adopt)
ClusterName=alpha
SlurmctldHost=ctl1(127.0.0.1)
Prolog=/etc/slurm/nhc-prolog   # Node Health Check
PrologFlags=Contain,X11
SchedulerParameters=bf_continue,defer
Include /etc/slurm/extra.conf
   # indented comment kept as is
NodeName=gpu[01-16] CPUs=64 Gres=gpu:a100:8 State=UNKNOWN
PartitionName=gpu Nodes=gpu[01-16] Default=YES MaxTime="7-00:00:00"
"""


def test_round_trip_is_byte_identical():
    for text in (SITE, SITE.replace("\n", "\r\n"), SITE.rstrip("\n"), ""):
        assert conf.parse(text).text() == text


def test_lookup_values_and_pairs():
    c = conf.parse(SITE, "/etc/slurm/slurm.conf")
    e = c.find("prologflags")
    assert e.lineno == 5 and e.get("PrologFlags") == "Contain,X11"
    assert c.find("Prolog").comment.strip() == "Node Health Check"
    assert c.find("Prolog").get("Prolog") == "/etc/slurm/nhc-prolog"
    node = next(x for x in c.entries if x.first_key == "nodename")
    assert node.get("Gres") == "gpu:a100:8" and node.get("cpus") == "64"
    part = next(x for x in c.entries if x.first_key == "partitionname")
    assert part.get("MaxTime") == "7-00:00:00"
    assert c.includes == [(7, "/etc/slurm/extra.conf")]
    # global settings end before the comment block heading the NodeName line
    assert c.lines[c.global_end()] == "   # indented comment kept as is"
    assert c.lines[c.global_end() + 1].startswith("NodeName=")


def test_continuation_line_is_one_entry():
    c = conf.parse("NodeName=n1 \\\n  CPUs=4\nFoo=1\n")
    assert c.entries[0].count == 2 and c.entries[0].get("CPUs") == "4"
    assert c.find("Foo").lineno == 3


@pytest.mark.parametrize("bad, line, words", [
    ("A=1\nthis is not a setting\n", 2, "expected Key=Value"),
    ("A=1\nB=2\nC=\"unterminated\n", 3, "unterminated double quote"),
    ("=value\n", 1, "expected Key=Value"),
])
def test_unparseable_line_names_file_and_line(bad, line, words):
    with pytest.raises(conf.ConfError) as info:
        conf.parse(bad, "/x/slurm.conf")
    assert info.value.file == "/x/slurm.conf" and info.value.line == line
    assert words in str(info.value) and str(info.value).startswith(f"/x/slurm.conf:{line}:")


def test_edits(tmp_path):
    c = conf.parse(SITE, tmp_path / "slurm.conf")
    c.replace(c.find("PrologFlags"), "PrologFlags=Contain,X11,Alloc")
    c.insert(c.global_end(), "HealthCheckInterval=300")
    c.delete(c.find("ClusterName"))
    text = c.text()
    assert "PrologFlags=Contain,X11,Alloc\n" in text and "ClusterName" not in text
    assert text.index("HealthCheckInterval=300") < text.index("NodeName=")
    assert conf.parse(text).find("HealthCheckInterval").get("HealthCheckInterval") == "300"


def test_load_tree_follows_includes_and_finds_effective_value(tmp_path):
    (tmp_path / "slurm.conf").write_text("A=1\nInclude sub/extra.conf\nB=main\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "extra.conf").write_text("A=2\nB=sub\nC=3\n")
    tree = conf.load_tree(tmp_path / "slurm.conf")
    assert [c.path.name for c in tree] == ["slurm.conf", "extra.conf"]
    f, e = conf.find_effective(tree, "A")
    assert f.path.name == "extra.conf" and e.get("A") == "2"   # the include comes after A=1
    f, e = conf.find_effective(tree, "B")
    assert f.path.name == "slurm.conf" and e.get("B") == "main"  # main sets B after the include
    assert conf.find_effective(tree, "C")[0].path.name == "extra.conf"
    assert conf.find_effective(tree, "D") is None


def test_missing_include_and_cycle_are_clear_errors(tmp_path):
    (tmp_path / "slurm.conf").write_text("A=1\nInclude nothere.conf\n")
    with pytest.raises(conf.ConfError) as info:
        conf.load_tree(tmp_path / "slurm.conf")
    assert info.value.line == 2 and "nothere.conf" in str(info.value)
    (tmp_path / "slurm.conf").write_text("Include b.conf\n")
    (tmp_path / "b.conf").write_text("X=1\nInclude slurm.conf\n")
    with pytest.raises(conf.ConfError) as info:
        conf.load_tree(tmp_path / "slurm.conf")
    assert "cycle" in str(info.value) and Path(info.value.file).name == "b.conf"


def test_sandbox_template_parses(tmp_path):
    # the sandbox's own slurm.conf template, rendered: every line understood
    from slurmkit.sandbox import config as sbconf

    try:
        ctx = sbconf.context(sbconf.SandboxSpec(), tmp_path, "host")
        text = sbconf.render("slurm.conf", ctx)
    except ImportError as exc:  # pragma: no cover - jinja2 missing
        pytest.skip(str(exc))
    c = conf.parse(text, tmp_path / "slurm.conf")
    assert c.text() == text
    assert c.find("SchedulerParameters").get("SchedulerParameters") == "nohold_on_prolog_fail"
    assert len([e for e in c.entries if e.first_key == "nodename"]) == 4
