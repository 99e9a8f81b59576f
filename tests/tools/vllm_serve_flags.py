"""Regenerate providers/vllm-serve-flags.tsv from vLLM's own `vllm serve` parser (a maintainer's tool, not a test).

vLLM builds its server's argparse parser from its config dataclasses (vllm/engine/arg_utils.py,
_compute_kwargs: a bool field becomes argparse.BooleanOptionalAction, a list or variadic tuple
nargs='+', a Literal choices, ...) and vllm/entrypoints/openai/cli_args.py (make_arg_parser). This
builds that very parser, from the pinned release's wheel, and writes each option's arity as argparse
reads it: no GPU, torch or transformers is needed, those imports are stubbed (no option depends on
them), and the device config is not inferred.

    python3 -m venv /tmp/vv && /tmp/vv/bin/pip install --no-deps vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl
    /tmp/vv/bin/pip install pydantic pyyaml regex cachetools msgspec packaging openai fastapi email-validator
    (and empty dist-info METADATA for torch, transformers, triton, xformers, flashinfer-python, tokenizers)
    /tmp/vv/bin/python tests/tools/vllm_serve_flags.py providers/vllm-serve-flags.tsv new.tsv

It keeps the group and status columns of the current file (checking status against the parser's
deprecated options), adds options the parser has and the file lacks, and writes arity, value and
choices.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types

REAL = {"vllm", "pydantic", "pydantic_core", "yaml", "typing_extensions", "regex", "cachetools", "msgspec",
        "annotated_types", "typing_inspection", "openai", "fastapi", "email_validator", "dns", "starlette", "httpx",
        "anyio", "sniffio", "idna", "httpcore", "h11", "certifi", "distro", "jiter", "tqdm", "packaging",
        "pkg_resources", "setuptools"}
ABSENT = {"libtpu", "tpu_info", "intel_extension_for_pytorch", "oneccl_bindings_for_pytorch", "amdsmi", "pynvml",
          "tpu_commons", "tpu_inference"}  # absent, so no accelerator platform is detected


class _Meta(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = _make(attr)
        setattr(cls, attr, value)
        return value

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return super().__call__()

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls


def _make(name: str):
    from pydantic_core import core_schema

    return _Meta(name, (), {
        "__init__": lambda s, *a, **k: None, "__getattr__": lambda s, a: _make(a)(), "__call__": lambda s, *a, **k: s,
        "__radd__": lambda s, o: o, "__add__": lambda s, o: s, "__iter__": lambda s: iter(()),
        "__getitem__": lambda s, i: s, "__len__": lambda s: 0, "__int__": lambda s: 0, "__index__": lambda s: 0,
        "__lt__": lambda s, o: False, "__gt__": lambda s, o: False, "__le__": lambda s, o: False,
        "__ge__": lambda s, o: False, "__enter__": lambda s: s, "__exit__": lambda s, *a: False,
        "__str__": lambda s: name, "__mul__": lambda s, o: s, "__rmul__": lambda s, o: s, "__or__": lambda s, o: s,
        "__get_pydantic_core_schema__": classmethod(lambda c, *a: core_schema.any_schema()),
    })


class _Stub(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__file__ = "<stub>"

    def __getattr__(self, attr):
        if attr == "__version__":
            return "2.8.0"
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self.__name__ == "torch" and attr in ("iinfo", "finfo"):
            return lambda t: types.SimpleNamespace(min=-2**63, max=2**63 - 1)
        value = _make(attr)
        setattr(self, attr, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in REAL or top in sys.stdlib_module_names or top in ABSENT:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module):
        pass


def _value(action) -> str:
    """What the option's value must be, as its `type` converts it: int, float, size, json or text; a
    number with `?` when vLLM's optional_type wraps it, which also takes '' and 'None'."""
    kind = action.type
    optional = getattr(kind, "__name__", "") == "_optional_type"  # also takes '' and 'None' (as None)
    while kind is not None and getattr(kind, "__name__", "") in ("_optional_type", "_parse_type"):
        kind = next((c.cell_contents for c in (kind.__closure__ or ()) if callable(c.cell_contents)), None)
    name = getattr(kind, "__name__", "")
    mark = "?" if optional else ""
    if name in ("int", "human_readable_int"):
        return ("int" if name == "int" else "size") + mark
    if name == "float":
        return "float" + mark
    if name in ("parse_dataclass", "union_dict_and_str", "loads"):
        return "json"
    return "text"


def main(current: str, output: str) -> None:
    sys.meta_path.append(_Finder())
    import vllm.config.device as device

    device.DeviceConfig.__post_init__ = lambda self: None  # no accelerator here; no option depends on it
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    arity, deprecated = {}, {f for a in getattr(parser, "_deprecated", ()) for f in a.option_strings}
    for action in parser._actions:
        if action.nargs == 0:
            n = "0"
        elif action.nargs in (None,):
            n = "1"
        else:
            n = str(action.nargs)
        choices = "|".join(str(c) for c in action.choices) if action.choices is not None else ""
        for flag in action.option_strings:
            arity[flag] = (n, _value(action) if n != "0" else "", choices)
    lines = open(current, encoding="utf-8").read().splitlines()
    out, seen = [], set()
    for line in lines:
        if line.startswith("#"):
            out.append(line)
        elif line.startswith("flag\t"):
            out.append("flag\tgroup\tstatus\tarity\tvalue\tchoices")
        elif line:
            flag, group, status = line.split("\t")[:3]
            seen.add(flag)
            if (status == "deprecated") != (flag in deprecated):
                sys.exit(f"{flag}: the file says {status}, the parser {'deprecated' if flag in deprecated else 'ok'}")
            out.append("\t".join((flag, group, status) + arity[flag]))
    for flag in sorted(set(arity) - seen - {"-h", "--help"}):  # new to the file: an engine group's deprecated flag
        out.append("\t".join((flag, "engine", "deprecated" if flag in deprecated else "ok") + arity[flag]))
    gone = sorted(seen - set(arity))
    if gone:
        sys.exit(f"flags the file has and the parser lacks: {json.dumps(gone)}")
    with open(output, "w", encoding="utf-8") as f:  # not stdout: vLLM logs there
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
