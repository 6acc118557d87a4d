"""A test-built fake ``libnvidia-ml.so.1`` used through the real pynvml.

``fake_nvml`` (session fixture in tests/conftest.py) compiles ``fake_nvml.c`` with gcc once per session and
returns a :class:`FakeNvml`; ``fake.env(mode, **extra)`` gives an environment (for the NVML
worker subprocess or a hook) whose ``LD_LIBRARY_PATH`` finds the fake library first. Modes and
knobs are documented at the top of ``fake_nvml.c``. Outside CI the tests skip when gcc is missing;
under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


SOURCE = Path(__file__).with_name("fake_nvml.c")


class FakeNvml:
    """The built library: ``lib_dir`` holds ``libnvidia-ml.so.1``."""

    def __init__(self, lib_dir: Path):
        self.lib_dir = lib_dir
        self.lib = lib_dir / "libnvidia-ml.so.1"

    def env(self, mode: str = "healthy", *, gpus: int | None = None, procs: str | None = None,
            clock_reasons: int | None = None, minors: str | None = None, lost: int | None = None,
            energy_mj: int | None = None, accounting: str | None = None, log: Path | None = None,
            set_fail: str | None = None, recovery: str | None = None, mig: str | None = None,
            base: dict | None = None) -> dict:
        """os.environ (or ``base``) + LD_LIBRARY_PATH and the SLURMKIT_FAKE_NVML* knobs."""
        env = dict(os.environ if base is None else base)
        for k in list(env):
            if k.startswith("SLURMKIT_FAKE_NVML"):
                del env[k]
        env["LD_LIBRARY_PATH"] = str(self.lib_dir) + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["SLURMKIT_FAKE_NVML"] = mode
        knobs = {"GPUS": gpus, "PROCS": procs, "MINORS": minors, "LOST": lost, "ENERGY_MJ": energy_mj, "ACCOUNTING": accounting,
                 "SET_FAIL": set_fail,
                 "CLOCK_REASONS": hex(clock_reasons) if clock_reasons is not None else None,
                 "LOG": str(log) if log is not None else None, "RECOVERY": recovery, "MIG": mig}
        for k, v in knobs.items():
            if v is not None:
                env[f"SLURMKIT_FAKE_NVML_{k}"] = str(v)
        return env


def build(out_dir: Path) -> FakeNvml:
    """Compile the fake library into ``out_dir`` (raises CalledProcessError on a compile error)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-o", str(out_dir / "libnvidia-ml.so.1"),
                    str(SOURCE)], check=True, capture_output=True, text=True)
    return FakeNvml(out_dir)
