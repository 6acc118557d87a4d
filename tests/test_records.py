"""slurmkit.records behaves like dataclasses for what the hook modules use, and imports nothing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from slurmkit import records
from slurmkit.records import FrozenInstanceError, field, record


@record
class Point:
    """A test record."""

    x: int
    y: int = 0
    tags: list = field(default_factory=list)


@dataclasses.dataclass
class DPoint:
    """The same as a dataclass, to compare with."""

    x: int
    y: int = 0
    tags: list = dataclasses.field(default_factory=list)


@record(frozen=True)
class Frozen:
    """A frozen one."""

    a: str
    b: tuple = ()


def test_init_repr_eq_match_the_dataclass():
    for args, kwargs in [((1,), {}), ((1, 2), {}), ((), {"x": 3, "tags": ["t"]}), ((4,), {"y": 5}),
                         ((), {"tags": None, "y": 2, "x": 1}), ((1, 2, ["a"]), {})]:
        r, d = Point(*args, **kwargs), DPoint(*args, **kwargs)
        assert (r.x, r.y, r.tags) == (d.x, d.y, d.tags)
        assert repr(r) == repr(d).replace("DPoint", "Point")
        assert r.__dict__ == d.__dict__ and list(r.__dict__) == ["x", "y", "tags"]
    assert Point(1) == Point(1) and Point(1) != Point(2) and Point(1) != DPoint(1)
    assert Point(1).tags is not Point(1).tags  # a fresh list per instance
    assert Point.__match_args__ == ("x", "y", "tags")
    with pytest.raises(TypeError):
        hash(Point(1))  # eq without frozen: unhashable, as dataclasses


@pytest.mark.parametrize("args, kwargs, words", [
    ((), {}, "missing required argument: 'x'"),
    ((1, 2, [], 4), {}, "takes 3 positional arguments but 4 were given"),
    ((1,), {"z": 1}, "unexpected keyword argument 'z'"),
    ((1,), {"x": 2}, "multiple values for argument 'x'"),
])
def test_bad_arguments_are_type_errors(args, kwargs, words):
    with pytest.raises(TypeError, match=words):
        Point(*args, **kwargs)


def test_frozen_records_are_immutable_and_hashable():
    f = Frozen("a", (1,))
    with pytest.raises(FrozenInstanceError):
        f.a = "b"
    with pytest.raises(AttributeError):
        del f.b
    assert hash(f) == hash(Frozen("a", (1,))) and {f, Frozen("a", (1,))} == {f}
    g = records.replace(f, b=(2,))
    assert (g.a, g.b, f.b) == ("a", (2,), (1,))
    with pytest.raises(TypeError, match="no field 'c'"):
        records.replace(f, c=1)


def test_fields_asdict_post_init_and_class_body_checks():
    assert [(f.name, f.default) for f in records.fields(Point)] == [("x", records.MISSING), ("y", 0),
                                                                     ("tags", records.MISSING)]
    assert records.fields(Point)[2].default_factory is list and not hasattr(Point, "tags")
    assert records.asdict(Point(1, tags=[Frozen("a")])) == {"x": 1, "y": 0, "tags": [{"a": "a", "b": ()}]}
    with pytest.raises(TypeError):
        records.fields(DPoint)
    assert records.is_record(Point) and records.is_record(Point(1)) and not records.is_record(DPoint)

    @record
    class Checked:
        """Converts in __post_init__, as CheckResult does."""

        n: int

        def __post_init__(self):
            self.n = int(self.n)

    assert Checked("3").n == 3 and records.replace(Checked(1), n="7").n == 7
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Bad:
            """A list default."""

            x: list = []
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Order:
            """A required field after a defaulted one."""

            a: int = 0
            b: int


def test_keeps_methods_the_class_defines_and_inherits_fields():
    @record(eq=False, repr=False)
    class Own:
        """Its own eq and repr."""

        v: int = 0

        def __eq__(self, other):
            return True

        def __repr__(self):
            return "own"

    assert Own(1) == Own(2) and repr(Own()) == "own"

    @record
    class Child(Point):
        """Point's fields, then its own."""

        z: int = 9

    assert records.fields(Child)[-1].name == "z" and Child(1, 2, [], 3).z == 3


def test_a_record_inside_a_frozen_dataclass_default_is_allowed():
    from slurmkit.profile.model import Cluster, Profile
    from slurmkit.profile.health import Health

    a = Profile(source="", cluster=Cluster(name="c"), partitions={}, node_types={})
    assert a.health == Health() and a == Profile(source="", cluster=Cluster(name="c"), partitions={}, node_types={})


def test_importing_records_imports_nothing():
    code = ("import sys; before = set(sys.modules); import slurmkit.records; "
            "print(sorted(set(sys.modules) - before - {'slurmkit', 'slurmkit.records'}))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
