"""Plain records for the modules the hooks import on every job: :func:`record`, :func:`field`,
:func:`fields`, :func:`replace`, :func:`asdict`; and :class:`GpuIdentity`, the one record of
which GPU a job's GPU is (the hooks' job GPUs, prolog records and spool lines build on it).

``@record`` reads a class body the way :func:`dataclasses.dataclass` does (annotated fields in
order, defaults, ``field(default_factory=...)``, ``__post_init__``) and gives the class an
``__init__``, ``__repr__``, ``__eq__`` and, with ``frozen=True``, immutability and a hash. It
exists because the prolog runs on every job on every node: ``import dataclasses`` imports
``inspect`` (and with it ``ast``, ``dis``, ``tokenize``), and ``@dataclass`` compiles the source
of each generated method at import — together some 15 ms of a ~50 ms prolog. ``@record``
imports nothing and compiles nothing: its methods are shared functions over the class's field
table (``__init__`` lays a template of the defaults into the new ``__dict__`` and the arguments
over it: an instance of five fields costs ~1.5 us to build, a dataclass's ~0.6 us; a prolog
builds ~900).

Differences from dataclasses, none of which the hooks rely on: no ``init=False`` /
``repr=False`` / ``compare=False`` per field, no ``kw_only``, ``InitVar``, ``slots``, ``order``
or ``unsafe_hash``; :func:`asdict` does not deep-copy leaf values; :func:`dataclasses.fields` and
friends do not know these classes (use this module's).
"""

from __future__ import annotations

