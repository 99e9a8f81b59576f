"""The JSON Schema: well-formed, documented, closed, and the contract's examples validate."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from conftest import AWS_TRAINING_HEAD, ROOT, run_cli
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
    shared = ROOT.parent / "shared/spec/reference-blueprint.yaml"
    if not shared.exists():
        pytest.skip("shared/ is not beside this checkout")
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
