"""The JSON Schema: well-formed, documented, closed, and the contract's examples validate."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from conftest import AWS_TRAINING_HEAD, EXAMPLES, ROOT, run_cli
from fleetform.loader import parse
from fleetform.schema import check, schema

FREE_FORM = {"labels", "env"}  # maps whose keys are the user's


def test_schema_is_valid_draft_2020_12():
    Draft202012Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _objects(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _objects(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, path + (i,))


def test_every_property_has_a_description():
    missing = []
    for path, node in _objects(schema()):
        for name, prop in (node.get("properties") or {}).items():
            if "if" in path:
                continue  # the conditions of if/then name properties, they do not declare them
            if isinstance(prop, dict) and prop != {"not": {}} and "description" not in prop:
                target = prop.get("$ref", "").split("/")[-1]
                if "description" not in schema()["$defs"].get(target, {}):
                    missing.append(".".join(map(str, path + (name,))))
    assert missing == []


def test_objects_are_closed_except_free_form_maps():
    open_objects = []
    for path, node in _objects(schema()):
        if node.get("type") == "object" and path and path[-1] not in FREE_FORM:
            if node.get("additionalProperties") is not False:
                open_objects.append(".".join(map(str, path)))
    assert open_objects == []


def test_cli_prints_the_schema_file():
    result = run_cli("schema")
    assert result.returncode == 0
    assert json.loads(result.stdout) == json.loads((ROOT / "blueprints/fleetform-v1.schema.json").read_text())


def test_shared_reference_validates_unchanged():
    shared = ROOT / "tests/data/shared/reference-blueprint.yaml"  # the specification's copy, see its README
    ours = (ROOT / "blueprints/reference.yaml").read_text()
    assert ours.split("\n", 1)[1] == shared.read_text(), "blueprints/reference.yaml = the shared reference + $schema line"
    assert check(parse(shared.read_bytes(), "reference")) == []


BASE = AWS_TRAINING_HEAD + """    instance_type: p5.48xlarge
"""


def findings(extra: str):
    return [(f.path, f.line, f.message, f.hint) for f in check(parse((BASE + extra).encode(), "t.yaml"))]


def test_any_of_reports_the_branch_meant():
    # a mapping is meant as {min, max}: the missing key is reported, not "not valid under any"
    assert findings("    nodes: {min: 2}\n") == [
        ("fleets[0].nodes", 9, "missing required field 'max'", "add `max:` (the largest size)")]
    # an integer is meant as a count: the minimum is reported
    assert findings("    nodes: 0\n")[0][:3] == ("fleets[0].nodes", 9, "0 is below the minimum of 1")
    # neither kind: say which kinds are accepted
    assert findings('    nodes: "6"\n')[0][2] == "expected a whole number or a mapping of fields, got a string '6'"


def test_unknown_field_and_enum_suggest_the_right_name():
    assert findings("    instnace_type: x\n")[0][:2] == ("fleets[0].instnace_type", 9)
    assert findings("    instnace_type: x\n")[0][3] == "did you mean 'instance_type'?"
    assert findings("    placement: Cluster\n")[0][3] == "did you mean 'cluster'?"


def test_numbers_meant_as_text_get_a_quote_hint():
    # quoting 1.0 would still not be a semantic version: the hint shows a valid one
    found = check(parse(BASE.replace("version: 1.0.0", "version: 1.0").encode(), "t.yaml"))
    assert [(f.path, f.hint) for f in found] == [("metadata.version", 'write it as text, e.g. "1.0.0"')]
    # quoting is all a Kubernetes version needs
    found = check(parse((BASE + "    scheduler: {type: slurm}\n  - name: serve\n    role: inference\n"
                         "    scheduler: {type: kubernetes, version: 1.33}\n").encode(), "t.yaml"))
    assert [(f.path, f.hint) for f in found] == [("fleets[1].scheduler.version", 'quote it to keep it text: "1.33"')]


# --- defect: what validates must render (issue 9, defect 3) ---------------------------------------


def _strings(data, path=()):
    """Every string value (and every key of a map whose keys are the user's) with its path."""
    if isinstance(data, dict):
        for key, value in data.items():
            if path and path[-1] in FREE_FORM:
                yield path + (key,), True
            yield from _strings(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _strings(value, path + (index,))
    elif isinstance(data, str):
        yield path, False


def _with(data, path, text, key):
    """A copy of data whose string (or key) at path holds text."""
    import copy

    out = copy.deepcopy(data)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    if key:
        parent[text] = parent.pop(path[-1])
    else:
        parent[path[-1]] = text
    return out


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_string_with_template_syntax_is_a_finding_at_its_line(example):
    """Every string a blueprint holds (names, labels, nccl env, paths, images, model ids, ...) is
    checked by the rule the render guard applies: one with a Jinja delimiter is a schema finding at
    its own line and column, never a value that validates and then stops render with exit 3."""
    from fleetform.bases import resolve
    from fleetform.findings import format_path
    from fleetform.loader import load
    from fleetform.plaintext import DELIMITERS

    doc = resolve(load(example))
    positions = list(_strings(doc.data))
    assert len(positions) > 20  # the walk reaches the blueprint's strings
    for index, (path, key) in enumerate(positions):
        delimiter = DELIMITERS[index % len(DELIMITERS)]
        original = path[-1] if key else _value_at(doc.data, path)
        hostile = f"{original[:1]}{delimiter}{original[1:]}"
        where = path[:-1] + (hostile,) if key else path
        values, keys = dict(doc.values), dict(doc.keys)  # a renamed key is where the key was written
        values[where], keys[where] = doc.values[path], doc.keys.get(path, doc.values[path])
        doc_ = type(doc)(doc.file, _with(doc.data, path, hostile, key), doc.sha256, values, keys, doc.bases)
        found = [f for f in check(doc_) if f.path == format_path(where)]
        assert found, f"{format_path(path)} with {delimiter!r} validates"
        assert f"template delimiter '{delimiter}'" in found[0].message and found[0].hint
        assert (found[0].file, found[0].line) == doc_.locate(path, key=key)[:2]


def _value_at(data, path):
    for part in path:
        data = data[part]
    return data


@pytest.mark.parametrize("text", ["a{{b", "}}", "{%", "x%}", "{#", "#}", "a\nb", "a\rb", "\x00", "\x1b[0m",
                                  "a\u2028b", "a\x85b", "ok", "tab\there", "{ {", "% }", "100%", "#1"])
def test_the_render_guard_refuses_exactly_what_validation_reports(text):
    """One source of truth: the schema stage's finding and the render guard's refusal are the same
    predicate (fleetform.plaintext.problem), so they cannot drift apart."""
    from fleetform.render.jinja import RenderError, environment

    reported = check(parse(BASE.replace("name: a,", f"name: a, description: {json.dumps(text)},").encode(), "t.yaml"))
    template = environment().from_string("x={{ v }}")
    try:
        template.render(v=text)
        refused = False
    except RenderError:
        refused = True
    assert refused == any(f.path == "metadata.description" for f in reported)


def test_the_guard_knows_the_environments_delimiters():
    from fleetform.plaintext import DELIMITERS
    from fleetform.render.jinja import environment

    env = environment()
    assert set(DELIMITERS) == {env.variable_start_string, env.variable_end_string, env.block_start_string,
                               env.block_end_string, env.comment_start_string, env.comment_end_string}


def test_nccl_env_with_template_syntax_fails_validate_render_and_plan(write):
    """The case of the issue: it validated (exit 0), then render and plan stopped with exit 3."""
    bp = write((ROOT / "blueprints/reference.yaml").read_text().replace(
        "      env: {}", '      env: {NCCL_IB_TIMEOUT: "{{ 22 }}"}'))
    for command in (["validate"], ["render", "-o", str(bp.parent / "out")], ["plan"]):
        result = run_cli(*command[:1], str(bp), *command[1:])
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert f"{bp}:64:30: error: fleets[0].nccl.env.NCCL_IB_TIMEOUT: the value holds the template " \
               "delimiter '{{'" in result.stdout
    assert not (bp.parent / "out").exists()
