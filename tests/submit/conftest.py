"""The submit tests' job records (slurmkit.submit.jobrecord) go to a folder of the test's own,
never the user's ``~/.local/state/slurmkit/jobs``."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def own_job_records(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path_factory.mktemp("job-records")))
