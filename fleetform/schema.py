"""The JSON Schema stage: structure, types, enums and patterns, every error at once.

jsonschema finds the errors; this module turns each into a finding a person can act on:
the exact position, a plain message, and a hint (did you mean, an example, the field's
description). anyOf/oneOf failures report the branch the value was evidently meant for.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Iterator

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from . import plaintext
from .findings import Finding, describe
from .loader import Document

RULE = "schema"
SCHEMA_FILE = "fleetform-v1.schema.json"


def schema_text() -> str:
    return resources.files("fleetform.blueprints").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(schema_text())


def _is_integer(checker, instance) -> bool:
    # JSON Schema counts 6.0 as an integer; a blueprint must write whole numbers as such, or `6.0`
    # would reach slurm.conf (which rejects CPUs=224.0) and vLLM's arguments.
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return _Validator(schema())


def _scalars(data: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any, bool]]:
    """Every scalar of the data with its path; keys too (flag True)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield path + (key,), key, True
            yield from _scalars(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _scalars(value, path + (index,))
    else:
        yield path, data, False


def _plain_values(doc: Document) -> Iterator[Finding]:
    """What JSON Schema patterns cannot catch: no value or key of a blueprint spans lines, holds control
    characters or template delimiters (fleetform.plaintext, the rule the render guard applies too;
    Python's `$` matches before a final newline), and every number is finite."""
    for path, value, is_key in _scalars(doc.data):
        if isinstance(value, str):
            found = plaintext.problem(value)
            if found:
                yield _finding(doc, path, f"{'the key' if is_key else 'the value'} holds {found.what}", found.hint,
                               key=is_key)
        elif isinstance(value, float) and not math.isfinite(value):
            yield _finding(doc, path, f"{value} is not a finite number", "write a number")


def check(doc: Document) -> list[Finding]:
    """All schema findings of a document, deduplicated, in file order."""
    seen: set[tuple] = set()
    out: list[Finding] = list(_plain_values(doc))
    flagged = {f.path for f in out}  # a value with a line break needs no second finding for its pattern
    for err in _validator().iter_errors(doc.data):
        for finding in _translate(err, doc):
            key = (finding.line, finding.column, finding.path, finding.message)
            if key not in seen and finding.path not in flagged:
                seen.add(key)
                out.append(finding)
    return sorted(out, key=Finding.sort_key)


# --- translation -------------------------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
    "object": "a mapping of fields", "array": "a list", "null": "nothing",
}


def _resolve(sub: Any) -> dict:
    """Follow a local $ref (one level) so titles and descriptions can be read."""
    if not isinstance(sub, dict):
        return {}
    ref = sub.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = dict(schema()["$defs"][ref.split("/")[-1]])
        target.update({k: v for k, v in sub.items() if k != "$ref"})
        return target
    return sub


def _field_help(sub: Any) -> str:
    sub = _resolve(sub)
    text = _lower(sub.get("description", "")).rstrip(".")
    examples = sub.get("examples")
    if examples:
        text = f"{text.rstrip('.')}; e.g. {examples[0]}" if text else f"e.g. {examples[0]}"
    return text


def _lower(text: str) -> str:
    """Lower-case the first letter of a sentence used inside another one (not of an acronym)."""
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if text and (len(first) == 1 or first[1:].islower()) else text


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    choices = [str(c) for c in choices]
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    from difflib import get_close_matches  # imported for suggestions only

    match = get_close_matches(word, choices, n=1, cutoff=0.6)
    return match[0] if match else None


def _finding(doc: Document, path: tuple, message: str, hint: str = "", key: bool = False) -> Finding:
    return doc.finding(path, message, RULE, hint, key=key)


