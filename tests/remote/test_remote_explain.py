"""``submit --remote --explain``'s labels: a profile from the login node's SLURMKIT_SITE is the
remote cluster's, a ``--site`` profile is read on this machine and says so."""

from types import SimpleNamespace

import pytest

from slurmkit.remote.site import RemoteSite
from slurmkit.remote.submit import RemotePlan, explain_remote
from slurmkit.remote.sync import SyncSource
from slurmkit.submit import api, site


@pytest.mark.parametrize("origin, spec, label", [
    ("SLURMKIT_SITE on login", "/etc/slurmkit/site.toml", "<- remote profile (login) partitions.gpu"),
    ("--site", "site/sandbox.toml", "<- --site site/sandbox.toml profile partitions.gpu"),
])
def test_profile_rows_say_where_the_profile_was_read(origin, spec, label):
    prof = site.load("sandbox")
    plan = api.plan("srun", ["python3", "t.py"], nodes=2, profile=prof)
    backend = SimpleNamespace(remote=SimpleNamespace(host="login", ssh_config=None))
    rp = RemotePlan(backend, plan, RemoteSite(prof, spec, origin), "/r", SyncSource("/l", "", False), "run1",
                    "/r/slurmkit-runs/run1", True)
    text = explain_remote(rp)
    assert label in text
    assert ("remote profile" in text) == (origin != "--site")
