"""Fixtures of the report's sandbox tests."""

from __future__ import annotations

import pytest


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
