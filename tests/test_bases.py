"""Versioned bases: exact pins, deep merge with named lists merged by name, nesting, cycles,
unknown names and versions, positions in base files, and the manifest's record of every base."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render

HEAD = "apiVersion: fleetform/v1\nkind: Blueprint\n"


@pytest.fixture
def repo(tmp_path):
    """A blueprint folder with its own bases/ beside it."""

    def base(name: str, version: str, text: str):
        path = tmp_path / "bases" / name / f"{version}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEAD + text)
        return path

    def blueprint(text: str):
        path = tmp_path / "bp.yaml"
        path.write_text(HEAD + text)
        return path

    return base, blueprint


PLATFORM = """metadata: {labels: {platform: x}}
provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}
fleets:
  - name: train
    role: training
    instance_type: p5.48xlarge
    nodes: 2
    scheduler:
      type: slurm
      partitions: [{name: gpu, default: true, max_time: 60}, {name: debug, max_time: 30}]
"""


def test_deep_merge_and_named_lists(repo):
    base, blueprint = repo
    base("platform", "1.0.0", PLATFORM)
    path = blueprint("""extends: {name: platform, version: 1.0.0}
metadata: {name: mine, version: 1.0.0, labels: {team: a}}
fleets:
  - name: train
    nodes: 4
    scheduler:
      partitions: [{name: debug, max_time: 90}, {name: long, max_time: UNLIMITED}]
""")
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    (train,) = result.model.fleets
    assert train.nodes.max == 4 and train.instance_type == "p5.48xlarge"  # override, inherited
    assert [(p.name, p.max_time, p.default) for p in train.scheduler.partitions] == [
        ("gpu", 60, True), ("debug", 90, False), ("long", "UNLIMITED", False)]  # merged by name, new appended
    assert dict(result.model.labels) == {"platform": "x", "team": "a"}  # mappings merge


def test_bases_extend_bases_and_the_manifest_records_each(repo):
    base, blueprint = repo
    root = base("platform", "1.0.0", PLATFORM)
    mid = base("with-storage", "2.0.0", """extends: {name: platform, version: 1.0.0}
