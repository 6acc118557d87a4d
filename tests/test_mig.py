"""slurmkit.mig against NVIDIA's own MIG layouts and placements (tests/fixtures/mig/SOURCE.md)."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from slurmkit import mig

FIX = Path(__file__).parent / "fixtures" / "mig"

#: mig-parted's device filters (PCI device id + 10DE) -> the model they are, from the file's own
#: comments ("# A100-40GB, A800-40GB", "# H100-80GB, H800-80GB, A100-80GB, A800-80GB", ...).
DEVICE_MODEL = {
    **dict.fromkeys(["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"], "A100 40GB"),
    **dict.fromkeys(["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE",
                     "0x20F510DE", "0x232410DE"], "A100 80GB / H100 80GB"),
    "0x20B710DE": "A30",
    **dict.fromkeys(["0x232110DE", "0x233A10DE"], "H100 NVL"),
    **dict.fromkeys(["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"], "H100 96GB / GH200 96GB / H20"),
    **dict.fromkeys(["0x233510DE", "0x233B10DE"], "H200"),
    "0x234810DE": "GH200 144GB", "0x290110DE": "B200", "0x294110DE": "GB200",
    "0x318210DE": "B300", "0x31C210DE": "GB300",
}


def _configs() -> list[tuple[str, list[str] | None, dict[str, int]]]:
    """(config name, device filters or None, layout) per entry of mig-parted's config file."""
    out, name, entry, filt, layout = [], None, None, None, None
    for line in (FIX / "mig-parted-config-default.yaml").read_text().splitlines():
        if m := re.match(r"^  ([a-z0-9.\-]+):\s*$", line):
            name = m.group(1)
            continue
        if m := re.match(r"^    - (device-filter|devices):\s*(.*)$", line):
            if layout:
                out.append((entry, filt, layout))
            entry, layout = name, {}
            filt = re.findall(r"0x[0-9A-Fa-f]{8}", m.group(2)) if m.group(1) == "device-filter" else None
            continue
        if m := re.match(r'^        "([^"]+)":\s*(\d+)\s*$', line):
            layout[m.group(1)] = int(m.group(2))
    if layout:
        out.append((entry, filt, layout))
    return out


def _known(layout):
    return all(mig.models_offering(p) for p in layout)


def test_every_layout_nvidia_applies_to_a_known_product_fits_that_model():
    seen = 0
    for name, filt, layout in _configs():
        for dev in filt or []:
            if dev in DEVICE_MODEL:
                model = mig.model_named(DEVICE_MODEL[dev])
                model.check(layout)  # raises if it does not fit
                seen += 1
    assert seen >= 30


def test_every_all_profile_layout_is_that_profiles_instance_count_on_a_model_offering_it():
    counted = []
    for name, filt, layout in _configs():
        if filt is not None or len(layout) != 1 or not name.startswith("all-"):
            continue
        (prof, n), = layout.items()
        models = mig.models_offering(prof)
        if not models:  # RTX PRO Blackwell's +gfx / -me / .me.all profiles: not modelled
            continue
        assert any(m.profile(prof).max_count == n and m.fits(layout) for m in models), (name, n)
        assert all(not m.fits({prof: n + 1}) for m in models), name
        counted.append(prof)
    assert {"1g.5gb", "3g.40gb", "7g.80gb", "1g.6gb", "4g.24gb", "2g.35gb", "7g.180gb"} <= set(counted)


def test_the_guides_lgipp_placements_are_the_80gb_models():
    ids = {19: "1g.10gb", 20: "1g.10gb+me", 15: "1g.20gb", 14: "2g.20gb", 9: "3g.40gb", 5: "4g.40gb", 0: "7g.80gb"}
    model = mig.model_for("NVIDIA H100 80GB HBM3")
    for line in (FIX / "lgipp-guide-sample.txt").read_text().splitlines():
        m = re.match(r"GPU\s+0 Profile ID\s+(\d+) Placements?\s*: \{([\d,]+)\}:(\d+)", line)
        p = model.profile(ids[int(m.group(1))])
        assert (p.starts, p.size) == (tuple(int(x) for x in m.group(2).split(",")), int(m.group(3)))


