"""Blueprints that pass the schema, generated from the schema itself, and the oracle every one must
pass (issue 19): the machinery of tests/test_fuzz_schema.py, kept apart so its mutation tests can
run the same oracle on code with a regression injected.

The generator walks the live schema (fleetform.schema.schema(), so a loosened pattern loosens what
is generated): every property of every object, array items and map entries (labels, env) become a
*slot*. A value for a slot is drawn from what the slot's own subschema accepts: enum and const
values, boundary numbers, and for strings a list of hostile texts (YAML 1.1 look-alikes such as
`yes`, `null`, `1e3`, `0x10`, `012`; shell, Jinja, YAML and Slurm metacharacters; unicode; the
longest length allowed) kept where they match the pattern, plus strings drawn from the pattern
itself (hypothesis' from_regex). A slot whose parent object is missing in a seed gets the parent,
with its required fields. Seeds: the shipped blueprints and tests/variants.py.

hypothesis-jsonschema was considered and not used: it builds whole documents from scratch, and a
schema-valid random fleet is almost always refused by the rules (an unknown instance type, a model
that does not fit), so few examples would reach the renderers; and it draws strings from the
pattern only, never the hostile texts that a pattern still lets through. Mutating valid seeds one
slot at a time keeps most examples accepted and every slot reachable.

The oracle (check): a blueprint the rules refuse gets clean findings and exit 1, nothing else; an
accepted one renders, and every rendered file is read as its consumer reads it
(tests/fuzz_oracles.py), nccl.env's variables equal the model's, the user data's cluster.env
equals the values it was given, and the hostile string reads back wherever the same blueprint with
an inert word in its place shows that word.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

import fuzz_oracles as oracles
from conftest import EXAMPLES
from fleetform import cli, pipeline, plaintext
from fleetform import schema as schema_module
from fleetform.loader import load
from fleetform.render import render as render_all

# --- hostile text -----------------------------------------------------------------------------------

HOSTILE_CLASSES = {
    # YAML 1.1 readers (kubectl's) take these for booleans, nulls, numbers, dates
    "yaml": ["yes", "null", "no", "on", "off", "y", "n", "true", "false", "nan", "inf", "1e3", "0x10", "0o17", "012",
             "4711", "1_000", "1:30", "2024-01-01", "1.5", "Yes", "NO", "True", "NULL", "~"],
    # shell: what an unquoted or double-quoted value would run, split or expand
    "shell": ["$(reboot)", "a b", "`id`", '"', "a;b", "a|b", "a&&b", "'", "a'b", 'a"b', "$HOME", "${x}", "a\\b", "*",
              "a=b"],
    # Jinja (the schema refuses them: they test the refusal's absence in mutation tests)
    "jinja": ["{{ 7*7 }}", "{% if %}", "{# x #}"],
    # YAML, Slurm and list structure
    "structure": ["a #b", "#comment", "a#b", "a: b", "- a", "[a]", "{a: b}", "&anchor", "*alias", "!tag", "%TAG", "@x",
                  "?", "|", ">", ",", "a,b", " a", "a ", "", "-", "---", "..."],
    # what a pattern a little looser than the schema's would let through: capitals, `_`, `.`, a leading digit
    "near-miss": ["A", "a_b", "aB", "a.b", "1a", "a-", "-a", "a b"],
    "unicode": ["ñandú", "日本語", "Ω", "e\u0301", "a\u200bb", "\u202eabc", "😀", "ａ", "İ"],
    # line breaks and controls (the schema refuses them: see above); Python's `$` matches before a final
    # line break, so `a\n` matches every anchored pattern that `a` matches
    "line": ["a\n", "yes\n", "a\nb", "a\rb", "a\u2028b", "a\x00b", "a\tb"],
}
HOSTILE = [value for values in HOSTILE_CLASSES.values() for value in values]
FORMS = [
    # well-formed values for the schema's id and path patterns, each with a hostile twist where it fits
    "subnet-0123456789abcdef0", "subnet-01234567", "vpc-0123456789abcdef0", "cr-0123456789abcdef0",
    "/", "/yes", "/fsx/1e3", "/fsx/..", "/fsx/-rf", "/fsx/a.b_c-d/", "s3://zqvzq-bucket/x", "s3://yes-1/null/",
    "s3://a.b-c/it's(1)=+!/", "ami-0123456789abcdef0", "/opt/dlami/null", "1.0.0-rc.1+yes", "0.0.0",
    "10.0.0.0/16", "0.0.0.0/0", "192.168.1.7/32", "us-east-1", "us-east-1a", "us-gov-west-1", "p5.48xlarge",
    "org/model-1.5_b", "meta-llama/Llama-3.1-8B", "ghcr.io/a/b:1.0", "a/b@sha256:" + "0" * 64, "NCCL_IB_TIMEOUT",
    "gpu-[001-004]", "yes-[1-2],n", "7-00:00:00", "UNLIMITED", "60", "1:30", "3g.40gb", "24.05", "25.11.1",
    "1.31", "http://prometheus.monitoring:9090/x_y~", "train/controller", "storage/yes", "sub/dir.1/-x",
]
INERT = ["zqvzq", "zqvzq0", "/zqvzq", "zqvzq.zqvzq", "s3://zqvzq/", "s3://zqvzq/zqvzq", "Zqvzq", "zqvzq/zqvzq"]
"""Twins' words: one of them is valid wherever most strings are, and appears in no blueprint."""