storage: [{name: ckpt, type: s3}]
fleets: [{name: train, storage: [ckpt]}]
""")
    path = blueprint("extends: {name: with-storage, version: 2.0.0}\nmetadata: {name: mine, version: 1.0.0}\n")
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    assert result.model.fleets[0].storage == ("ckpt",)
    manifest = json.loads(render(result.model)["manifest.json"])
    assert manifest["bases"] == [
        {"name": "with-storage", "version": "2.0.0", "sha256": hashlib.sha256(mid.read_bytes()).hexdigest()},
        {"name": "platform", "version": "1.0.0", "sha256": hashlib.sha256(root.read_bytes()).hexdigest()}]


def test_a_finding_in_inherited_content_points_into_the_base(repo):
    base, blueprint = repo
    broken = base("platform", "1.0.0", PLATFORM.replace("instance_type: p5.48xlarge", "instance_type: p5.48xlarg"))
    path = blueprint("extends: {name: platform, version: 1.0.0}\nmetadata: {name: mine, version: 1.0.0}\n")
    (finding,) = check(path).findings
    assert (finding.file, finding.line, finding.rule) == (str(broken.resolve()), 8, "instance-type")


def test_cycles_are_errors(repo):
    base, blueprint = repo
    base("a", "1.0.0", "extends: {name: b, version: 1.0.0}\n")
    base("b", "1.0.0", "extends: {name: a, version: 1.0.0}\n")
    (finding,) = check(blueprint("extends: {name: a, version: 1.0.0}\n")).findings
    assert finding.rule == "extends" and "cycle: a 1.0.0 -> b 1.0.0 -> a 1.0.0" in finding.message


def test_unknown_version_lists_the_available_ones(repo):
    base, blueprint = repo
    for version in ("1.0.0", "1.2.0", "1.10.0"):
        base("platform", version, PLATFORM)
    (finding,) = check(blueprint("extends: {name: platform, version: 1.1.0}\n")).findings
    assert (finding.rule, finding.path, finding.line) == ("extends", "extends.version", 3)
    assert finding.message == "base 'platform' has no version 1.1.0" and finding.hint == "available: 1.0.0, 1.2.0, 1.10.0"


def test_unknown_base_and_loose_pins(repo):
    base, blueprint = repo
    base("platform", "1.0.0", PLATFORM)
    (unknown,) = check(blueprint("extends: {name: platfrom, version: 1.0.0}\n")).findings
    assert "no base is named 'platfrom'" in unknown.message and "platform" in unknown.hint
    (loose,) = check(blueprint("extends: {name: platform, version: ^1.0}\n")).findings
    assert "not an exact version" in loose.message


def test_a_version_in_other_scripts_digits_is_no_version(repo):
    """Python's `\\d` also matches Arabic-Indic, Bengali and other digits, and int() reads them: a pin of
    `1.1٠.0` found the base `1.10.0`, and a base file named so was listed as a version. X.Y.Z is ASCII."""
    base, blueprint = repo
    base("platform", "1.10.0", PLATFORM)
    base("platform", "1.1\u0662.0", PLATFORM)  # ARABIC-INDIC DIGIT TWO
    (loose,) = check(blueprint("extends: {name: platform, version: \"1.1\u0660.0\"}\n")).findings
    assert "not an exact version" in loose.message
    (unknown,) = check(blueprint("extends: {name: platform, version: 1.2.0}\n")).findings
    assert unknown.hint == "available: 1.10.0"


def test_shipped_bases_and_example():
    result = check(ROOT / "blueprints/team-llm.yaml")
    # vllm-serving 1.1.0 pins its model's Hub commit and Kubernetes 1.35; team-llm pins its own model
    assert result.model is not None and result.findings == []
    assert result.model.fleets[1].scheduler.version == "1.35"
    assert [m.weights.revision for m in result.model.fleets[1].models] == [
        "0e9e39f249a16976918f6564b8830bc894c89659", "a09a35458c702b33eeacc393d103063234e8bc28"]
    train, serve = result.model.fleets
    assert train.nodes.max == 6 and train.instance_type == "p5.48xlarge" and result.model.region == "us-west-2"
    assert [m.name for m in serve.models] == ["llama-8b", "qwen-7b"]
    assert [(b["name"], b["version"]) for b in result.model.bases] == [("vllm-serving", "1.1.0"), ("efa-training", "1.0.0")]


def test_duplicates_within_a_file_are_reported_not_dropped_by_the_merge(repo):
    """Merging named lists by name kept one item of a name and silently dropped the other, with its
    errors; without extends the same file is a unique-names error. Each duplicate is reported at its
    own line in its own file (issue 9, defect 6)."""
    base, blueprint = repo
    base("platform", "1.0.0", PLATFORM + "storage:\n  - {name: ckpt, type: s3}\n  - {name: ckpt, type: s3}\n")
    path = blueprint("""extends: {name: platform, version: 1.0.0}
metadata: {name: mine, version: 1.0.0}
storage:
  - {name: data, type: s3}
fleets:
  - name: train
    nodes: 4
    scheduler:
      partitions: [{name: debug, max_time: 90}, {name: debug, max_time: nonsense}]
  - name: train
    nodes: 400000
""")
    result = check(path)
    assert result.model is None
    found = [(f.file, f.line, f.column, f.path, f.rule, f.message) for f in result.findings]
    base_file = str(path.parent / "bases/platform/1.0.0.yaml")
    assert found == [
        (base_file, 15, 12, "storage[1].name", "unique-names", "storage name 'ckpt' is used more than once in this file"),
        (str(path), 11, 56, "fleets[0].scheduler.partitions[1].name", "unique-names",
         "partition name 'debug' is used more than once in this file"),
        (str(path), 12, 11, "fleets[1].name", "unique-names", "fleet name 'train' is used more than once in this file"),
    ]
    assert result.findings[2].hint.startswith("fleet names must be unique; the first is at line 8")


def test_the_same_duplicate_without_extends_is_the_same_rule(repo):
    _, blueprint = repo
    path = blueprint(PLATFORM.replace("metadata: {", "metadata: {name: mine, version: 1.0.0, ") + """  - name: train
    role: training
    instance_type: p5.48xlarge
    nodes: 2
    scheduler: {type: slurm, partitions: [{name: gpu, default: true}]}
""")
    assert [(f.rule, f.path, f.line) for f in check(path).findings] == [("unique-names", "fleets[1].name", 13)]
