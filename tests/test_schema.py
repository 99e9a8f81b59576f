"""The JSON Schema: well-formed, documented, closed, and the contract's examples validate."""

from __future__ import annotations

import json

import pytest
from conftest import AWS_TRAINING_HEAD, EXAMPLES, ROOT, run_cli
from jsonschema import Draft202012Validator

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


# --- bounded numbers and output (issue 9, defect 11) -----------------------------------------------


def _numeric(node):
    types = node.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    return "integer" in types or "number" in types


def test_every_number_the_schema_takes_is_bounded():
    """`slo.redundancy: 1e30` was accepted and sized into 3.75e29 replicas: every numeric property
    has a lower and an upper bound, what a real fleet can be."""
    numeric = [(path, node) for path, node in _objects(schema()) if _numeric(node)]
    assert len(numeric) > 25
    unbounded = [".".join(map(str, path)) for path, node in numeric
                 if not {"maximum", "exclusiveMaximum"} & set(node) or not {"minimum", "exclusiveMinimum"} & set(node)]
    assert unbounded == []


def test_a_huge_redundancy_is_a_finding_with_a_hint_in_range():
    found = findings("    scheduler: {type: slurm}\n  - name: serve\n    role: inference\n    instance_type: g6.xlarge\n"
                     "    scheduler: {type: kubernetes, version: '1.33'}\n    models:\n      - {name: m, image: 'v:1', "
                     "model: m, model_params_billion: 1, precision: bf16, tensor_parallel: 1, "
                     "slo: {peak_qps: 1, qps_per_gpu: 1, redundancy: 1000000000000000000000000000000}}\n")
    assert found == [("fleets[1].models[0].slo.redundancy", 15, "a number of 31 digits is above the maximum of 100,000",
                      "spare replicas for failures (1: N+1); at most 100,000, the most replicas a model may have")]
    found = findings("    nodes: 1.0e+30\n")
    assert all("1000000000000000019884624838656" not in hint for *_, hint in found)  # never a hint out of range


def test_printed_findings_are_capped_with_a_count_of_the_rest(write):
    """60,000 invalid fleets printed 180,000 lines: the reports show the first 200 and count the rest."""
    from fleetform.findings import MAX_PRINTED

    fleets = "".join(f"  - {{name: f{i}, role: x}}\n" for i in range(300))
    path = write("apiVersion: fleetform/v1\nkind: Blueprint\nmetadata: {name: a, version: 1.0.0}\n"
                 "provider: {cloud: onprem}\nfleets:\n" + fleets)
    text = run_cli("validate", str(path))
    lines = text.stdout.splitlines()
    assert text.returncode == 1 and len(lines) == MAX_PRINTED + 2
    assert all(": error: fleets[" in line for line in lines[:MAX_PRINTED])
    assert lines[-2] == ("... and 100 more findings not shown (100 errors, 0 warnings); the first 200 are above: "
                         "fix those and run again")
    assert lines[-1] == "1 blueprint checked, invalid: 300 errors, 0 warnings"
    data = json.loads(run_cli("validate", "--format", "json", str(path)).stdout)
    assert len(data["findings"]) == MAX_PRINTED
    assert (data["summary"]["errors"], data["summary"]["shown"], data["summary"]["not_shown"]) == (300, 200, 100)


def test_a_fleet_is_no_larger_than_slurms_hostlist_parser_accepts():
    """slurmctld 22.05 stops on `train-[00001-100000]` ("Too many hosts in range": Slurm's hostlist
    MAX_RANGE is 64K), which the schema once allowed; benchmarks/slurmctld_topology.py measures the
    start of the largest fleet and topology that remain."""
    assert findings("    nodes: 65536\n") == []
    assert findings("    nodes: 65537\n")[0][2] == "65537 is above the maximum of 65,536"
    assert findings("    nodes: {min: 1, max: 65537}\n")[0][2] == "65537 is above the maximum of 65,536"


def test_every_report_format_caps_the_findings_it_prints():
    from fleetform.findings import MAX_PRINTED, Finding, Severity, report_github, report_text

    many = [Finding("bp.yaml", i + 1, 1, Severity.WARNING if i % 3 else Severity.ERROR, "x", "m", "r")
            for i in range(MAX_PRINTED + 50)]
    for report in (report_text, report_github):
        lines = report(many, 1).splitlines()
        assert len(lines) == MAX_PRINTED + 2, report.__name__
        assert lines[-2] == ("... and 50 more findings not shown (17 errors, 33 warnings); the first 200 are above: "
                             "fix those and run again")
        assert lines[-1] == "1 blueprint checked, invalid: 84 errors, 166 warnings"