# --- the schema's slots -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    path: tuple  # property names, "*" for an array's items, "{}" for a map's entries
    sub: dict  # the subschema, $refs resolved at the top

    def __str__(self) -> str:
        return ".".join(map(str, self.path))


def _deref(node: dict, defs: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        rest = {k: v for k, v in node.items() if k != "$ref"}
        node = {**defs[node["$ref"].split("/")[-1]], **rest}
    return node


def slots(root: dict | None = None) -> list[Slot]:
    """Every property of every object of the schema, array items and map entries, depth first."""
    root = root or schema_module.schema()
    defs = root.get("$defs", {})
    found: dict[tuple, Slot] = {}

    def walk(node, path):
        node = _deref(node, defs)
        if not isinstance(node, dict):
            return
        for branch in node.get("anyOf", []) + node.get("oneOf", []):
            walk(branch, path)
        for name, sub in node.get("properties", {}).items():
            if sub == {"not": {}} or name in ("$schema",):
                continue
            here = path + (name,)
            if here not in found:
                found[here] = Slot(here, _deref(sub, defs))
                walk(sub, here)
        if isinstance(node.get("items"), dict):
            here = path + ("*",)
            if here not in found:
                found[here] = Slot(here, _deref(node["items"], defs))
                walk(node["items"], here)
        if isinstance(node.get("additionalProperties"), dict):
            here = path + ("{}",)
            if here not in found:
                found[here] = Slot(here, {**_deref(node["additionalProperties"], defs),
                                          "x-key": node.get("propertyNames", {})})
                walk(node["additionalProperties"], here)

    walk(root, ())
    return [s for s in found.values() if s.path[0] not in ("apiVersion", "kind", "extends")]


def _validator(sub: dict) -> Draft202012Validator:
    root = schema_module.schema()
    return Draft202012Validator({**{k: v for k, v in sub.items() if k != "x-key"}, "$defs": root.get("$defs", {})})


def _fits(validator: Draft202012Validator, value) -> bool:
    if isinstance(value, str) and plaintext.problem(value) is not None:
        return False
    if isinstance(value, float) and isinstance(value, int):
        return False
    return validator.is_valid(value)


def _types(sub: dict) -> list[str]:
    t = sub.get("type")
    if isinstance(t, list):
        return t
    if t:
        return [t]
    if "enum" in sub or "const" in sub:
        return []
    if "anyOf" in sub or "oneOf" in sub:
        out = []
        defs = schema_module.schema().get("$defs", {})
        for branch in sub.get("anyOf", []) + sub.get("oneOf", []):
            out += _types(_deref(branch, defs))
        return out
    return ["string"]


def candidates(sub: dict, defs: dict | None = None) -> list:
    """The values the subschema accepts among the hostile ones, most hostile first: enum and
    const values, boundary numbers, hostile strings and the longest string allowed."""
    defs = defs if defs is not None else schema_module.schema().get("$defs", {})
    sub = _deref(sub, defs)
    validator = _validator(sub)
    if "const" in sub:
        return [sub["const"]]
    if "enum" in sub:
        return [v for v in sub["enum"] if _fits(validator, v)]
    out: list = []
    for t in _types(sub):
        if t == "string":
            out += list(HOSTILE) + FORMS + [str(e) for e in sub.get("examples", [])]
            if sub.get("minLength", 0) > 1:  # a reason of at least a sentence: hostile text made long enough
                out += [f"{h} {'w' * sub['minLength']}" for h in HOSTILE] + [f"w{h}" * sub["minLength"] for h in HOSTILE[:3]]
            if "maxLength" in sub and sub.get("examples"):
                base = str(sub["examples"][0])
                out.append((base + "a" * sub["maxLength"])[:sub["maxLength"]])
                out.append((base + "a9" * sub["maxLength"])[:sub["maxLength"]])
        elif t in ("integer", "number"):
            bounds = [sub.get("minimum"), sub.get("maximum")]
            if "exclusiveMinimum" in sub:
                bounds.append(sub["exclusiveMinimum"] + (1 if t == "integer" else 0.001))
            for b in [x for x in bounds if x is not None]:
                out += [b, b + 1, b - 1]
            out += [0, 1, 2, 7, 8, 64, 1000]
            if t == "number":
                out += [0.5, 0.001, 0.999, 1.5]
        elif t == "boolean":
            out += [True, False]
        elif t == "array":
            items = candidates(sub.get("items", {}), defs) if isinstance(sub.get("items"), dict) else []
            for n in (1, 2):
                if len(items) >= n:
                    out.append(items[:n])
            if items:
                out.append([items[-1]])
        elif t == "object":
            pass  # objects are reached through their properties' slots
    seen, kept = set(), []
    for v in out:
        key = json.dumps(v, sort_keys=True)
        if key not in seen and _fits(validator, v):
            seen.add(key)
            kept.append(v)
    return kept


def key_candidates(slot: Slot) -> list[str]:
    key_schema = {"type": "string", **slot.sub.get("x-key", {})}
    validator = _validator(key_schema)
    pool = ["yes", "on", "null", "1e3", "0x10", "012", "NCCL_IB_TIMEOUT", "NCCL_zqvzq", "zqvzq", "a.b/c", "x_y",
            "ZQVZQ", "NCCL_NET_GDR_LEVEL", "A", "_"] + [str(e) for e in key_schema.get("examples", [])]
    return [k for k in dict.fromkeys(pool) if _fits(validator, k)]


def inert_for(slot: Slot) -> str | None:
    validator = _validator(slot.sub)
    return next((w for w in INERT if _fits(validator, w)), None)


# --- placing a value --------------------------------------------------------------------------------


def _required_filled(sub: dict, defs: dict) -> dict:
    """A new object for a subschema: its required fields, each with its first example or candidate."""
    sub = _deref(sub, defs)
    out: dict = {}
    for name in sub.get("required", []):
        prop = _deref(sub.get("properties", {}).get(name, {}), defs)
        if prop.get("type") == "object" or "properties" in prop:
            out[name] = _required_filled(prop, defs)
            continue
        good = [e for e in prop.get("examples", []) if _fits(_validator(prop), e)] or candidates(prop, defs)
        if good:
            out[name] = good[0]
    return out


def locations(data, slot: Slot, create: bool) -> list[tuple]:
    """Concrete paths in data where the slot's value can be set (its parent exists), as tuples of
    keys and indices; with create, also where the parent objects are missing (they are made)."""
    defs = schema_module.schema().get("$defs", {})
    root = schema_module.schema()
    found: list[tuple] = []

    def walk(node, schema_node, rest, path):
        schema_node = _deref(schema_node, defs)
        if len(rest) == 1:
            if rest[0] == "*" and isinstance(node, list):
                found.extend(path + (i,) for i in range(len(node)))
                found.append(path + (len(node),))
            elif rest[0] == "{}" and isinstance(node, dict):
                found.append(path + ("{}",))
            elif isinstance(node, dict) and rest[0] != "*":
                found.append(path + (rest[0],))
            return
        head = rest[0]
        if head == "*" and isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, schema_node.get("items", {}), rest[1:], path + (i,))
        elif head == "{}" and isinstance(node, dict):
            for k, item in node.items():
                walk(item, schema_node.get("additionalProperties", {}), rest[1:], path + (k,))
        elif isinstance(node, dict) and head not in ("*", "{}"):
            sub = _property(schema_node, head, defs)
            if head in node:
                walk(node[head], sub, rest[1:], path + (head,))
            elif create and sub is not None:
                found.append(path + (("+", head),) + tuple(rest[1:]))

    walk(data, root, slot.path, ())
    return found