def _translate(err: ValidationError, doc: Document) -> Iterator[Finding]:
    path = tuple(err.absolute_path)
    v, value, instance = err.validator, err.validator_value, err.instance

    if v in ("anyOf", "oneOf"):
        yield from _best_match(err, doc)
    elif v == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        for extra in sorted(set(instance) - set(allowed), key=str):
            guess = _did_you_mean(str(extra), allowed)
            hint = f"did you mean '{guess}'?" if guess else f"allowed fields here: {', '.join(allowed)}"
            yield _finding(doc, path + (extra,), "unknown field", hint, key=True)
    elif v == "required":
        props = err.schema.get("properties", {})
        for name in value:
            if isinstance(instance, dict) and name not in instance:
                help_ = _field_help(props.get(name))
                yield _finding(doc, path, f"missing required field '{name}'",
                               f"add `{name}:`" + (f" ({_lower(help_).rstrip('.')})" if help_ else ""))
    elif v == "propertyNames" or "propertyNames" in err.relative_schema_path:
        sub = _resolve(err.schema)
        what = sub.get("title", "name")
        hint = f"e.g. {sub['examples'][0]}" if sub.get("examples") else ""
        yield _finding(doc, path + (instance,), f"{instance!r} is not a valid {what}", hint, key=True)
    elif v == "not" and value == {}:  # `{"not": {}}` marks a field that does not apply to this type
        field = path[-1] if path else ""
        parent = _value_at(doc.data, path[:-1])
        kind = parent.get("type") if isinstance(parent, dict) else None
        message = f"'{field}' does not apply when type is {kind!r}" if kind else f"'{field}' is not allowed here"
        yield _finding(doc, path, message, "remove it, or change the type", key=True)
    elif v == "type":
        source = doc.source_text(path)
        got = describe(instance)
        if source is not None and source != str(instance):  # `1.30`: YAML reads the float 1.3
            got = f"a number ({source}, which YAML reads as {instance})"
        yield _finding(doc, path, f"expected {_types(value)}, got {got}", _type_hint(value, instance, err, source))
    elif v == "enum":
        options = ", ".join(str(o) for o in value)
        guess = _did_you_mean(str(instance), value) if isinstance(instance, (str, int)) else None
        hint = f"did you mean '{guess}'?" if guess else f"choose one of: {options}"
        yield _finding(doc, path, f"{instance!r} is not one of: {options}", hint)
    elif v == "const":
        yield _finding(doc, path, f"must be {value!r}, not {instance!r}", f"write `{path[-1] if path else 'value'}: {value}`")
    elif v == "pattern":
        sub = _resolve(err.schema)
        what = sub.get("title", "value")
        yield _finding(doc, path, f"{instance!r} is not a valid {what}", _field_help(sub))
    elif v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "below the minimum of", "exclusiveMinimum": "not above",
                 "maximum": "above the maximum of", "exclusiveMaximum": "not below"}[v]
        fallback = {"minimum": f"use {value} or more", "maximum": f"use {value} or less"}.get(v, "")
        yield _finding(doc, path, f"{_number(instance)} is {words} {value:,}", _field_help(err.schema) or fallback)
    elif v in ("minItems", "maxItems"):
        word = "at least" if v == "minItems" else "at most"
        yield _finding(doc, path, f"needs {word} {value} item{'s' if value != 1 else ''}, has {len(instance)}",
                       _field_help(err.schema))
    elif v == "uniqueItems":
        dupes = sorted({json.dumps(x) for i, x in enumerate(instance) if x in instance[:i]})
        yield _finding(doc, path, f"lists {', '.join(dupes)} more than once", "list each item once")
    elif v == "minLength":
        yield _finding(doc, path, f"is shorter than the minimum of {value} characters ({len(instance)})",
                       _field_help(err.schema))
    elif v == "maxLength":
        yield _finding(doc, path, f"is longer than {value} characters ({len(instance)})", _field_help(err.schema))
    elif v == "maxProperties":
        yield _finding(doc, path, f"has {len(instance)} entries, more than the {value} allowed")
    else:  # a keyword this module does not phrase yet: still a finding, with jsonschema's words
        yield _finding(doc, path, err.message)


def _types(value: Any) -> str:
    names = [value] if isinstance(value, str) else list(value)
    return " or ".join(_TYPE_NAMES.get(n, n) for n in names)


