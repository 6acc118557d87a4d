"""``slurmkit report jobs`` against the real Slurm sandbox: jobs with known
sleep times and CPU use, read back through live sacct; state, elapsed and time-limit efficiency
equal sacct's own figures, CPU efficiency equals TotalCPU / (ElapsedRaw x NCPUS) read
independently from sacct's job line, and tells a job that spun a CPU from one that slept."""

from __future__ import annotations

import json

import pytest
from sacct_time import seconds
from click.testing import CliRunner

from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm




def _sacct(run, jid):
    """(State, ElapsedRaw, TimelimitRaw, TotalCPU, NCPUS) of the job's allocation row. Without
    ``-X``: sacct then prints the steps' TotalCPU summed on the job's line (with ``-X`` it
    prints the allocation's own, 00:00:00, in this Slurm)."""
    out = run(["sacct", "-j", jid, "-n", "-P", "--noconvert", "-o",
               "JobID,State,ElapsedRaw,TimelimitRaw,TotalCPU,NCPUS"], timeout=30).stdout
    rows = [ln.split("|") for ln in out.splitlines() if ln.split("|")[0] == jid]
    return rows[-1][1:] if rows else None


def test_report_jobs_live_matches_sacct(slurm_env):
    from slurmkit.cli import cli
    from slurmkit.slurm.commands import run

    def sbatch(*args):
        return run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", *args], timeout=60).stdout.strip().split(";")[0]

    # one CPU of two spinning for 6 s; one asleep for 4 s; one that fails after 2 s
    busy = sbatch("-c", "2", "-t", "2", "--wrap", "timeout 6 sh -c 'while :; do :; done'; exit 0")
    idle = sbatch("-c", "1", "-t", "1", "--wrap", "sleep 4")
    bad = sbatch("-c", "1", "-t", "3", "--wrap", "sleep 2; exit 3")
    jobs = (busy, idle, bad)

    def finished():
        rows = {j: _sacct(run, j) for j in jobs}
        done = all(r and r[0] in ("COMPLETED", "FAILED") for r in rows.values())
        # TotalCPU reaches slurmdbd with the job's end record
        return rows if done and seconds(rows[busy][3]) > 0 else None

    want = wait_until(finished, 240, 2.0, "the jobs to finish and reach slurmdbd")
    res = CliRunner().invoke(cli, ["report", "jobs", "--format", "json", *jobs], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = {r["key_id"]: r for r in json.loads(res.output[res.output.index("{"):])["jobs"]}
    assert set(got) == set(jobs)
    for jid, (state, elapsed, limit_min, total_cpu, ncpus) in want.items():
        r = got[jid]
        assert r["state"] == state
        assert r["elapsed_s"] == float(elapsed)
        assert r["timelimit_s"] == float(limit_min) * 60
        assert r["time_eff"] == pytest.approx(float(elapsed) / (float(limit_min) * 60), abs=1e-6)
        assert r["ncpus"] == float(ncpus)
        if float(elapsed) > 0:
            # TotalCPU printed to the millisecond; the CPU-seconds figure to the microsecond
            assert r["cpu_eff"] == pytest.approx(seconds(total_cpu) / (float(elapsed) * float(ncpus)), abs=1e-3)
        assert r["gpus"] == 0 and r["gpu_util_pct"] is None   # no GPU asked: no utilization to know
    assert got[bad]["state"] == "FAILED"
    # a spinning CPU (whatever share of it a loaded host gives) against a sleep
    assert got[busy]["cpu_eff"] > got[idle]["cpu_eff"] >= 0.0
    assert got[idle]["elapsed_s"] >= 4              # it slept 4 s
    # the table says the same
    table = CliRunner().invoke(cli, ["report", "jobs", busy], catch_exceptions=False).output.splitlines()
    assert table[1].split()[0] == busy and want[busy][0] in table[1].split()