def _property(schema_node: dict, name: str, defs: dict):
    for branch in [schema_node] + schema_node.get("anyOf", []) + schema_node.get("oneOf", []):
        branch = _deref(branch, defs)
        if name in branch.get("properties", {}):
            return branch["properties"][name]
    return None


def place(data, location: tuple, value, key: str | None = None) -> tuple:
    """Set value at location (made by locations()); returns the concrete path it took."""
    defs = schema_module.schema().get("$defs", {})
    node, schema_node, path = data, schema_module.schema(), ()
    parts = list(location)
    while len(parts) > 1:
        part = parts.pop(0)
        if isinstance(part, tuple) and part[0] == "+":  # a missing parent object: made, required fields filled
            name = part[1]
            sub = _deref(_property(_deref(schema_node, defs), name, defs), defs)
            if "items" in sub:
                node[name] = []
            else:
                node[name] = _required_filled(sub, defs)
            part = name
            if parts[0] == "*":
                parts[0] = 0 if not node[name] else len(node[name])
                node[name].append(_required_filled(sub["items"], defs) if len(parts) > 1 else None)
                path += (name,)
                node, schema_node = node[name], sub
                continue
            if parts[0] == "{}" and len(parts) > 1:
                return path  # a map of objects missing: not reached this way
            if parts and parts[0] not in ("*", "{}") and len(parts) > 1 and parts[0] not in node[name]:
                parts[0] = ("+", parts[0])
        sub = _deref(schema_node, defs)
        if isinstance(part, int):
            schema_node = sub.get("items", {})
        elif isinstance(node, dict) and isinstance(part, str) and part in node and "properties" not in sub and \
                "additionalProperties" in sub:
            schema_node = sub["additionalProperties"]
        else:
            schema_node = _property(sub, part, defs) or {}
        node = node[part]
        path += (part,)
    last = parts[0]
    if last == "{}":
        node[key] = value
        return path + (key,)
    if isinstance(last, int) and last == len(node):
        node.append(value)
    else:
        node[last] = value
    return path + (last,)