def _type_hint(expected: Any, instance: Any, err: ValidationError, source: str | None = None) -> str:
    """`source`: the number as the file writes it (`1.30`, read as the float 1.3): quoting that text is
    what keeps the value the user meant."""
    names = {expected} if isinstance(expected, str) else set(expected)
    if instance is None:
        return "the value is empty: write one, or remove the key"
    if "string" in names and isinstance(instance, (int, float, bool)):
        written = str(instance).lower() if isinstance(instance, bool) else source or str(instance)
        sub = _resolve(err.schema)
        if sub.get("pattern") and not re.search(sub["pattern"], written) and sub.get("examples"):
            return f"write it as text, e.g. \"{sub['examples'][0]}\""  # quoting alone would not make it valid
        return f"quote it to keep it text: \"{written}\""
    if "integer" in names and isinstance(instance, float):
        sub = _resolve(err.schema)
        within = sub.get("minimum", -math.inf) <= instance <= sub.get("maximum", math.inf)
        return f"write a whole number, e.g. {int(instance)}" if instance.is_integer() and within else \
            _bounds_hint(sub) or "write a whole number"
    if "boolean" in names and isinstance(instance, str):
        return "write true or false (YAML 1.2: yes/no/on/off are text)"
    return _field_help(err.schema)


def _number(value: Any) -> str:
    """A number as a message quotes it: a 4,000-digit integer by its length, not its digits."""
    text = str(value)
    return text if len(text) <= 24 else f"a number of {len(text.lstrip('-')):,} digits"


def _bounds_hint(sub: dict) -> str:
    low, high = sub.get("minimum"), sub.get("maximum")
    return f"write a whole number from {low:,} to {high:,}" if low is not None and high is not None else ""


def _value_at(data: Any, path: tuple) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _best_match(err: ValidationError, doc: Document) -> Iterator[Finding]:
    """Report the branch of an anyOf/oneOf the value was meant for.

    A branch whose own type (or const) test fails at the value itself was meant for another
    kind of value and is dropped. If one branch is left, its errors are the findings. If
    several are left, the one that got deepest into the value wins. If none, say which kinds
    of value are accepted.
    """
    branches: dict[int, list[ValidationError]] = {}
    for sub in err.context or ():
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    if err.validator == "oneOf" and len(branches) < len(err.validator_value):
        # oneOf failed because several branches matched: the value is ambiguous.
        yield _finding(doc, tuple(err.absolute_path), "matches more than one of the accepted forms",
                       _field_help(err.schema))
        return
    plausible = {
        i: subs for i, subs in branches.items()
        if not any(s.validator in ("type", "const") and not s.relative_path for s in subs)
    }
    path = tuple(err.absolute_path)
    if not plausible:
        kinds = []
        for sub in err.validator_value:
            t = _resolve(sub).get("type")
            if t and _types(t) not in kinds:
                kinds.append(_types(t))
        message = f"expected {' or '.join(kinds) or 'another kind of value'}, got {describe(err.instance)}"
        hint = _field_help(err.schema)
        if isinstance(err.instance, str) and err.instance.strip().isdigit() and _TYPE_NAMES["integer"] in kinds:
            hint = f"write the number without quotes: {err.instance.strip()}"
        elif isinstance(err.instance, float) and err.instance.is_integer() and _TYPE_NAMES["integer"] in kinds:
            whole = next((_resolve(sub) for sub in err.validator_value if _resolve(sub).get("type") == "integer"), {})
            if whole.get("minimum", -math.inf) <= err.instance <= whole.get("maximum", math.inf):
                hint = f"write it as a whole number: {int(err.instance)}"
            else:
                hint = _bounds_hint(whole) or hint
        yield _finding(doc, path, message, hint)
        return
    if len(plausible) > 1:
        subs_all = [s for subs in plausible.values() for s in subs]
        if all(s.validator == "pattern" and not s.relative_path for s in subs_all):
            titles = [_resolve(s.schema).get("title", "value") for s in subs_all]
            examples = [str(_resolve(s.schema).get("examples", [""])[0]) for s in subs_all]
            yield _finding(doc, path, f"{err.instance!r} is neither {' nor '.join(f'a valid {t}' for t in titles)}",
                           "e.g. " + " or ".join(e for e in examples if e))
            return
    best = max(plausible.values(), key=lambda subs: (max(len(s.absolute_path) for s in subs), -len(subs)))
    for sub in best:
        yield from _translate(sub, doc)
