"""NVIDIA MIG: which instance profiles each GPU model offers, how many fit, and what share of
the GPU one instance is. The one home of these facts: the site profile checks MIG layouts with
it, the hooks name a capture's instances with it, the reports weigh an instance with it.

A base module (standard library only, nothing compiled at import; records are
:func:`slurmkit.records.record`, ``fractions`` is imported by the functions that return one): the
hooks import it.

The geometry, as ``nvidia-smi mig -lgipp`` prints it: a GPU has ``slots`` memory slices (8 on
the 7-slice GPUs, 4 on the A30); each GPU-instance profile takes ``size`` consecutive slots
starting at one of its ``starts``; instances may not overlap. A layout fits when such a
placement exists (:meth:`MigModel.fits`, an exact search: at most 8 slots).

Sources (every figure below):

- NVIDIA MIG user guide, "Supported MIG Profiles" (docs.nvidia.com/datacenter/tesla/
  mig-user-guide/supported-mig-profiles.html): the A30 table (1g.6gb x4, 2g.12gb x2, 4g.24gb x1,
  one +me instance) and the A100 table (A100-SXM4-40GB names; "for A100-SXM4-80GB the names
  change according to the memory proportion": 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb,
  4g.40gb, 7g.80gb), and "Supported GPUs" (7 instances at most on A100/H100/H200/GH200/B200,
  4 on the A30).
- The same guide's ``nvidia-smi mig -lgipp`` sample, also printed on an H100 NVL in NVIDIA's
  blog and on H100 80GB nodes in public scripts (GoogleCloudDataproc initialization-actions,
  2024-12-20): ``19 {0,1,2,3,4,5,6}:1``, ``20 {0,..,6}:1``, ``15 {0,2,4,6}:2``, ``14 {0,2,4}:2``,
  ``9 {0,4}:4``, ``5 {0}:4``, ``0 {0}:8``.
- NVIDIA/mig-parted ``deployments/systemd/config-default.yaml`` (commit bd7160f43f16): the
  profile names per product (device filters) and the instance counts (``all-1g.10gb``: 7 on
  80 GB, 4 on A100-40GB; ``all-balanced`` per product).
- NVIDIA/go-nvml ``pkg/nvml/mock/gpus/a30.go`` (vendored there): the A30 placements
  (``{0,1,2,3}:1``, ``{0,2}:2``, ``{0}:4``) and copy engines = compute slices of each profile.
"""

from __future__ import annotations

from slurmkit.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the functions that return a Fraction import fractions
    from fractions import Fraction

__all__ = ["MigProfile", "MigModel", "MODELS", "model_for", "model_named", "split_profile", "gi_slices",
           "profile_in_type", "models_offering", "instance_share", "MigLayoutError"]


class MigLayoutError(ValueError):
    """A MIG layout no GPU of the model can hold; ``str()`` names the model and its profiles."""


@record(frozen=True)
class MigProfile:
    """One GPU-instance profile of a model: ``name`` as NVML / nvidia-smi name it (``3g.40gb``),
    ``slices`` (compute slices, the ``Ng``), ``size`` (memory slots it takes), ``starts`` (slots it
    may start at, ``-lgipp``), ``max_count`` (instances of it one GPU holds: "Number of Instances
    Available"; 1 for a ``+me`` profile, whose media engines are not shared)."""

    name: str
    slices: int
    size: int
    starts: tuple[int, ...]
    max_count: int