def _at(data, location: tuple, key: str | None):
    """The value at a location place() filled (None where it is gone)."""
    node = data
    try:
        for part in location[:-1]:
            node = node[part[1] if isinstance(part, tuple) else part]
        last = location[-1]
        return node[key] if last == "{}" else node[last]
    except (KeyError, IndexError, TypeError):
        return None


# --- seeds ------------------------------------------------------------------------------------------


def _plain(data):
    return json.loads(json.dumps(data, default=lambda o: dict(o) if hasattr(o, "keys") else list(o)))


def seeds() -> dict[str, dict]:
    """The shipped blueprints (bases merged in) and the variants of tests/variants.py, by name."""
    from fleetform import bases
    from variants import VARIANTS

    out: dict[str, dict] = {}
    for path in EXAMPLES:
        doc = load(path)
        if "extends" in doc.data:
            doc = bases.resolve(doc)
        data = _plain(doc.data)
        data.pop("extends", None)
        out[path.name] = data
    for name, text in sorted(VARIANTS.items()):
        out[f"{name}.yaml"] = _plain(yaml.safe_load(text))
    # a pool ties its fleets' instance type, capacity and size to its own (rule pool-fleets), so a blueprint with a
    # pool refuses most one-field changes of its fleets: the sweep places a field in it only where no other seed can
    return dict(sorted(out.items(), key=lambda item: "pools" in item[1]))


