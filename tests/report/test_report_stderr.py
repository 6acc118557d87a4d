"""What the report commands print on stderr is their own warnings, nothing from the libraries
under them. Input: the corpus's Habrok capture (sacct/habrok_gpu_cluster_parsable2.psv) and
Habrok's ``scontrol show -o nodes`` (slurm/habrok_scontrol_show_nodes.txt)."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from slurmkit.cli import cli


def test_period_breakdown_after_a_pull_with_a_fraction_of_a_second_writes_nothing_on_stderr(tmp_path, corpus):
    """April 2024 of Habrok's capture stored as pulled at 13:11:52.123456 (a live pull stores
    ``time.time()``, fractions of a second, as ``--as-of`` with them does), then ``report period
    --month 2024-04 --nodes``: the breakdown stops at that pull, and pandas' "Discarding nonzero
    nanoseconds in conversion" (the pull time as float seconds, read to the nanosecond, turned
    into a datetime) is not printed; the breakdown's window ends at the last whole hour before it."""
    store = tmp_path / "store"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(corpus / "sacct/habrok_gpu_cluster_parsable2.psv"),
                                   "--store", str(store), "--start", "2024-04-01", "--end", "2024-05-01", "--tz", "UTC",
                                   "--as-of", "2024-04-19T13:11:52.123456"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "slurmkit", "report", "period", "--month", "2024-04", "--store", str(store),
                          "--nodes", str(corpus / "slurm/habrok_scontrol_show_nodes.txt"), "--format", "json", "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""

    rep = json.loads((out / "period.json").read_text())
    period = rep["sreport_breakdown"]["windows"][0]
    assert (period["label"], period["start"], period["end"]) == ("(period)", "2024-04-01T00:00:00Z", "2024-04-19T13:00:00Z")