@record(frozen=True)
class MigModel:
    """A GPU model's MIG geometry: ``name`` (as this module and its errors call it; NVML device
    names pick it through :func:`model_for`), ``slices`` (compute slices of the whole GPU: 7, or
    4 on the A30), ``slots`` (memory slots: 8, or 4), ``profiles``."""

    name: str
    slices: int
    slots: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        """The profile called ``name`` (``3g.40gb``, ``MIG 3g.40gb``, case-insensitive; a
        compute-instance name ``1c.3g.40gb`` gives its GPU instance's profile); None if the model
        has none of that name."""
        _, gi = split_profile(name)
        return next((p for p in self.profiles if p.name == gi), None)

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def describe(self) -> str:
        """``A100 80GB: 1g.10gb (x7), 1g.10gb+me (x1), ...``: the profiles and their counts."""
        return f"{self.name}: " + ", ".join(f"{p.name} (x{p.max_count})" for p in self.profiles)

    def fits(self, layout: dict[str, int]) -> bool:
        """Whether one GPU holds ``layout`` (profile name -> instances; compute-instance names
        ``Nc.Mg.X`` count as GPU instances of ``Mg.X``, as many as their slices need).
        Raises :class:`MigLayoutError` for a profile the model does not have."""
        self._gpu_instances(layout)
        try:
            self.check(layout)
        except MigLayoutError:
            return False
        return True

    def check(self, layout: dict[str, int]) -> None:
        """Raises :class:`MigLayoutError` unless one GPU holds ``layout``; the message names the
        model, what does not fit and the model's profiles with their counts."""
        gis = self._gpu_instances(layout)
        for p in {p.name: p for p in gis}.values():
            n = sum(1 for q in gis if q.name == p.name)
            if n > p.max_count:
                raise MigLayoutError(f"{n}x {p.name}: one {self.name} GPU holds at most {p.max_count} "
                                     f"({self.describe()})")
        media = [p.name for p in gis if "+me" in p.name]
        if len(media) > 1:
            raise MigLayoutError(f"{' + '.join(media)}: one {self.name} GPU has one set of media engines (JPEG / OFA), "
                                 f"so one +me instance at most ({self.describe()})")
        used = sum(p.slices for p in gis)
        if used > self.slices:
            raise MigLayoutError(f"{_layout_text(layout)} takes {used} compute slices; one {self.name} GPU has "
                                 f"{self.slices} ({self.describe()})")
        if self._placement(gis) is None:
            mem = sum(p.size for p in gis)
            why = (f"takes {mem} of {self.slots} memory slices" if mem > self.slots
                   else "has no placement (nvidia-smi mig -lgipp)")
            raise MigLayoutError(f"{_layout_text(layout)} {why} on one {self.name} GPU ({self.describe()})")

    def share(self, name: str) -> Fraction:
        """An instance of ``name``'s share of the GPU: its compute slices over the GPU's
        (``3g.40gb`` on an A100 -> 3/7; ``4g.24gb`` on an A30 -> 1; ``1c.3g.40gb`` -> 1/7).
        Raises :class:`MigLayoutError` for a profile the model does not have."""
        from fractions import Fraction

        ci, gi = split_profile(name)
        p = self.profile(gi)
        if p is None:
            raise MigLayoutError(f"{name!r} is not a MIG profile of the {self.describe()}")
        return Fraction(ci if ci is not None else p.slices, self.slices)

    def _gpu_instances(self, layout: dict[str, int]) -> list[MigProfile]:
        out: list[MigProfile] = []
        ci_slices: dict[str, int] = {}
        for name, n in layout.items():
            ci, gi = split_profile(name)
            p = self.profile(gi)
            if p is None:
                raise MigLayoutError(f"{name!r} is not a MIG profile of the {self.describe()}")
            if ci is None:
                out += [p] * n
            else:
                ci_slices[p.name] = ci_slices.get(p.name, 0) + ci * n
        for name, s in ci_slices.items():
            p = self.profile(name)
            out += [p] * -(-s // p.slices)  # compute instances share GPU instances of their profile
        return out

    def _placement(self, gis: list[MigProfile]) -> dict | None:
        if sum(p.size for p in gis) > self.slots or sum(p.slices for p in gis) > self.slices:
            return None
        order = sorted(gis, key=lambda p: (-p.size, len(p.starts)))

        def place(i: int, used: int) -> list[int] | None:
            if i == len(order):
                return []
            p = order[i]
            for s in p.starts:
                mask = ((1 << p.size) - 1) << s
                if not used & mask:
                    rest = place(i + 1, used | mask)
                    if rest is not None:
                        return [s] + rest
            return None

        got = place(0, 0)
        return None if got is None else dict(enumerate(got))


def _layout_text(layout: dict[str, int]) -> str:
    return " + ".join(f"{n}x {p}" for p, n in layout.items())


def split_profile(name: str) -> tuple[int | None, str]:
    """``"1c.3g.40gb"`` -> ``(1, "3g.40gb")``; ``"MIG 3g.40gb"`` / ``"3G.40GB"`` -> ``(None,
    "3g.40gb")``: a compute instance's slices (None for a whole GPU instance) and its GPU
    instance's profile name, lower case."""
    s = name.strip().lower()
    if s.startswith("mig "):
        s = s[4:].strip()
    head, dot, rest = s.partition(".")
    if dot and head.endswith("c") and head[:-1].isdigit() and "g." in rest:
        return int(head[:-1]), rest
    return None, s


def gi_slices(name: str) -> int | None:
    """The compute slices a profile name says its GPU instance has, whatever the model:
    ``"3g.40gb"`` -> 3, ``"1c.3g.40gb"`` -> 3 (its GPU instance's), ``"MIG 7g.80gb"`` -> 7; None
    when ``name`` is no MIG profile name."""
    _, gi = split_profile(name)
    g = gi.split(".", 1)[0]
    return int(g[:-1]) if g.endswith("g") and g[:-1].isdigit() else None


def _seven(name: str, m1: int, m2: int, m4: int, m8: int,
           me2: bool = False) -> MigModel:
    """A 7-slice model (8 memory slots, the ``-lgipp`` placements of the guide's sample), its
    profiles named by the memory of 1, 2, 4 and 8 slots."""
    ones = tuple(range(7))
    profs = [MigProfile(f"1g.{m1}gb", 1, 1, ones, 7), MigProfile(f"1g.{m1}gb+me", 1, 1, ones, 1),
             MigProfile(f"1g.{m2}gb", 1, 2, (0, 2, 4, 6), 4)]
    if me2:
        profs.append(MigProfile(f"1g.{m2}gb+me", 1, 2, (0, 2, 4, 6), 1))
    profs += [MigProfile(f"2g.{m2}gb", 2, 2, (0, 2, 4), 3), MigProfile(f"3g.{m4}gb", 3, 4, (0, 4), 2),
              MigProfile(f"4g.{m4}gb", 4, 4, (0,), 1), MigProfile(f"7g.{m8}gb", 7, 8, (0,), 1)]
    return MigModel(name, 7, 8, tuple(profs))


#: The models, from the sources in the module docstring (:data:`_PICK` says which NVML device
#: names are which).
MODELS: tuple[MigModel, ...] = (
    MigModel("A30", 4, 4, (
        MigProfile("1g.6gb", 1, 1, (0, 1, 2, 3), 4), MigProfile("1g.6gb+me", 1, 1, (0, 1, 2, 3), 1),
        MigProfile("2g.12gb", 2, 2, (0, 2), 2), MigProfile("2g.12gb+me", 2, 2, (0, 2), 1),
        MigProfile("4g.24gb", 4, 4, (0,), 1))),
    _seven("A100 40GB", 5, 10, 20, 40),
    _seven("A100 80GB / H100 80GB", 10, 20, 40, 80),
    _seven("H100 NVL", 12, 24, 47, 94, me2=True),
    _seven("H100 96GB / GH200 96GB / H20", 12, 24, 48, 96, me2=True),
    _seven("GH200 144GB", 18, 36, 72, 144),
    _seven("H200", 18, 35, 71, 141),
    _seven("GB200", 23, 47, 93, 186),
    _seven("B200", 23, 45, 90, 180),
    _seven("GB300", 35, 70, 139, 278),
    _seven("B300", 34, 67, 135, 269),
)


#: (what NVML's device name holds, model name): the more specific first; a key of one word
#: (``A30``, ``H20``) must be a whole word of the name.
_PICK = (("GH200 144G", "GH200 144GB"), ("GH200", "H100 96GB / GH200 96GB / H20"), ("GB300", "GB300"),
         ("GB200", "GB200"), ("B300", "B300"), ("B200", "B200"), ("H200", "H200"),
         ("H100 NVL", "H100 NVL"), ("H800 NVL", "H100 NVL"), ("H100 96GB", "H100 96GB / GH200 96GB / H20"),
         ("H20", "H100 96GB / GH200 96GB / H20"), ("40GB", "A100 40GB"), ("A30", "A30"),
         ("A100", "A100 80GB / H100 80GB"), ("A800", "A100 80GB / H100 80GB"),
         ("H100", "A100 80GB / H100 80GB"), ("H800", "A100 80GB / H100 80GB"))


def model_for(nvml_name: str) -> MigModel | None:
    """The MIG model of a GPU whose NVML device name (``nvmlDeviceGetName``, ``nvidia-smi -L``)
    is ``nvml_name``: ``"NVIDIA A100-SXM4-80GB"``, ``"NVIDIA A100 80GB PCIe"``, ``"NVIDIA H100
    80GB HBM3"`` -> the A100 80GB / H100 80GB model; ``"NVIDIA A100-PCIE-40GB"`` -> A100 40GB;
    ``"NVIDIA A30"`` -> A30; ``"NVIDIA H100 NVL"``, ``"NVIDIA H200"``, ``"NVIDIA GH200 480GB"``,
    ``"NVIDIA B200"``. None for a GPU this module does not know (no MIG, or a model not listed:
    then layouts are not checked)."""
    up = nvml_name.upper().replace("-", " ")
    words = up.split()
    is_a100ish = any(w in up for w in ("A100", "A800"))
    for key, name in _PICK:
        k = key.replace("-", " ")
        if " " not in k and k in ("A30", "H20"):
            hit = k in words
        elif k == "40GB":
            hit = is_a100ish and ("40GB" in up)
        else:
            hit = k in up
        if hit:
            return model_named(name)
    return None


def model_named(name: str) -> MigModel | None:
    """The model whose :attr:`MigModel.name` is ``name`` (case-insensitive); None when none."""
    return next((m for m in MODELS if m.name.lower() == name.lower()), None)


def profile_in_type(gres_type: str) -> tuple[str, str] | None:
    """A Slurm gres type that names a MIG instance -> ``(prefix, profile)``:
    ``"nvidia_a100_3g.20gb"`` -> ``("nvidia_a100", "3g.20gb")``, ``"a100_3g.20gb"`` ->
    ``("a100", "3g.20gb")``, ``"3g.20gb"`` -> ``("", "3g.20gb")``,
    ``"nvidia_a100_1c.3g.20gb"`` -> ``("nvidia_a100", "1c.3g.20gb")``; None when the type names no
    profile (``h100``)."""
    t = gres_type.strip().lower()
    for i in range(len(t)):
        if i and t[i - 1] not in "_-":
            continue
        ci, gi = split_profile(t[i:])
        g, dot, mem = gi.partition(".")
        core = mem.split("+", 1)[0]
        if (dot and g.endswith("g") and g[:-1].isdigit() and core.endswith("gb") and core[:-2].isdigit()):
            return t[:i].rstrip("_-"), t[i:]
    return None


def models_offering(profile: str) -> tuple[MigModel, ...]:
    """The models that have a profile called ``profile`` (``"1g.10gb"``: A100 40GB and
    A100 80GB / H100 80GB; ``"4g.24gb"``: A30 only)."""
    return tuple(m for m in MODELS if m.profile(profile) is not None)


def instance_share(gres_type: str, model: MigModel | None = None) -> Fraction | None:
    """The share of a physical GPU that one instance of gres type ``gres_type`` is (compute
    slices over the GPU's): ``nvidia_a100_3g.20gb`` -> 3/7, ``nvidia_a30_4g.24gb`` -> 1,
    ``nvidia_a30_1g.6gb`` -> 1/4. ``model``: the GPU's model when known (the site profile's
    ``nvml_name``); else the models offering the profile, narrowed by the type's prefix
    (``a30``, ``h100``, ...) when they disagree. 1 for a type that names no MIG profile (a whole
    GPU); None when the share is unknown (no model offers the profile, or the models that do
    disagree and the prefix does not decide)."""
    from fractions import Fraction

    found = profile_in_type(gres_type)
    if found is None:
        return Fraction(1)
    prefix, prof = found
    if model is not None:
        try:
            return model.share(prof)
        except MigLayoutError:
            return None
    cands = models_offering(prof)
    shares = {m.share(prof) for m in cands}
    if len(shares) == 1:
        return shares.pop()
    pre = prefix.upper().replace("_", " ").replace("-", " ")
    narrowed = {m.share(prof) for m in cands if any(w in pre.split() for w in m.name.upper().replace("/", " ").split())}
    return narrowed.pop() if len(narrowed) == 1 else None
