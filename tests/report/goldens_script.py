"""scripts/report_goldens.py, the goldens' one definition (what each golden is, how it is made,
how two are compared), loaded once under its name for the tests that read the goldens."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def goldens_script():
    """The module of scripts/report_goldens.py (loaded on first use, then from sys.modules)."""
    name = "report_goldens"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "report_goldens.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
