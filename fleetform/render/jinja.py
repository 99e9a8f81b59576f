"""The one Jinja environment of fleetform: strict, and suspicious of what it prints.

StrictUndefined turns a misspelt name into an error instead of an empty string. As a second line
of defence behind the schema, every printed value is refused if it holds a line break, a control
character or template delimiters: a value can never add a line to a rendered config file. What is
refused is fleetform.plaintext's rule, which the schema stage reports as a finding first.

YAML templates print every value through `q` (a JSON string, which is a YAML double-quoted scalar)
or `n` (a number) or `b` (a bool): a name spelt `on`, `no`, `null` or `4711` stays a string for a YAML 1.1 reader
such as kubectl's, and tests/test_k8s.py refuses a bare `{{ value }}` in templates/k8s.
"""

from __future__ import annotations

import json
import shlex
from functools import lru_cache
from importlib import resources

import jinja2

from .. import plaintext


class RenderError(Exception):
    """A value could not be rendered safely (a bug: the schema and rules should have caught it)."""


def _finalize(value):
    found = plaintext.problem(value) if isinstance(value, str) else None
    if found:
        raise RenderError(f"refusing to render {value!r}: it holds {found.what}")
    return value


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_templates()),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["sh"] = lambda value: shlex.quote(str(value))
    env.filters["q"] = quote
    env.filters["n"] = _number
    env.filters["b"] = _boolean
    return env


def quote(value) -> str:
    """A double-quoted string both JSON and YAML read back as the value: JSON's escapes, but a character beyond
    U+FFFF written as itself (UTF-8), since json.dumps escapes it as a surrogate pair (\\ud83d\\ude00), which JSON
    reads and YAML refuses ("found invalid Unicode character escape code"; YAML 1.1/1.2 escape one code point, \\U
    for these). Both allow such a character literally (YAML's printable set holds #x10000-#x10FFFF)."""
    text = str(value)
    if all(ord(c) <= 0xFFFF for c in text):
        return json.dumps(text)
    return '"' + "".join(c if ord(c) > 0xFFFF else json.dumps(c)[1:-1] for c in text) + '"'


def _boolean(value) -> str:
    """A YAML boolean, from a Python bool only."""
    if not isinstance(value, bool):
        raise RenderError(f"refusing to render {value!r} as a boolean")
    return "true" if value else "false"


def _number(value) -> str:
    """A YAML number: refuses anything else (a bool, None or a string would print as something YAML
    reads as another type), so a template position meant for a number never carries a string."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        raise RenderError(f"refusing to render {value!r} as a number")
    return json.dumps(value)


def _templates() -> str:
    return str(resources.files("fleetform.templates"))


def render(template: str, **context) -> bytes:
    return environment().get_template(template).render(**context).encode("utf-8")
