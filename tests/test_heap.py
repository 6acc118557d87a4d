"""slurmkit.heap: glibc keeps freed memory for one-shot commands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurmkit.heap import keep_freed_memory


def test_keep_freed_memory_cuts_page_faults_of_repeated_large_arrays():
    # in a child process (the setting is process-wide): the same loop of 64 MB arrays, with
    # and without; glibc's default maps fresh pages for each array
    code = ("import resource, sys, numpy as np\n"
            "from slurmkit.heap import keep_freed_memory\n"
            "ok = keep_freed_memory() if sys.argv[1] == 'keep' else None\n"
            "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(30):\n"
            "    a = np.ones(8_000_000); del a\n"
            "print(ok, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n")
    out = {m: subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True,
                             check=True).stdout.split() for m in ("keep", "default")}
    assert out["keep"][0] == "True"
    keep, default = int(out["keep"][1]), int(out["default"][1])
    assert keep < default / 4, (keep, default)


def test_keep_freed_memory_refuses_a_tiny_limit():
    with pytest.raises(ValueError, match="below 1 MiB"):
        keep_freed_memory(4096)
