"""Headless Chromium screenshots of a report's HTML (Debian package ``chromium``), shared by
the report tests that check a page renders: one home for the flags and the not-blank check."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    """The Chromium binary; skips the test where it is not installed (CI installs it:
    .ci/apt-packages.txt)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("Debian package chromium is not installed (.ci/apt-packages.txt lists it)")
    return exe


def screenshot(html: Path, shot: Path, profile: Path, size=(1000, 1600)):
    """Render ``html`` in headless Chromium into the PNG ``shot`` (``size`` pixels, width x
    height) and check it is a page and not blank: the right size, dark and light pixels both
    (text and plots). Returns the screenshot as a greyscale PIL image."""
    from PIL import Image

    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", html.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    im = Image.open(shot).convert("L")
    assert im.size == tuple(size)
    lo, hi = im.getextrema()
    assert hi - lo > 100                       # text and plots, not a blank page
    dark = sum(im.histogram()[:128])
    assert dark > 0.002 * im.size[0] * im.size[1]
    return im
