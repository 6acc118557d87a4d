"""Downtime and drains in the live weekly report, from the real slurmdbd's node events
(``sacctmgr show event``): a node drained with a reason shows in the timeline."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

REASON = "slurmkit-test: fan 3 failed"


@pytest.fixture()
def slurm_env(sandbox, monkeypatch):
    for k, v in sandbox.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)
    return sandbox


def test_a_drained_node_is_in_the_downtime_timeline_with_its_reason(slurm_env, tmp_path):
    from slurmkit.report import weekly_report
    from slurmkit.report.window import Window
    from slurmkit.slurm.commands import run

    node = "n3"
    day = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={REASON}"], timeout=30)
    try:
        def events():
            return run(["sacctmgr", "-n", "-P", "show", "event", f"Nodes={node}", "format=NodeName,Reason,TimeEnd"],
                       timeout=30).stdout

        # slurmctld sends the event to slurmdbd asynchronously
        wait_until(lambda: REASON in events(), 90, 1.0, f"the drain event of {node} in slurmdbd",
                   lambda: f"events: {events()!r}")
        time.sleep(2.0)  # the drain lasts a while before the report reads it: its hours are > 0
        res = weekly_report(window=Window(day, day + dt.timedelta(days=1)), store_dir=tmp_path / "store",
                            use_sreport=False, formats=["json", "md"], outdir=tmp_path / "out",
                            spool=tmp_path / "nospool.jsonl")
    finally:
        run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], timeout=30)
    d = res.report["downtime"]
    assert d["source"] == "sacctmgr show event"
    mine = [e for e in d["events"] if e["node"] == node and e["reason"] == REASON]
    assert len(mine) == 1, d["events"]
    e = mine[0]
    assert e["ongoing"] and e["end"] is None and "DRAIN" in e["state"].upper()
    assert e["gpus"] == 4 and e["hours"] > 0 and e["gpu_hours"] == pytest.approx(4 * e["hours"], rel=0.2)
    assert any(b["reason"] == REASON and b["nodes"] == 1 for b in d["by_reason"])
    assert res.report["utilization"]["down_gpu_hours"] >= e["gpu_hours"] - 1e-9
    assert REASON in (tmp_path / "out" / "weekly.md").read_text()
