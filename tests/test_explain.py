"""`fleetform explain PATH`: a field's type, default, allowed values, description, fields and example, all
read from the JSON Schema (and examples from the reference blueprint where the schema has none)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from fleetform.cli import main
from fleetform.explain import ExplainError, explain, paths, text
from fleetform.schema import schema


def _fields(data):
    return {f["name"]: f for f in data["fields"]}


def test_autoscale_like_kubectl_explain():
    data = explain("fleets.models.autoscale")
    assert (data["path"], data["type"], data["required"]) == ("fleets[].models[].autoscale", "object", False)
    node = schema()["$defs"]["model"]["properties"]["autoscale"]
    assert data["description"] == node["description"]  # the schema's own words, not a copy
    fields = _fields(data)
    assert list(fields) == list(node["properties"])
    assert fields["metric"]["required"] and fields["target_per_replica"]["required"]
    assert not fields["scale_down_window_s"]["required"]
    assert fields["metric"]["type"] == "one of queue_depth"
    assert fields["fallback_replicas"]["description"].startswith("keda: replicas to hold while the queue metric")
    assert data["example"] == {"metric": "queue_depth", "target_per_replica": 5, "scale_down_window_s": 300}
    shown = text(data)
    assert shown.startswith("FIELD:     fleets[].models[].autoscale\nTYPE:      object\nREQUIRED:  no\n")
    assert "  metric <required>              one of queue_depth\n" in shown
    assert "EXAMPLE:\n  autoscale:\n    metric: queue_depth\n" in shown


@pytest.mark.parametrize("path", ["fleets.models", "fleets[0].models", "fleets[].models", "fleets[3].models",
                                  ".fleets.models"])
def test_both_path_styles_name_one_field(path):
    assert explain(path) == explain("fleets[].models")


def test_allowed_values_and_defaults():
    util = explain("fleets.models.gpu_memory_utilization")
    assert util["allowed"] == {"exclusiveMinimum": 0, "maximum": 1}
    assert (util["default"], util["default_from"]) == ("0.9", "description")
    assert explain("fleets.role")["allowed"] == {"values": ["training", "inference"]}
    assert explain("apiVersion")["allowed"] == {"values": ["fleetform/v1"]}
    assert explain("metadata.name")["allowed"]["pattern"] == schema()["$defs"]["dnsLabel"]["pattern"]
    nodes = explain("fleets.nodes")  # anyOf: a count or a range, both shown
    assert nodes["type"] == "integer | object (range)" and set(_fields(nodes)) == {"min", "max"}
    assert explain("fleets.nodes.max")["type"] == "integer"
    assert explain("fleets.models.image")["example"] == "vllm/vllm-openai:v0.11.0"  # the schema's examples
    assert explain("provider.network.cidr")["example"] == "10.40.0.0/16"  # the reference blueprint's value
    assert explain("fleets.models.port")["default"] == "8000"


def test_discriminator_branches():
    s3 = _fields(explain("storage[type=s3]"))
    fsx = explain("storage[type=fsx-lustre]")
    assert "capacity_gib" not in s3 and "versioning" in s3  # the s3 branch forbids capacity_gib
    assert {f["name"] for f in fsx["fields"] if f["required"]} == {"name", "type", "capacity_gib",
                                                                    "throughput_mb_per_tib", "mount_path"}
    assert "versioning" not in _fields(fsx)
    assert explain("storage[type=s3]")["example"]["type"] == "s3"
    k8s = explain("fleets.scheduler[type=kubernetes]")
    assert _fields(k8s)["version"]["required"] and "partitions" not in _fields(k8s)
    # the schema's scope words: training fields leave an inference fleet's listing, and the other way round
    inference = _fields(explain("fleets[role=inference]"))
    training = _fields(explain("fleets[role=training]"))
    assert "models" in inference and "workload" not in inference and "checkpoint" not in inference
    assert "workload" in training and "models" not in training and "instance_type" in training
    assert explain("fleets[role=inference].models") == explain("fleets.models") | {"path": "fleets[role=inference].models"}
    # a discriminator's value names its branch too: fleets[].training = fleets[role=training]
    assert explain("fleets[].training.storage") == explain("fleets[role=training].storage")
    assert explain("fleets.inference")["path"] == "fleets[role=inference]"
    assert explain("storage.s3") == explain("storage[type=s3]")
    # without a branch, the branches are listed
    branches = explain("storage")["branches"]
    assert [b["when"] for b in branches] == [{"type": "fsx-lustre"}, {"type": "s3"}]


@pytest.mark.parametrize("path, says", [
    ("fleets.models.autoscal", "unknown field 'autoscal' of fleets[].models[]; did you mean 'autoscale'?"),
    ("fleets[].training.storag", "unknown field 'storag' of fleets[role=training]; did you mean 'storage'?"),
    ("fleets[role=serving]", "fleets[]: role is never 'serving'; did you mean 'training'?"),
    ("storage[kind=s3]", "unknown discriminator 'kind' of storage[]"),
    ("metadata.name[0]", "metadata.name is not a list"),
    ("fleets..models", "is not a field path"),
])
def test_unknown_paths(path, says):
    with pytest.raises(ExplainError) as err:
        explain(path)
    assert says in str(err.value)


def test_cli_exit_codes_and_json(capsys):
    assert main(["explain", "fleets.models.autoscal"]) == 2
    assert "fleetform: error: unknown field 'autoscal'" in capsys.readouterr().err
    result = run_cli("explain", "fleets.models.autoscale", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(json.dumps(explain("fleets.models.autoscale")))


def test_every_schema_path_explains():
    found = paths()
    assert len(found) > 150 and "fleets.models.autoscale.scale_up.period_s" in found
    for path in found:
        data = explain(path)
        assert data["type"] and text(data)


def test_a_mapping_says_what_its_keys_and_values_are():
    labels = explain("metadata.labels")
    node = schema()["$defs"]["metadata"]["properties"]["labels"]
    assert labels["map"]["keys"]["allowed"]["pattern"] == node["propertyNames"]["pattern"]
    assert labels["map"]["values"]["title"] == "Kubernetes label value" and labels["map"]["max_entries"] == 40
    assert "ENTRIES:\n  keys: string (Kubernetes label key)\n" in text(labels)
    assert explain("fleets.models")["map"] is None


def test_explain_reads_the_shipped_schema_without_jsonschema():
    """explain and completion read the same file the validator does, without importing the validator."""
    import subprocess
    import sys

    from fleetform import explain as module
    from fleetform.schema import SCHEMA_FILE

    assert module.SCHEMA_FILE == SCHEMA_FILE and module.schema() == schema()
    code = "import sys, fleetform.explain as e; e.explain('fleets.models'); print('jsonschema' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


@pytest.mark.parametrize("path, shown", [
    # each default as fleetform/resolve.py applies it where the blueprint leaves the field out
    ("storage.versioning", "true"),                                  # item.get("versioning", True)
    ("fleets.scheduler.namespace", "default (slinky: slurm)"),       # data.get("namespace", "default"); slinky.py
    # no slurmd.image in the values: the chart's (slinky.py SLURMD_IMAGE)
    ("fleets.scheduler.slurmd_image", "the chart's ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"),
    ("fleets.scheduler.autoscaler", "keda"),                         # data.get("autoscaler", "keda")
    ("fleets.models.replicas", "1"),                                 # item.get("replicas", 1)
    ("fleets.capacity", "on-demand"),                                # {"type": "on-demand"}
    ("fleets.capacity.type", "on-demand"),
    ("fleets.placement", "cluster for training fleets, none for inference fleets"),
    ("fleets.gpu_sharing", "none"),                                  # {"strategy": "none"}
    ("fleets.gpu_sharing.strategy", "none"),
    ("fleets.gpu_sharing.mig_strategy", "single"),
    ("fleets.scheduler.partitions.default", "false"),
    ("fleets.models.weights.source", "hub"),
    ("fleets.interconnect", "EFA where the instance has it, else TCP"),
    # a parenthesis inside the default stays whole
    ("fleets.models.autoscale.scale_up.period_s",
     "the estimated time for a replica to load its weights and become ready (60 to 1800)"),
])
def test_every_default_the_resolver_applies_is_shown(path, shown):
    """A field the resolver fills in when it is left out says so: explain printed no DEFAULT for these (the
    schema's descriptions never said), and cut "(60 to 1800)" at its ")"."""
    assert explain(path)["default"] == shown
