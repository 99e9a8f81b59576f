"""What a blueprint value may contain: one line of plain text, without template syntax.

The one source of truth for two stages. The schema stage (fleetform/schema.py) reports a value or
key that breaks it as a finding at its line; the render guard (fleetform/render/jinja.py) refuses
to print such a value, which then is a bug (the schema stage should have reported it). Because
both ask `problem()`, nothing validates that the renderer later refuses.
"""

from __future__ import annotations

import re

from .records import frozen

DELIMITERS = ("{{", "}}", "{%", "%}", "{#", "#}")
"""Jinja's default delimiters, which fleetform's one environment uses (a test keeps them in step)."""

_LINE_BREAKS = {"\n": "a line break", "\r": "a carriage return", "\x85": "a next-line character (U+0085)",
                "\u2028": "a line separator (U+2028)", "\u2029": "a paragraph separator (U+2029)"}
_BAD_CHARS = frozenset([*map(chr, range(0x09)), *map(chr, range(0x0A, 0x20)), "\x7f", "\x85", "\u2028", "\u2029"])
"""C0 controls but tab, DEL, and the characters YAML 1.1 readers (kubectl's, PyYAML's) and Python's
str.splitlines() take as line breaks. A set, not a regular expression: compiling the character class
(it reaches beyond Latin-1) took 0.4 ms of every validate, more than testing every value of a blueprint."""
_DELIMITER = re.compile("|".join(re.escape(d) for d in DELIMITERS))


@frozen
class Problem:
    what: str  # e.g. "a line break", "the template delimiter '{{'"
    hint: str


def problem(text: str) -> Problem | None:
    """Why text cannot be a blueprint value (or reach a rendered file), or None if it can."""
    if not _BAD_CHARS.isdisjoint(text):
        c = next(c for c in text if c in _BAD_CHARS)  # the first, as a search would find it
        what = _LINE_BREAKS.get(c) or ("a NUL character" if c == "\x00" else f"the control character U+{ord(c):04X}")
        hint = "every blueprint value is one line of text; remove it"
        if c in "\n\r":
            hint += " (a `|` or `>` block scalar adds a final line break: use a plain or quoted scalar)"
        return Problem(what, hint)
    delimiter = _DELIMITER.search(text)
    if delimiter:
        return Problem(f"the template delimiter '{delimiter.group()}'",
                       "rendered files are Jinja templates' output and no value may carry template syntax; "
                       f"remove it or put a space between the characters ({' '.join(delimiter.group())})")
    return None
