"""The CEL rules of a CustomResourceDefinition's schema (`x-kubernetes-validations`), evaluated on an object as the
API server does on create (k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/validation.go): each rule at each
node of the object its schema node describes, `self` bound to that node, after the schema's defaults are applied
(defaulting runs before validation, pkg/apiserver/schema/defaulting). Transition rules (those naming `oldSelf`)
apply to updates only and are skipped. A rule that is false, or that fails to evaluate, refuses the object.

Evaluated with cel-python (celpy), which has CEL's standard functions and macros (has, all, exists, filter, map,
size, duration, timestamp, matches); a rule using one of Kubernetes' own CEL libraries it lacks (isURL, quantity,
ip, cidr, ...) fails to compile and is reported, never passed."""

from __future__ import annotations

import copy

import celpy

_ENV = celpy.Environment()
_PROGRAMS: dict[str, object] = {}


def _program(rule: str):
    if rule not in _PROGRAMS:
        _PROGRAMS[rule] = _ENV.program(_ENV.compile(rule))
    return _PROGRAMS[rule]


def with_defaults(schema: dict, value):
    """The object with the schema's `default`s filled in where a field is absent, as structural defaulting does."""
    if isinstance(value, dict) and isinstance(schema, dict):
        out = dict(value)
        for key, sub in schema.get("properties", {}).items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = with_defaults(sub, out[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in set(out) - set(schema.get("properties", {})):
                out[key] = with_defaults(extra, out[key])
        return out
    if isinstance(value, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        return [with_defaults(schema["items"], item) for item in value]
    return value


def violations(schema: dict, value, path: str = "") -> tuple[int, list[str]]:
    """(rules evaluated, one line per rule that refuses `value`), `value` already defaulted."""
    evaluated, found = 0, []
    for rule in schema.get("x-kubernetes-validations", []) if isinstance(schema, dict) else []:
        text = rule["rule"]
        if "oldSelf" in text:
            continue
        evaluated += 1
        try:
            result = _program(text).evaluate({"self": celpy.json_to_cel(value)})
        except Exception as err:  # noqa: BLE001 - a rule that does not evaluate refuses the object, as the server's does
            found.append(f"{path or '<root>'}: {text!r} did not evaluate: {type(err).__name__}: {err}")
            continue
        if isinstance(result, Exception):  # celpy returns some evaluation errors instead of raising them
            found.append(f"{path or '<root>'}: {text!r} did not evaluate: {result}")
        elif not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            found.append(f"{path or '<root>'}: {rule.get('message', text)!r} ({text})")
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            node = props.get(key, extra if isinstance(extra, dict) else None)
            if node is not None:
                n, f = violations(node, sub, f"{path}.{key}")
                evaluated, found = evaluated + n, found + f
    elif isinstance(value, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            n, f = violations(schema["items"], item, f"{path}[{i}]")
            evaluated, found = evaluated + n, found + f
    return evaluated, found


def check(schema: dict, obj: dict) -> tuple[int, list[str]]:
    """Evaluate every CEL rule of `schema` (a tests/crd schema) that applies to `obj`."""
    return violations(schema, with_defaults(schema, obj))