@pytest.mark.parametrize("layout, words", [
    ({"7g.80gb": 2}, "2x 7g.80gb: one A100 80GB / H100 80GB GPU holds at most 1"),
    ({"3g.40gb": 3}, "3x 3g.40gb: one A100 80GB / H100 80GB GPU holds at most 2"),
    ({"3g.40gb": 2, "1g.10gb": 1}, "2x 3g.40gb + 1x 1g.10gb takes 9 of 8 memory slices"),
    ({"4g.40gb": 1, "2g.20gb": 2}, "takes 8 compute slices"),
])
def test_the_impossible_h100_layouts_name_the_valid_profiles(layout, words):
    with pytest.raises(mig.MigLayoutError) as ei:
        mig.model_for("NVIDIA H100 80GB HBM3").check(layout)
    assert words in str(ei.value)
    assert "1g.10gb (x7), 1g.10gb+me (x1), 1g.20gb (x4), 2g.20gb (x3), 3g.40gb (x2), 4g.40gb (x1), 7g.80gb (x1)" \
        in str(ei.value)


def test_a_layout_the_memory_geometry_forbids_although_slices_and_counts_allow():
    # 1g.20gb takes slots {0,2,4,6}:2 and 3g.40gb {0,4}:4: three 1g.20gb leave no aligned 4 slots
    model = mig.model_for("NVIDIA A100-SXM4-80GB")
    assert not model.fits({"3g.40gb": 1, "1g.20gb": 3})
    assert model.fits({"3g.40gb": 1, "1g.20gb": 2})
    with pytest.raises(mig.MigLayoutError, match="memory slices"):
        model.check({"3g.40gb": 1, "1g.20gb": 3})


def test_names_pick_models():
    assert mig.model_for("NVIDIA A100-PCIE-40GB").name == "A100 40GB"
    assert mig.model_for("NVIDIA A100 80GB PCIe").name == "A100 80GB / H100 80GB"
    assert mig.model_for("NVIDIA A30").name == "A30"
    assert mig.model_for("NVIDIA H100 NVL").name == "H100 NVL"
    assert mig.model_for("NVIDIA GH200 480GB").name == "H100 96GB / GH200 96GB / H20"
    assert mig.model_for("NVIDIA H200").name == "H200"
    assert mig.model_for("NVIDIA B200").name == "B200"
    assert mig.model_for("Tesla T4") is None and mig.model_for("NVIDIA L40S") is None


def test_instance_shares():
    assert mig.instance_share("nvidia_a100_3g.20gb") == Fraction(3, 7)
    assert mig.instance_share("a100_3g.20gb") == Fraction(3, 7)
    assert mig.instance_share("nvidia_a30_4g.24gb") == 1
    assert mig.instance_share("nvidia_a30_1g.6gb") == Fraction(1, 4)
    assert mig.instance_share("h100") == 1
    assert mig.instance_share("nvidia_a100-sxm4-80gb") == 1
    assert mig.instance_share("nvidia_h100_1c.3g.40gb") == Fraction(1, 7)
    assert mig.instance_share("2g.99gb") is None  # no model offers it
    assert mig.model_for("NVIDIA A30").share("2g.12gb") == Fraction(1, 2)


def test_one_media_extension_instance_per_gpu():
    # the guide's A30 table: the whole GPU has 1 JPEG / 1 OFA and each +me profile takes them
    a30 = mig.model_for("NVIDIA A30")
    with pytest.raises(mig.MigLayoutError, match=r"1g.6gb\+me \+ 2g.12gb\+me: one A30 GPU has one set of media"):
        a30.check({"1g.6gb+me": 1, "2g.12gb+me": 1})
    assert a30.fits({"1g.6gb+me": 1, "1g.6gb": 1, "2g.12gb": 1})


def test_gi_slices_from_names():
    assert [mig.gi_slices(n) for n in ("3g.40gb", "1c.3g.40gb", "MIG 7g.80gb", "h100")] == [3, 3, 7, None]