__all__ = ["MISSING", "FrozenInstanceError", "Field", "record", "field", "fields", "replace", "asdict", "is_record",
           "GpuIdentity"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: A field without a default (or without a default factory).
MISSING = _Missing()


class FrozenInstanceError(AttributeError):
    """An attribute of a ``frozen=True`` record was set or deleted."""


class Field:
    """One field of a record: ``name``, ``default`` and ``default_factory`` (:data:`MISSING`
    when there is none)."""

    __slots__ = ("name", "default", "default_factory")

    def __init__(self, default=MISSING, default_factory=MISSING, name: str = ""):
        self.name, self.default, self.default_factory = name, default, default_factory

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default=MISSING, default_factory=MISSING) -> Field:
    """A field's default in a record's class body: ``x: list = field(default_factory=list)``.
    Raises ValueError when both are given."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory)


def _is_classvar(annotation) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _table(cls) -> tuple[Field, ...]:
    out: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            out[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        if isinstance(value, Field):
            f = Field(value.default, value.default_factory, name)
            if f.default is MISSING:
                delattr(cls, name)  # as dataclasses: no class attribute for a factory field
            else:
                setattr(cls, name, f.default)
        else:
            f = Field(value, MISSING, name)
        if f.default is not MISSING and type(f.default).__hash__ is None:
            raise ValueError(f"{cls.__qualname__}.{name}: mutable default {type(f.default).__name__} "
                             f"(use field(default_factory=...))")
        out[name] = f
    table = tuple(out.values())
    seen_default = None
    for f in table:
        if f.default is MISSING and f.default_factory is MISSING:
            if seen_default is not None:
                raise TypeError(f"{cls.__qualname__}: field {f.name!r} without a default follows "
                                f"{seen_default!r}, which has one")
        else:
            seen_default = f.name
    return table


class _Factory:
    __slots__ = ()


#: Placeholder in a record's template for a field filled by its default factory.
_FACTORY = _Factory()


def _init_for(cls, table: tuple[Field, ...]):
    qual = cls.__qualname__
    post_init = hasattr(cls, "__post_init__")
    order = tuple(f.name for f in table)
    names = frozenset(order)
    n = len(order)
    # every field in order with its default (a placeholder when it has none), laid into the new
    # instance's __dict__ at C speed, the arguments over it: the hooks build ~900 records a run
    template = {f.name: f.default if f.default is not MISSING else _FACTORY if f.default_factory is not MISSING
                else MISSING for f in table}
    required = tuple(f.name for f in table if f.default is MISSING and f.default_factory is MISSING)
    factories = tuple((f.name, f.default_factory) for f in table if f.default_factory is not MISSING)

    def __init__(self, *args, **kwargs):
        if len(args) > n:
            raise TypeError(f"{qual}() takes {n} positional arguments but {len(args)} were given")
        if kwargs and not names.issuperset(kwargs):
            bad = sorted(set(kwargs) - names)[0]
            raise TypeError(f"{qual}() got an unexpected keyword argument {bad!r}")
        d = self.__dict__
        d.update(template)
        if args:
            if kwargs and not kwargs.keys().isdisjoint(order[:len(args)]):
                name = next(x for x in order[:len(args)] if x in kwargs)
                raise TypeError(f"{qual}() got multiple values for argument {name!r}")
            d.update(zip(order, args))
        if kwargs:
            d.update(kwargs)
        for name in required:
            if d[name] is MISSING:
                raise TypeError(f"{qual}() missing required argument: {name!r}")
        for name, factory in factories:
            if d[name] is _FACTORY:
                d[name] = factory()
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{qual}.__init__"
    return __init__


def _values(self) -> tuple:
    d = self.__dict__
    return tuple(d[f.name] for f in self.__record_fields__)


def _repr(self) -> str:
    d = self.__dict__
    return f"{type(self).__qualname__}(" + ", ".join(f"{f.name}={d[f.name]!r}" for f in self.__record_fields__) + ")"


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _values(self) == _values(other)
    return NotImplemented


def _hash(self) -> int:
    return hash(_values(self))


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def record(cls=None, /, *, frozen: bool = False, eq: bool = True, repr: bool = True):
    """Class decorator: ``@record`` or ``@record(frozen=True, eq=False, repr=False)``.

    Adds ``__init__`` (the fields in order, positional or by keyword; missing or unknown ones:
    TypeError; then ``__post_init__()`` when the class has one), ``__repr__``
    (``Name(a=1, b='x')``), ``__eq__`` (same class and equal fields), ``__hash__`` (frozen and
    eq: hash of the fields; eq only: unhashable), ``__match_args__`` and
    ``__record_fields__`` (the :class:`Field` table). Methods the class body defines itself are
    kept. Raises TypeError for a field without a default after one with a default, ValueError
    for a mutable default (list, dict, set: use ``field(default_factory=...)``)."""
    def wrap(cls):
        table = _table(cls)
        own = cls.__dict__
        cls.__record_fields__ = table
        if "__init__" not in own:
            cls.__init__ = _init_for(cls, table)
        if repr and "__repr__" not in own:
            cls.__repr__ = _repr
        if eq and "__eq__" not in own:
            cls.__eq__ = _eq
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        if not explicit_hash:
            if eq and frozen:
                cls.__hash__ = _hash
            elif eq:
                cls.__hash__ = None
        if frozen:
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_delattr
        if "__match_args__" not in own:
            cls.__match_args__ = tuple(f.name for f in table)
        return cls

    return wrap if cls is None else wrap(cls)


def is_record(obj) -> bool:
    """True for a :func:`record` class or instance."""
    return hasattr(obj if isinstance(obj, type) else type(obj), "__record_fields__")


def fields(obj) -> tuple[Field, ...]:
    """The :class:`Field` table of a record class or instance, in order (TypeError for anything
    else)."""
    table = getattr(obj if isinstance(obj, type) else type(obj), "__record_fields__", None)
    if table is None:
        raise TypeError(f"not a record: {obj!r}")
    return table


def replace(obj, /, **changes):
    """A new record of ``obj``'s class with ``changes`` over its fields (through ``__init__``,
    so ``__post_init__`` runs again; TypeError for a name that is not a field)."""
    values = {f.name: obj.__dict__[f.name] for f in fields(obj)}
    for name in changes:
        if name not in values:
            raise TypeError(f"{type(obj).__qualname__} has no field {name!r}")
    values.update(changes)
    return type(obj)(**values)


def asdict(obj) -> dict:
    """``obj``'s fields as a dict, records inside it (also in lists, tuples and dicts) turned
    into dicts too; other values are shared, not copied. TypeError for a non-record."""
    fields(obj)
    return _plain(obj)


def _plain(v):
    if is_record(v) and not isinstance(v, type):
        return {f.name: _plain(v.__dict__[f.name]) for f in v.__record_fields__}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return v


def _json_int(v):
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@record
class GpuIdentity:
    """Which GPU one of a job's GPUs is, in each numbering that names it.

    ``index``: Slurm's GPU index (the GPU's place in the node's gres.conf list, as in
    ``SLURM_JOB_GPUS``); ``nvml_index``: NVML's enumeration index (``nvmlDeviceGetIndex``; it
    differs from Slurm's when the device minors are not in bus order); ``minor``: the device's
    minor number (``/dev/nvidia<minor>``; ``nvmlDeviceGetMinorNumber``); ``uuid``:
    ``nvmlDeviceGetUUID`` (``GPU-...``); ``pci_bus_id``: ``nvmlDeviceGetPciInfo``'s bus id
    (``0000:9b:00.0``). Each is None when not known (no NVML device has that minor, NVML not
    read). Subclasses add their own fields after these five (positional order kept).
    """

    index: int
    nvml_index: int | None = None
    minor: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None

    def identity_json(self) -> dict:
        """The five fields as a JSON object, in their on-disk order (``index`` first)."""
        return {"index": self.index, "nvml_index": self.nvml_index, "minor": self.minor, "uuid": self.uuid,
                "pci_bus_id": self.pci_bus_id}

    def identity(self) -> tuple:
        """``(index, nvml_index, minor, uuid, pci_bus_id)``: the positional arguments of any
        subclass, to carry one GPU from one record to the next."""
        return (self.index, self.nvml_index, self.minor, self.uuid, self.pci_bus_id)

    @staticmethod
    def identity_fields(d) -> dict:
        """The five fields read from JSON object ``d`` as keyword arguments (a number that is
        not an integer, or a missing key, reads as None; ``uuid`` / ``pci_bus_id`` as text).
        Raises ValueError when ``d`` is not an object with a numeric ``index``."""
        if not isinstance(d, dict) or _json_int(d.get("index")) is None:
            raise ValueError("gpus: want objects with an integer index")
        uuid, bus = d.get("uuid"), d.get("pci_bus_id")
        return {"index": _json_int(d["index"]), "nvml_index": _json_int(d.get("nvml_index")),
                "minor": _json_int(d.get("minor")), "uuid": None if uuid is None else str(uuid),
                "pci_bus_id": None if bus is None else str(bus)}
