"""Fixtures of the report's sandbox tests."""

from __future__ import annotations

import pytest


@pytest.fixture()
def slurm_env(sandbox, monkeypatch):
    """The sandbox (tests/conftest.py) with its Slurm environment (SLURM_CONF, PATH) set."""
    for k, v in sandbox.env().items():
        monkeypatch.setenv(k, v)
    return sandbox
