"""`fleetform explain PATH`: one field of the blueprint, as the JSON Schema describes it (like `kubectl explain`).

Everything printed comes from the schema (blueprints/fleetform-v1.schema.json): type, allowed values,
description, children; the default from the `default` keyword or, where the schema has none, from the
description's own "default ..." words; the example from the schema's `examples`, else from the reference
blueprint at the same path. No description is kept a second time here.

A PATH is dot-separated field names; a list is entered by naming a field of its items (`fleets.models`) or
with brackets (`fleets[].models`, `fleets[0].models`); `[type=s3]` picks the branch of a conditional
(the schema's if/then on a discriminator such as storage `type`, scheduler `type`, provider `cloud`),
which shows the fields that branch requires and leaves out those it forbids; a discriminator's value as a
segment does the same (`fleets[].training` is `fleets[role=training]`, `storage.s3` is `storage[type=s3]`).
Fields whose description scopes them to another value (`inference: ...`) leave the listing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from difflib import get_close_matches
from typing import Any

SCHEMA_FILE = "fleetform-v1.schema.json"
"""fleetform.schema.SCHEMA_FILE, read here without importing jsonschema (a third of a second explain and
completion would pay for a validator they do not use)."""


@lru_cache(maxsize=1)
def schema() -> dict:
    from importlib import resources

    return json.loads(resources.files("fleetform.blueprints").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))

SEGMENT = re.compile(r"^(?P<name>[A-Za-z_$][A-Za-z0-9_$-]*)?(?P<brackets>(\[[^\]]*\])*)$")
BRACKET = re.compile(r"\[([^\]]*)\]")


class ExplainError(ValueError):
    """A PATH that names no field of the schema (a usage error, exit 2)."""


@dataclass
class Field:
    """One field of the schema, resolved: its schema node with every $ref followed and the branches chosen."""

    path: str
    node: dict
    required: bool | None = None  # None: the top of the document
    chosen: dict[str, Any] = field(default_factory=dict)  # discriminator -> value applied
    forbidden: set[str] = field(default_factory=set)  # fields the chosen branches forbid


def _deref(node: dict) -> dict:
    """node with its $ref merged in (the referring node's own keywords, such as description, win)."""
    root = schema()
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 32:
        ref = node["$ref"]
        target: Any = root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        seen += 1
    return node


def _ref_name(node: dict) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[1] if isinstance(ref, str) else None


def _branches(node: dict) -> list[dict]:
    return [_deref(b) for b in node.get("anyOf", []) + node.get("oneOf", [])]


def _properties(node: dict) -> dict[str, dict]:
    """The fields of an object node, from its own properties and those of its anyOf/oneOf branches."""
    props = dict(node.get("properties", {}))
    for branch in _branches(node):
        for name, sub in branch.get("properties", {}).items():
            props.setdefault(name, sub)
    return props


def _required(node: dict) -> set[str]:
    return set(node.get("required", []))


def _items(node: dict) -> dict | None:
    if "items" in node:
        return _deref(node["items"])
    for branch in _branches(node):
        if "items" in branch:
            return _deref(branch["items"])
    return None


def _conditions(node: dict) -> list[tuple[str, Any, dict]]:
    """(discriminator, value, then) of each `if: {properties: {D: {const: V}}}` branch of the node's allOf."""
    found = []
    for part in node.get("allOf", []):
        cond = part.get("if", {}).get("properties", {})
        if len(cond) == 1 and "then" in part:
            ((key, test),) = cond.items()
            if "const" in test:
                found.append((key, test["const"], part["then"]))
    return found


def _apply(current: Field, key: str, value: str) -> None:
    node = current.node
    props = _properties(node)
    if key not in props:
        raise ExplainError(_unknown(key, current.path, list(props), what="discriminator"))
    allowed = _values(_deref(props[key]))
    if allowed is not None and value not in [str(v) for v in allowed]:
        close = get_close_matches(value, [str(v) for v in allowed], n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else f"one of: {', '.join(map(str, allowed))}"
        raise ExplainError(f"{current.path}: {key} is never {value!r}; {hint}")
    current.chosen[key] = value
    merged = dict(node)
    merged["properties"] = dict(_properties(node))
    merged["required"] = sorted(_required(node))
    for cond_key, cond_value, then in _conditions(node):
        if cond_key == key and str(cond_value) == value:
            merged["required"] = sorted(set(merged["required"]) | _required(then))
            for name, sub in then.get("properties", {}).items():
                if sub == {"not": {}}:
                    current.forbidden.add(name)
                else:
                    merged["properties"][name] = {**merged["properties"].get(name, {}), **sub}
    current.node = merged


def _values(node: dict) -> list | None:
    if "enum" in node:
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    return None


def _unknown(name: str, where: str, names: list[str], what: str = "field") -> str:
    close = get_close_matches(name, names, n=1, cutoff=0.6)
    place = f" of {where}" if where else ""
    hint = f"did you mean {close[0]!r}?" if close else (f"its fields are {', '.join(names)}" if names else
                                                        f"{where or 'it'} has no fields")
    return f"unknown {what} {name!r}{place}; {hint}"


def resolve(path: str) -> Field:
    """The field PATH names; ExplainError for one the schema lacks."""
    text = path.strip().removeprefix(".")
    current = Field("", _deref(schema()))
    if text in ("", "."):
        return current
    for raw in text.split("."):
        m = SEGMENT.match(raw)
        if not m or (not m.group("name") and not m.group("brackets")):
            raise ExplainError(f"{path!r} is not a field path; write names with dots, e.g. fleets.models.autoscale "
                               "or fleets[0].models[].autoscale")
        name = m.group("name")
        if name:
            node = current.node
            if "properties" not in node and not _branches(node) and _items(node) is not None:
                current = Field(current.path + "[]", _items(node), current.required, {}, set())  # enter the list
                node = current.node
            props = _properties(node)
            if name not in props or name in current.forbidden:
                # a value of a discriminator picks its branch: fleets[].training = fleets[role=training]
                keys = [key for key, sub in props.items() if name in [str(v) for v in _values(_deref(sub)) or []]
                        and key not in current.chosen and len(_values(_deref(sub)) or []) > 1]
                if len(keys) == 1 and m.group("brackets") == "":
                    _apply(current, keys[0], name)
                    current.path = current.path.removesuffix("[]") + f"[{keys[0]}={name}]"
                    continue
                names = [n for n in props if n not in current.forbidden]
                raise ExplainError(_unknown(name, current.path, names))
            child = _deref(props[name])
            current = Field(f"{current.path}.{name}" if current.path else name, child, name in _required(node))
        for inner in BRACKET.findall(m.group("brackets")):
            inner = inner.strip()
            if inner == "" or inner.isdigit():
                items = _items(current.node)
                if items is None:
                    raise ExplainError(f"{current.path} is not a list; leave out [{inner}]")
                current = Field(current.path + "[]", items, current.required)
            elif "=" in inner:
                key, _, value = inner.partition("=")
                if _items(current.node) is not None and "properties" not in current.node:
                    current = Field(current.path + "[]", _items(current.node), current.required)
                key, value = key.strip(), value.strip()
                _apply(current, key, value)
                current.path = current.path.removesuffix("[]") + f"[{key}={value}]"
            else:
                raise ExplainError(f"[{inner}] in {path!r}: write [], [N] or [FIELD=VALUE] (e.g. storage[type=s3])")
    return current


def type_text(node: dict) -> str:
    """A short type: `string`, `integer (1 to 65536)`, `object`, `list of object`, `integer | object (range)`."""
    name = _ref_name(node)
    node = _deref(node)
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        return " | ".join(type_text(b) for b in branches)
    if "const" in node:
        return f"constant {node['const']!r}"
    if "enum" in node:
        return "one of " + " | ".join(str(v) for v in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array":
        items = _items(node)
        return f"list of {type_text(node['items']) if 'items' in node else 'any'}" if items is not None else "list"
    if kind is None and "properties" in node:
        kind = "object"
    kind = kind or "any"
    return f"{kind} ({name})" if name and kind != "object" else (f"object ({name})" if name else kind)


def allowed(node: dict) -> dict[str, Any]:
    """Allowed values: enum/const, pattern, bounds, lengths, item counts."""
    node = _deref(node)
    found: dict[str, Any] = {}
    values = _values(node)
    if values is not None:
        found["values"] = values
    for key in ("pattern", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength",
                "minItems", "maxItems", "uniqueItems", "format"):
        if key in node:
            found[key] = node[key]
    for branch in _branches(node):
        for key, value in allowed(branch).items():
            found.setdefault(key, value)
    return found


DEFAULT_WORDS = re.compile(r"\b[Dd]efault(?: is|:)?\s+(?P<value>.+?)(?=;\s|\.\s|\.$|$)")
"""A description's "default VALUE", up to the end of its clause; a ")" closes it only where the default
sits inside parentheses ("(default false)"), so "(60 to 1800)" stays whole (_balanced)."""


def _balanced(value: str) -> str:
    """VALUE cut before the first ")" that closes a parenthesis opened before "default"."""
    depth = 0
    for i, char in enumerate(value):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return value[:i]
    return value


def default(node: dict) -> tuple[Any, str] | None:
    """(default, where it was read): the schema's `default` keyword, else the description's "default ..."."""
    node = _deref(node)
    if "default" in node and not isinstance(node.get("properties", {}).get("default"), dict):
        return node["default"], "schema"
    m = DEFAULT_WORDS.search(node.get("description", ""))
    if m:
        return _balanced(m.group("value")).strip(), "description"
    return None


def first_sentence(text: str) -> str:
    m = re.match(r"(.+?\.)(\s|$)", text)
    return (m.group(1) if m else text).rstrip(".")


SCOPE = re.compile(r"^(?P<scope>[a-z0-9-]+(?:, [a-z0-9-]+)*): ")
"""The schema's convention for a field that applies to some cases only: its description starts with them,
`inference: ...`, `aws, training: ...`, `fsx-lustre: ...`."""


def _out_of_scope(description: str, chosen: dict[str, Any], values: dict[str, list]) -> bool:
    """A field whose description scopes it to other values of a chosen discriminator (`training:` when role
    is inference)."""
    m = SCOPE.match(description)
    if not m:
        return False
    scope = set(m.group("scope").split(", "))
    for key, value in chosen.items():
        others = {str(v) for v in values.get(key, [])} - {value}
        if scope & others and value not in scope:
            return True
    return False


def children(current: Field) -> list[dict]:
    node = current.node
    if "properties" not in node and not _branches(node) and _items(node) is not None:
        node = _items(node)
    required = _required(node)
    values = {key: _values(_deref(sub)) or [] for key, sub in _properties(node).items()}
    rows = []
    for name, sub in _properties(node).items():
        if name in current.forbidden or _out_of_scope(_deref(sub).get("description", ""), current.chosen, values):
            continue
        rows.append({"name": name, "type": type_text(sub), "required": name in required,
                     "description": first_sentence(_deref(sub).get("description", ""))})
    return rows


def example(current: Field) -> Any:
    """The schema's first example, else the value at the path in the reference blueprint (None if neither)."""
    node = current.node
    if node.get("examples"):
        return node["examples"][0]
    return _from_reference(current.path)


def _from_reference(path: str) -> Any:
    from importlib import resources

    import yaml

    if not path:
        return None
    data: Any = yaml.safe_load(resources.files("fleetform.blueprints").joinpath("reference.yaml").read_text())
    steps = []
    for raw in path.split("."):
        m = SEGMENT.match(raw)
        steps.append((m.group("name"), [b for b in BRACKET.findall(m.group("brackets"))]))
    found = _walk(data, steps)
    if path.endswith("]") and isinstance(found, list):  # an item of a list: the first one
        return found[0] if found else None
    return found


def _walk(data: Any, steps: list) -> Any:
    if not steps:
        return data
    (name, brackets), rest = steps[0], steps[1:]
    if isinstance(data, list):
        for item in data:
            found = _walk(item, steps)
            if found is not None:
                return found
        return None
    if not isinstance(data, dict) or name not in data:
        return None
    value = data[name]
    for inner in brackets:
        if not isinstance(value, list):
            return None
        if inner.isdigit():
            value = value[int(inner)] if int(inner) < len(value) else None
        elif "=" in inner:
            key, _, want = inner.partition("=")
            value = [v for v in value if isinstance(v, dict) and str(v.get(key.strip())) == want.strip()]
    return _walk(value, rest)


def _map(node: dict) -> dict | None:
    """A free-form mapping (labels, nccl.env): what its keys and values must be."""
    keys, values = node.get("propertyNames"), node.get("additionalProperties")
    if not isinstance(keys, dict) and not isinstance(values, dict):
        return None
    out = {}
    if isinstance(keys, dict):
        out["keys"] = {"title": keys.get("title"), "allowed": allowed(keys)}
    if isinstance(values, dict):
        out["values"] = {"title": values.get("title"), "type": type_text(values), "allowed": allowed(values),
                         "description": _deref(values).get("description", "")}
    if "maxProperties" in node:
        out["max_entries"] = node["maxProperties"]
    return out


def explain(path: str) -> dict:
    """Everything `fleetform explain` prints for PATH, as data (the json format)."""
    current = resolve(path)
    node = current.node
    found_default = default(node)
    return {
        "path": current.path or ".",
        "type": "object (the blueprint)" if not current.path else type_text(node),
        "required": current.required,
        "default": None if found_default is None else found_default[0],
        "default_from": None if found_default is None else found_default[1],
        "allowed": allowed(node),
        "title": node.get("title"),
        "description": node.get("description", ""),
        "conditions": {key: value for key, value in current.chosen.items()},
        "branches": [{"when": {key: value}, "requires": sorted(_required(then)),
                      "forbids": sorted(n for n, s in then.get("properties", {}).items() if s == {"not": {}})}
                     for key, value, then in _conditions(_items(node) or node if "properties" not in node else node)]
        if not current.chosen else [],
        "map": _map(node),
        "fields": children(current),
        "example": example(current),
    }


def _wrap(text: str, indent: str, width: int = 96) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [indent.rstrip()]


LABELS = {"pattern": "PATTERN", "minimum": "MINIMUM", "exclusiveMinimum": "ABOVE", "maximum": "MAXIMUM",
          "exclusiveMaximum": "BELOW", "minLength": "MIN LEN", "maxLength": "MAX LEN", "minItems": "MIN ITEMS",
          "maxItems": "MAX ITEMS", "uniqueItems": "UNIQUE", "format": "FORMAT"}
"""The text format's names of the JSON Schema keywords of allowed values (the json format keeps the keywords)."""


def text(data: dict) -> str:
    import yaml

    lines = [f"FIELD:     {data['path']}", f"TYPE:      {data['type']}"]
    if data["required"] is not None:
        lines.append(f"REQUIRED:  {'yes' if data['required'] else 'no'}")
    if data["default"] is not None:
        where = "" if data["default_from"] == "schema" else "  (from the description)"
        lines.append(f"DEFAULT:   {data['default']}{where}")
    for key, value in data["allowed"].items():
        if key == "values":
            lines.append(f"VALUES:    {', '.join(str(v) for v in value)}")
        else:
            lines.append(f"{LABELS.get(key, key) + ':':<11}{value}")
    if data["conditions"]:
        lines.append("WHEN:      " + ", ".join(f"{k} = {v}" for k, v in data["conditions"].items()))
    lines += ["", "DESCRIPTION:"]
    if data["title"]:
        lines += _wrap(data["title"] + ".", "  ")
    lines += _wrap(data["description"] or "(none)", "  ")
    if data["branches"]:
        lines += ["", "BRANCHES (explain PATH[FIELD=VALUE] for one):"]
        for b in data["branches"]:
            ((key, value),) = b["when"].items()
            parts = []
            if b["requires"]:
                parts.append(f"requires {', '.join(b['requires'])}")
            if b["forbids"]:
                parts.append(f"forbids {', '.join(b['forbids'])}")
            lines += _wrap(f"{key} = {value}: {'; '.join(parts) or 'no other rule'}", "  ")
    if data["map"]:
        lines += ["", "ENTRIES:"]
        for part in ("keys", "values"):
            entry = data["map"].get(part)
            if entry:
                head = f"  {part}: {entry.get('type') or 'string'}" + (f" ({entry['title']})" if entry["title"] else "")
                lines.append(head)
                lines += [f"    {LABELS.get(k, k).lower()}: {v}" for k, v in entry["allowed"].items() if k != "values"]
                if entry.get("description"):
                    lines += _wrap(entry["description"], "    ")
        if "max_entries" in data["map"]:
            lines.append(f"  at most {data['map']['max_entries']} entries")
    if data["fields"]:
        lines += ["", "FIELDS:"]
        width = max(len(f["name"]) + (11 if f["required"] else 0) for f in data["fields"])
        for f in data["fields"]:
            name = f["name"] + (" <required>" if f["required"] else "")
            lines.append(f"  {name:<{width}}  {f['type']}")
            if f["description"]:
                lines += _wrap(f["description"], "    ")
    if data["example"] is not None:
        key = data["path"].rsplit(".", 1)[-1].split("[", 1)[0] if data["path"] != "." else None
        item = data["path"].endswith("]")  # an item of a list: shown as one
        shown = {key: [data["example"]] if item else data["example"]} if key else data["example"]
        lines += ["", "EXAMPLE:"]
        lines += ["  " + line for line in yaml.safe_dump(shown, sort_keys=False, default_flow_style=False,
                                                          width=88).rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


def paths(limit_depth: int = 8) -> list[str]:
    """Every field path in dot style (lists entered by their item fields), for shell completion."""
    found: list[str] = []

    def walk(node: dict, prefix: str, depth: int) -> None:
        if depth > limit_depth:
            return
        node = _deref(node)
        if "properties" not in node and not _branches(node) and _items(node) is not None:
            node = _items(node)
        for name, sub in _properties(node).items():
            path = f"{prefix}.{name}" if prefix else name
            found.append(path)
            walk(sub, path, depth + 1)

    walk(schema(), "", 0)
    return found
