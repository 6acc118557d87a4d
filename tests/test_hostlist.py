"""slurmkit.hostlist: the one hostlist wrapper."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurmkit.hostlist import BadHostlist, collect_hostlist, expand_hostlist, expand_nodelist


def test_expand_keeps_order_and_reads_lists():
    assert expand_hostlist("n[3,1-2],gpu-[08-10]") == ["n3", "n1", "n2", "gpu-08", "gpu-09", "gpu-10"]
    assert expand_hostlist(["n[1-2]", "m1"]) == ["n1", "n2", "m1"]
    assert expand_hostlist("") == []
    with pytest.raises(BadHostlist, match="unbalanced"):
        expand_hostlist("n[1-")


def test_collect_is_what_slurm_reads():
    assert collect_hostlist(["n2", "n1", "n10"]) == "n[1-2,10]"
    assert collect_hostlist(("n1",)) == "n1"
    assert collect_hostlist(n for n in ["n3", "n4"]) == "n[3-4]"


def test_nodelist_of_a_job_without_nodes_is_empty():
    for empty in ("", "  ", None, "None assigned", "(null)", "(Resources)"):
        assert expand_nodelist(empty) == ()
    assert expand_nodelist(" n[1-2] ") == ("n1", "n2")


def test_import_is_light():
    code = ("import sys, slurmkit.hostlist; "
            "print(sorted(m for m in ('pandas', 'jinja2', 'click', 'pyarrow') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "[]\n", r.stderr