# --- writing a blueprint ----------------------------------------------------------------------------


def dump(data) -> str:
    """JSON text, one field a line: YAML 1.2 reads JSON as it is (every string quoted, so `yes` is a
    string), and json writes it ten times faster than PyYAML's emitter."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


# --- the oracle -------------------------------------------------------------------------------------

FINDING = re.compile(r"^(?P<file>[^:\n]+):(?P<line>[1-9][0-9]*):(?P<column>[1-9][0-9]*): (?P<severity>error|warning): "
                     r".+ \[(?P<rule>[a-z0-9-]+)\]$")
SUMMARY = re.compile(r"^[0-9]+ blueprints? (valid: no errors|checked, (in)?valid: [0-9]+ errors?, [0-9]+ warnings?)")


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _assert_findings(stdout: str) -> None:
    lines = stdout.split("\n")
    assert lines[-1] == "", "output does not end with a line break"
    *findings, summary = lines[:-1]
    assert SUMMARY.match(summary), f"last line is not the summary: {summary!r}"
    for line in findings:
        if line.startswith("... and ") and "more finding" in line:
            continue
        assert FINDING.match(line), f"not a compiler-style finding: {line!r}"


def user_data(model, extra: list[str]) -> tuple[str, list[tuple[str, str]]]:
    """The user data of every training fleet's nodes (templates/cloud-init/user-data.sh.j2), with
    the deploy-time values that come from the blueprint (providers/aws/training.py: FLEETFORM_BLUEPRINT,
    FLEETFORM_FLEET, FLEETFORM_REGION) and each hostile string the example set."""
    from fleetform.render.jinja import render

    texts, given = [], []
    for fleet in model.fleets:
        if not fleet.training:
            continue
        env = [("FLEETFORM_BLUEPRINT", model.name), ("FLEETFORM_FLEET", fleet.name),
               ("FLEETFORM_REGION", str(getattr(model, "region", "") or ""))]
        env += [(f"FLEETFORM_FUZZ_{i}", value) for i, value in enumerate(extra)]
        texts.append(render("cloud-init/user-data.sh.j2", role="compute nodes", fleet=fleet.name,
                            blueprint=model.name, env=env).decode("utf-8"))
        given.append(env)
    return texts, given


def _cluster_env(text: str) -> str:
    """The here-document the user data writes to /etc/fleetform/cluster.env and then sources."""
    match = re.search(r"<<'FLEETFORM_ENV'\n(.*?)^FLEETFORM_ENV$", text, re.S | re.M)
    assert match, "the user data writes no cluster.env here-document"
    return match.group(1)


CLI_EVERY = 3
"""validate through the CLI (findings as the user reads them, exit 1, nothing on stderr) for every
third refused blueprint: the pipeline's verdict is the same, the CLI's output costs 50 ms more."""
_REFUSED = 0


@dataclass
class Outcome:
    accepted: bool
    read: dict | None = None
    files: dict | None = None


def check(data: dict, folder: Path, strings: list[str] = ()) -> Outcome:
    """The oracle. Raises AssertionError (or the consumer's parse error) on a finding."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "blueprint.yaml"
    source.write_text(dump(data), encoding="utf-8")
    result = pipeline.check(source)
    if not result.ok:
        global _REFUSED
        _REFUSED += 1
        if _REFUSED % CLI_EVERY:
            return Outcome(False)
        code, out, err = _cli("validate", str(source))
        assert (code, err) == (1, ""), f"validate of a refused blueprint: exit {code}, stderr {err!r}"
        _assert_findings(out)
        return Outcome(False)
    files = render_all(result.model)
    read = oracles.read_files(files)
    for fleet in result.model.fleets:
        if fleet.training:
            expected = {v.name: str(v.value) if not isinstance(v.value, bool) else v.value for v in fleet.nccl_env}
            got = read[f"{fleet.name}/nccl.env"]
            assert got == {k: str(v) for k, v in expected.items()}, \
                f"{fleet.name}/nccl.env sourced by bash: {got} != the model's {expected}"
    texts, given = user_data(result.model, [s for s in strings if isinstance(s, str)])
    for text, env in zip(texts, given):
        complaint = oracles.bash_syntax(text)
        assert not complaint, f"user data: bash -n: {complaint}"
        got = oracles.source_env(_cluster_env(text))
        assert got == dict(env), f"user data's cluster.env sourced by bash: {got} != {dict(env)}"
    return Outcome(True, read, files)


_TWINS: dict[str, Outcome] = {}


def twin_check(data: dict, twin: dict, mutant_read: dict, folder: Path, inert: str, value: str) -> int:
    """Render the twin (inert word in the hostile string's place); every string holding the word
    must read back from the mutant's files with the hostile string. Returns strings compared.
    A twin is checked once per run (every value tried in one field has the same twin)."""
    text = dump(twin)
    if text not in _TWINS:
        _TWINS[text] = check(twin, folder)
    twin_outcome = _TWINS[text]
    if not twin_outcome.accepted:
        return 0
    return oracles.round_trip(mutant_read, twin_outcome.read, inert, value)


def scratch() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="fleetform-fuzz-")


