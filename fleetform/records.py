"""`@frozen`: what `@dataclass(frozen=True, slots=True)` makes, at a fraction of its import cost.

Python 3.11's dataclass compiles six small functions per frozen class (`__init__`, `__repr__`,
`__eq__`, `__hash__`, `__setattr__`, `__delattr__`, one `exec` each). fleetform's model has about
forty such classes, and compiling them was most of what `fleetform validate` spent importing
fleetform (about 37 ms, measured with benchmarks/startup.py; issue 13 sets validate at most 1.2x
the import of yaml and jsonschema). `@frozen` builds the same dataclass fields dataclasses would
(dataclasses.Field objects, so `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work as
before) and gives every class the same shared, generic methods: the same behavior (immutable,
slotted, compared and hashed by value, the dataclass repr), a few microseconds more per instance.

A class that needs more than plain fields with defaults (field(init=False), kw_only, ClassVar,
InitVar, __post_init__, base classes) gets the real dataclass, as does a Python whose dataclasses
lack the private `_FIELD` mark that dataclasses.fields() selects fields by.
"""

from __future__ import annotations

import dataclasses

_setattr = object.__setattr__


def _init(self, *args, **kwargs) -> None:
    cls = type(self)
    names, defaults = cls.__record_names__, cls.__record_defaults__
    if len(args) > len(names):
        raise TypeError(f"{cls.__qualname__}() takes {len(names)} arguments but {len(args)} were given")
    for name, value in zip(names, args, strict=False):  # the first len(args) fields
        _setattr(self, name, value)
    for name, value in kwargs.items():
        if name not in defaults:
            raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {name!r}")
        if names.index(name) < len(args):
            raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
        _setattr(self, name, value)
    for name in names[len(args):]:
        if name in kwargs:
            continue
        default, factory = defaults[name]
        if default is not dataclasses.MISSING:
            _setattr(self, name, default)
        elif factory is not dataclasses.MISSING:
            _setattr(self, name, factory())
        else:
            raise TypeError(f"{cls.__qualname__}() missing required argument: {name!r}")


def _values(self) -> tuple:
    return tuple(getattr(self, name) for name in self.__record_names__)


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self) -> int:
    return hash(_values(self))


def _repr(self) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_names__)
    return f"{type(self).__qualname__}({fields})"


def _frozen_setattr(self, name, value):
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self) -> list:
    return list(_values(self))


def _setstate(self, state) -> None:
    for name, value in zip(self.__record_names__, state, strict=True):
        _setattr(self, name, value)


class _Params:
    """Every record's __dataclass_params__ (frozen, eq, ...): those of a real frozen, slotted dataclass,
    made on first use. Only introspection reads them (dataclasses itself when a dataclass derives from
    a record), and making that dataclass costs 0.7 ms, which every command would pay at import."""

    params = None

    def __get__(self, instance, owner):
        if _Params.params is None:
            @dataclasses.dataclass(frozen=True, slots=True)
            class Record:
                pass

            _Params.params = Record.__dataclass_params__
        return _Params.params


_FIELD = getattr(dataclasses, "_FIELD", None)  # the mark dataclasses.fields() selects fields by


def _fields(cls: type) -> dict[str, dataclasses.Field] | None:
    """The class's fields as dataclasses would find them, or None when it needs dataclasses' own
    processing (ClassVar, InitVar, KW_ONLY, fields with init=False or kw_only, or a Python whose
    dataclasses lack the mark this relies on)."""
    if _FIELD is None:
        return None
    fields = {}
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if not isinstance(annotation, str) or "ClassVar" in annotation or "InitVar" in annotation \
                or "KW_ONLY" in annotation:
            return None
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            if not default.init or default.kw_only is True:
                return None
            field = default
        elif isinstance(default, (list, dict, set)):
            raise ValueError(f"mutable default {type(default)} for field {name} is not allowed: use default_factory")
        else:
            field = dataclasses.field(default=default)
        field.name, field.type, field._field_type, field.kw_only = name, annotation, _FIELD, False
        fields[name] = field
    return fields


def frozen(cls: type) -> type:
    """The class as an immutable, slotted dataclass (see the module's docstring)."""
    own = cls.__dict__
    fields = None
    if cls.__bases__ == (object,) and "__post_init__" not in own and "__slots__" not in own:
        fields = _fields(cls)
    if fields is None:
        return dataclasses.dataclass(frozen=True, slots=True)(cls)
    names = tuple(fields)
    body = {k: v for k, v in own.items() if k not in fields and k not in ("__dict__", "__weakref__")}
    if not body.get("__doc__"):
        body["__doc__"] = f"{cls.__name__}({', '.join(names)})"
    body.update(__slots__=names, __match_args__=names, __dataclass_fields__=fields,
                __dataclass_params__=_Params(), __record_names__=names,
                __record_defaults__={f.name: (f.default, f.default_factory) for f in fields.values()},
                __init__=_init, __repr__=_repr, __eq__=_eq, __hash__=_hash, __setattr__=_frozen_setattr,
                __delattr__=_frozen_delattr, __getstate__=_getstate, __setstate__=_setstate)
    return type(cls)(cls.__name__, cls.__bases__, body)
