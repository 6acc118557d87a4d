"""Fixtures of the report's tests: the sandbox with its Slurm environment, and Habrok's capture
from the shared corpus."""

from __future__ import annotations

import pytest

#: Habrok's GPU partitions, real `sacct -P` output, June 2023 to April 2024 (the corpus README).
HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"


@pytest.fixture(scope="session")
def habrok(corpus):
    """``corpus / sacct/habrok_gpu_cluster_parsable2.psv`` (skips as ``corpus`` does when the
    shared corpus is absent)."""
    return corpus / HABROK


@pytest.fixture()
def slurm_env(sandbox, monkeypatch):
    """The sandbox (tests/conftest.py) with its Slurm environment (SLURM_CONF, PATH) set."""
    for k, v in sandbox.env().items():
        monkeypatch.setenv(k, v)
    return sandbox


@pytest.fixture()
def own_slurm_env(own_sandbox, monkeypatch):
    """The module's own sandbox (tests/conftest.py ``own_sandbox``) with its Slurm environment set."""
    for k, v in own_sandbox.env().items():
        monkeypatch.setenv(k, v)
    return own_sandbox