def _representatives(values: list, index: int) -> list:
    """Of a slot's candidates: the first, one of every class of hostile text that fits (the slot's
    position picks which, so that different slots try different members) and the last (the longest
    allowed); of a slot that takes no hostile text (an enum, a number, an id), three values."""
    hostile = [v for v in values if isinstance(v, str) and v in HOSTILE]
    if not hostile:
        picked = values[:2] + values[2:][index % max(1, len(values) - 2):][:1]  # enum values, bounds, forms
    else:
        picked = [values[0]]
        for members in HOSTILE_CLASSES.values():
            fitting = [v for v in hostile if v in members]
            if fitting:
                picked.append(fitting[index % len(fitting)])
        picked.append(values[-1])  # the longest allowed, or the last form that fits
    out = []
    for v in picked:
        if not any(v == o and type(v) is type(o) for o in out):
            out.append(v)
    return out


def _both_kinds(data: dict) -> bool:
    roles = {f.get("role") for f in data.get("fleets", []) if isinstance(f, dict)}
    return {"training", "inference"} <= roles


def sweep_cases(seed_data: dict[str, dict]) -> list[tuple[str, Slot, tuple, object, str | None]]:
    """The deterministic sweep: for every slot, the first seed where it can be placed (as it is, or
    with its parent made; a blueprint-wide field in one with both training and inference fleets, so
    its value reaches Slurm's files, nccl.env, the user data and the manifests), and the representatives of its candidates (_representatives).
    Returns (seed name, slot, location, value, key for a map entry)."""
    cases = []
    for index, slot in enumerate(slots()):
        where = None
        order = list(seed_data.items())
        if slot.path[0] != "fleets":  # a blueprint-wide field: in a blueprint with training and inference fleets
            order.sort(key=lambda item: (not _both_kinds(item[1]), len(json.dumps(item[1]))))
        for create in (False, True):
            for name, data in order:
                found = locations(data, slot, create)
                if found:
                    where = (name, found[0])
                    break
            if where:
                break
        if where is None:
            continue
        values = candidates(slot.sub)
        if not values:
            continue
        keys = key_candidates(slot) if slot.path[-1] == "{}" else [None]
        if not keys:
            continue
        picked = _representatives(values, index)
        for i, value in enumerate(picked):  # the values under a key that takes any of them
            cases.append((i, index, (where[0], slot, where[1], value, keys[0])))
        for i, key in enumerate(keys[1:3]):  # and two hostile keys (`yes`, `null` where they fit)
            cases.append((len(picked) + i, index, (where[0], slot, where[1], values[0], key)))
    # by class of hostile text, the classes the schema normally refuses first (they are there only
    # when a guard is gone), then by position: a regression meets a value of its kind early
    return [case for _, _, case in sorted(cases, key=lambda c: (_rank(c[2][3]), c[0], c[1]))]


_CLASS_ORDER = ["jinja", "line", "shell", "near-miss", "structure", "yaml", "unicode"]


def _rank(value) -> int:
    for rank, name in enumerate(_CLASS_ORDER):
        if isinstance(value, str) and value in HOSTILE_CLASSES[name]:
            return rank
    return len(_CLASS_ORDER)
