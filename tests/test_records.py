"""fleetform.records.frozen behaves as dataclass(frozen=True, slots=True), which it replaces for
speed (benchmarks/startup.py): the same construction, errors, equality, hashing, repr, immutability,
slots, pickling and dataclasses functions, checked side by side on one class body."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from fleetform.model import Blueprint, Fleet
from fleetform.records import frozen

BODY = '''
class Point:
    """A point."""

    x: int
    y: str
    tags: tuple = ()
    extra: list = dataclasses.field(default_factory=list)
'''


def _make(decorate):
    space = {"dataclasses": dataclasses, "__name__": __name__}
    exec(BODY, space)
    cls = decorate(space["Point"])
    cls.__qualname__ = cls.__name__ = f"Point{'Fast' if decorate is frozen else 'Real'}"
    return cls


PointFast = _make(frozen)
PointReal = _make(dataclasses.dataclass(frozen=True, slots=True))


@pytest.mark.parametrize("cls", [PointFast, PointReal], ids=["frozen", "dataclass"])
def test_the_same_behavior(cls):
    a = cls(1, "a")
    assert (a.x, a.y, a.tags, a.extra) == (1, "a", (), [])
    assert cls(1, y="a") == a == cls(x=1, y="a", tags=(), extra=[]) and cls(2, "a") != a
    assert repr(a) == f"{cls.__name__}(x=1, y='a', tags=(), extra=[])"
    assert cls(1, "a").extra is not cls(1, "a").extra  # a fresh default each time
    assert a.__eq__(object()) is NotImplemented
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.x
    assert not hasattr(a, "__dict__") and cls.__slots__ == ("x", "y", "tags", "extra")
    for bad in [lambda: cls(1), lambda: cls(1, "a", (), [], 5), lambda: cls(1, "a", z=2), lambda: cls(1, "a", x=2)]:
        with pytest.raises(TypeError):
            bad()
    assert dataclasses.is_dataclass(a) and [f.name for f in dataclasses.fields(cls)] == ["x", "y", "tags", "extra"]
    assert dataclasses.replace(a, y="b") == cls(1, "b")
    assert dataclasses.asdict(a) == {"x": 1, "y": "a", "tags": (), "extra": []}
    assert repr(cls.__dataclass_params__) == repr(PointReal.__dataclass_params__)  # made on first use for frozen
    assert cls.__dataclass_params__.frozen and cls.__match_args__ == ("x", "y", "tags", "extra")
    assert cls.__doc__ == "A point."
    b = cls(1, "a", ("t",), [1])
    assert pickle.loads(pickle.dumps(b)) == b == copy.deepcopy(b) == copy.copy(b)


def test_hashes_match_the_dataclass():
    for args in [(1, "a", (), ()), (2, "b", ("t",), (1,))]:
        assert hash(PointFast(*args)) == hash(PointReal(*args))
    assert {PointFast(1, "a", ("t",), ()), PointFast(1, "a", ("t",), ())} == {PointFast(1, "a", ("t",), ())}


def test_the_model_uses_it():
    assert "__record_names__" in vars(Blueprint) and "__record_names__" in vars(Fleet)


def test_a_dataclass_may_derive_from_a_record():
    """dataclasses reads the base's __dataclass_params__ (a frozen base needs a frozen subclass)."""
    derived = dataclasses.dataclass(frozen=True)(type("Derived", (PointFast,), {"__annotations__": {"z": "int"},
                                                                                 "z": 0}))
    assert derived(1, "a").z == 0 and [f.name for f in dataclasses.fields(derived)][-1] == "z"
    with pytest.raises(TypeError, match="non-frozen dataclass from a frozen one"):
        dataclasses.dataclass(type("Thawed", (PointFast,), {"__annotations__": {"z": "int"}, "z": 0}))
